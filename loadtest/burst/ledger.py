"""The ledger's figures of the T0 burst tool (`python -m loadtest.burst.main --ledger`): every hold
of the burst expires at once and its EXPIRED decision is mirrored into the ledger (rows/s, lag), and
with --ledger-drain the writer's own pace on a backlog."""

import asyncio
import time

import asyncpg
import httpx
import redis.asyncio as aioredis

from api.identity import DemoTokens
from engine.model import keys
from loadtest.devstack.stack import LocalStack
from persistence.database import create_pool
from persistence.settings import LedgerSettings
from persistence.writer import LedgerWriter


async def ledger_stats(dsn: str, expected: int, timeout_s: float = 120.0) -> dict[str, float]:
    """Once every hold of the burst has expired and its EXPIRED decision reached the ledger:
    rows/s over that storm, and the write-behind lag of each row (recorded_at - decided_at)."""
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        deadline = time.monotonic() + timeout_s
        count = 0
        while time.monotonic() < deadline:
            count = await conn.fetchval(
                "select count(*) from decisions where to_state = 'EXPIRED' and terminal"
            )
            if count >= expected:
                break
            await asyncio.sleep(0.5)
        row = await conn.fetchrow(
            """select count(*) as n,
                 extract(epoch from max(recorded_at)) * 1000 - min(decided_at_ms) as span_ms,
                 percentile_cont(0.5) within group (order by lag) as p50,
                 percentile_cont(0.99) within group (order by lag) as p99,
                 max(lag) as max
               from (select recorded_at, decided_at_ms,
                       extract(epoch from recorded_at) * 1000 - decided_at_ms as lag
                     from decisions where to_state = 'EXPIRED' and terminal) d"""
        )
    finally:
        await conn.close()
    n, span = int(row["n"]), float(row["span_ms"] or 0)
    return {
        "expired_rows": n,
        "expected": expected,
        "rows_per_s": n / (span / 1000) if span > 0 else 0.0,
        "lag_p50_ms": float(row["p50"] or 0),
        "lag_p99_ms": float(row["p99"] or 0),
        "lag_max_ms": float(row["max"] or 0),
    }


async def ledger_drain(
    stack: LocalStack, redis: aioredis.Redis, event_id: str, prefix: str, expected: int
) -> dict[str, float]:
    """The ledger writer's own pace: the burst is claimed again (its holds were all mirrored by
    the live run), the writer process killed, every new hold left to expire, then a writer
    with the ledger process's settings (ONSALE_LEDGER_BATCH_MAX) run here on that backlog of
    `expected` EXPIRED decisions: rows/s from its first batch to its last (its consumer group
    and the event's mirror made before the clock starts; a process's start left out). The
    ledger process is started again afterwards."""
    await asyncio.to_thread(stack.kill, "ledger")
    deadlines = keys.event_key(event_id, "deadlines", prefix)
    backlog = keys.event_key(event_id, "outbox", prefix)
    before = await redis.xlen(backlog)
    await refill(stack, event_id, expected)
    for _ in range(3_000):  # up to 10 minutes: every new hold expired and recorded
        if not await redis.zcard(deadlines) and await redis.xlen(backlog) >= before + expected:
            break
        await asyncio.sleep(0.2)
    settings = LedgerSettings.from_env(stack.env())  # the stack's own Redis and ledger
    pool = await create_pool(stack.ledger_dsn, size_max=2, timeout_s=10)
    writer = LedgerWriter(
        redis, pool, prefix=prefix, consumer="drain", batch_max=settings.batch_max
    )
    try:
        await writer.prepare(event_id)  # the group and the event's mirror, off the clock
        moved, started = 0, time.perf_counter()
        while step := await writer.step(event_id):
            moved += step
        seconds = time.perf_counter() - started
    finally:
        await pool.close()
    await asyncio.to_thread(stack.restart, "ledger")
    return {
        "drain_rows": moved,
        "drain_rows_per_s": moved / max(seconds, 1e-9),
        "drain_batch": settings.batch_max,
    }


async def refill(stack: LocalStack, event_id: str, n: int) -> None:
    """n more holds on the event (its seats came back when the first ones expired)."""
    tokens = DemoTokens(stack.token_secret, ttl_s=3_600)
    async with httpx.AsyncClient(base_url=stack.api_url, timeout=30) as client:
        gate = asyncio.Semaphore(64)

        async def one(i: int) -> None:
            async with gate:
                r = await client.post(
                    f"/v1/events/{event_id}/holds",
                    json={},
                    headers={"Authorization": f"Bearer {tokens.issue(f'r{i}')}"},
                )
                assert r.status_code == 201, r.text

        await asyncio.gather(*(one(i) for i in range(n)))
