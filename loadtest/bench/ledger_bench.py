"""The ledger writer's pace on a backlog of expiries: staged batches against row by row.

    python -m loadtest.bench.ledger_bench [--records 20000] [--batch 2000] [--rounds 2]

Creates a throwaway database on ONSALE_PG_DSN's server (migrated, dropped afterwards) and an
event under a private prefix on ONSALE_REDIS_URL's Redis, puts `--records` EXPIRED decisions
into the event's outbox (what a burst of expiries leaves: a `decisions` row and a `holds` row
each, the fields lua/_lib.lua `emit` writes), and runs persistence/writer.py's LedgerWriter on
that backlog until it is empty, in batches of `--batch`: once as it is (a batch of BULK_MIN
records or more staged with COPY, persistence/ledger_apply.py) and once with BULK_MIN above the
batch (row by row, as the writer wrote every batch before). The methods alternate for
`--rounds` rounds, each on a backlog of its own; the writer's consumer group and the event's
mirror are made before the clock starts. Reported: records/s, ledger
rows/s (decisions + holds), and the share of the time spent in the writer's `write` (the
records read and PostgreSQL's transaction) rather than on Redis (XREADGROUP, XACK)."""

import argparse
import asyncio
import time
import uuid
from typing import Any

import asyncpg
import redis.asyncio as aioredis
from rich.console import Console
from rich.table import Table

from engine.model import keys
from engine.model.event_config import EventConfig
from engine.model.holds import SeatSpec
from engine.model.records import OUTBOX_FIELDS
from engine.store import Store
from loadtest.devstack import services
from persistence import database, ledger_apply
from persistence.migrate import migrate
from persistence.writer import LedgerWriter

T0_MS = 1_800_000_000_000


def expiry(event_id: str, i: int) -> dict[str, str]:
    """The outbox fields of hold i's EXPIRED decision (decision number i + 1)."""
    f = dict.fromkeys(OUTBOX_FIELDS, "")
    f.update(
        decision_id=f"hold:h{i}:EXPIRED",
        event=event_id,
        kind="hold",
        id=f"h{i}",
        to="EXPIRED",
        terminal="1",
        hold=f"h{i}",
        seat=f"s{i}",
        login=f"u{i}",
        amount="4500",
        policy="quarantine",
        reason="deadline_idle",
        now_ms=str(T0_MS + i),
        captured="0",
        seq=str(i + 1),
        policy_version="1",
        shadow_version="0",
    )
    f["from"] = "RESERVED"
    return f


class TimedWriter(LedgerWriter):
    """The writer, with the time spent in `write` (records read, PostgreSQL) added up."""

    in_write = 0.0

    async def write(
        self, event_id: str, entries: list[tuple[str, dict[str, str]]], batch: Any = None
    ) -> bool:
        started = time.perf_counter()
        try:
            return await super().write(event_id, entries, batch)
        finally:
            self.in_write += time.perf_counter() - started


async def backlog(redis: aioredis.Redis, prefix: str, records: int) -> str:
    """A new open event under `prefix` with `records` EXPIRED decisions in its outbox."""
    store = Store(redis, prefix=prefix, autopipeline=False)
    event_id = f"bench-{uuid.uuid4().hex[:8]}"
    await store.create_event(
        event_id,
        [SeatSpec("s0", 0.0, "A")],
        EventConfig(hold_ttl_ms=480_000, quarantine_ms=900_000),
    )
    await store.open_sale(event_id)
    stream = keys.event_key(event_id, "outbox", prefix)
    for start in range(0, records, 5_000):
        pipe = redis.pipeline(transaction=False)
        for i in range(start, min(start + 5_000, records)):
            pipe.xadd(stream, expiry(event_id, i), id=f"{T0_MS + i}-1")  # type: ignore[arg-type]
        await pipe.execute()
    return event_id


async def drain(
    redis: aioredis.Redis, pool: asyncpg.Pool, prefix: str, event_id: str, batch: int
) -> dict[str, float]:
    writer = TimedWriter(redis, pool, prefix=prefix, consumer="bench", batch_max=batch)
    await writer.prepare(event_id)  # the group and the event's mirror, off the clock
    moved, started = 0, time.perf_counter()
    while step := await writer.step(event_id):
        moved += step
    seconds = time.perf_counter() - started
    assert moved == await redis.xlen(keys.event_key(event_id, "outbox", prefix))
    return {"records": moved, "seconds": seconds, "in_write": writer.in_write}


async def main_async(records: int, batch: int, rounds: int) -> dict[str, list[dict[str, float]]]:
    admin_dsn, redis_url = services.pg_server_dsn(), services.redis_url()
    dsn = await database.create_database(admin_dsn, f"onsale_bench_{uuid.uuid4().hex[:8]}")
    redis = aioredis.from_url(redis_url, decode_responses=True)
    prefix = f"onsale:bench:{uuid.uuid4().hex[:8]}"
    results: dict[str, list[dict[str, float]]] = {"staged": [], "row by row": []}
    bulk_min = ledger_apply.BULK_MIN
    try:
        conn = await asyncpg.connect(dsn)
        await migrate(conn)
        await conn.close()
        pool = await database.create_pool(dsn, size_max=2, timeout_s=10)
        try:
            for _ in range(rounds):
                for method in results:
                    ledger_apply.BULK_MIN = bulk_min if method == "staged" else batch + 1
                    event_id = await backlog(redis, prefix, records)
                    results[method].append(await drain(redis, pool, prefix, event_id, batch))
        finally:
            ledger_apply.BULK_MIN = bulk_min
            await pool.close()
    finally:
        async for key in redis.scan_iter(match=f"{prefix}*", count=1_000):
            await redis.delete(key)
        await redis.aclose()
        await database.drop_database(admin_dsn, dsn.rsplit("/", 1)[1])
    return results


def report(results: dict[str, list[dict[str, Any]]], records: int, batch: int) -> Table:
    t = Table(title=f"ledger writer on a backlog of {records:,} expiries, batches of {batch:,}")
    for col in ("method", "records/s (each round)", "ledger rows/s", "in write()", "vs row by row"):
        t.add_column(col, justify="left" if col == "method" else "right")
    best = {m: max(r["records"] / r["seconds"] for r in runs) for m, runs in results.items()}
    for method, runs in results.items():
        rates = [r["records"] / r["seconds"] for r in runs]
        share = sum(r["in_write"] for r in runs) / sum(r["seconds"] for r in runs)
        t.add_row(
            method,
            " / ".join(f"{x:,.0f}" for x in rates),
            f"{2 * best[method]:,.0f}",
            f"{share:.0%}",
            f"{best[method] / best['row by row']:.2f}",
        )
    return t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=2_000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    results = asyncio.run(main_async(args.records, args.batch, args.rounds))
    Console().print(report(results, args.records, args.batch))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
