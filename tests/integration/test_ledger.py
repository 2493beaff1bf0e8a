"""The write-behind worker and the ledger schema, on real Redis and real PostgreSQL."""

import asyncio
import os
import random
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from engine.model import keys
from engine.model.ledger_progress import LEDGER_GROUP
from engine.store import Store
from loadtest.devstack.stack import spare_port
from persistence import ledger_apply, ledger_group, schema
from persistence.database import create_pool
from persistence.migrate import MigrationError, available, migrate
from persistence.queries import Q
from persistence.writer import LedgerWriter
from tests.conftest import REDIS_URL, open_sale
from tests.helpers import callback
from tests.pg import private_database

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


@pytest.fixture
async def ledger_dsn() -> AsyncIterator[str]:
    async with private_database() as dsn:
        conn = await asyncpg.connect(dsn)
        assert await migrate(conn) == [f"{m.version:04d}_{m.name}" for m in available()]
        await conn.close()
        yield dsn


@pytest.fixture(params=["staged", "row by row"])
def batch_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every batch through the fast path (staged, whatever its size) or none of them."""
    monkeypatch.setattr(ledger_apply, "BULK_MIN", 1 if request.param == "staged" else 10**9)
    return str(request.param)


@pytest.fixture
async def pool(ledger_dsn: str) -> AsyncIterator[asyncpg.Pool]:
    p = await create_pool(ledger_dsn, size_max=2, timeout_s=5)
    yield p
    await p.close()


async def test_migrations_apply_once_and_refuse_edited_files(ledger_dsn: str) -> None:
    conn = await asyncpg.connect(ledger_dsn)
    try:
        assert await migrate(conn) == []  # second run: nothing to do
        sums = {
            r[0]: r[1] for r in await conn.fetch("select version, checksum from schema_migrations")
        }
        assert len(Q) >= 15
        for name in (n for n in Q if n.startswith("stage_")):  # the session's temp tables
            await conn.execute(Q[name])
        for name, sql in Q.items():  # every named query PREPAREs against the schema
            try:
                await conn.prepare(sql)
            except asyncpg.PostgresError as exc:
                pytest.fail(f"query {name} does not prepare: {exc}")
        await conn.execute("update schema_migrations set checksum = 'edited' where version = 1")
        with pytest.raises(MigrationError, match="edited"):
            await migrate(conn)
        await conn.execute("update schema_migrations set checksum = $1 where version = 1", sums[1])
        await conn.execute(
            "insert into schema_migrations (version, name, checksum) values (999, 'future', 'x')"
        )
        with pytest.raises(MigrationError, match="newer than the code"):
            await migrate(conn)  # a database migrated by newer code is never run by older code
    finally:
        await conn.close()


async def test_the_migrations_leave_exactly_the_schema_described(ledger_dsn: str) -> None:
    """persistence/schema.txt is what a reader sees; the migrations must produce exactly it
    (regenerate with `python -m persistence.schema > persistence/schema.txt`)."""
    conn = await asyncpg.connect(ledger_dsn)
    try:
        described = (Path(schema.__file__).parent / "schema.txt").read_text()
        assert await schema.describe(conn) == described
    finally:
        await conn.close()


async def busy_sale(store: Store, n_holds: int = 40) -> str:
    """An event whose outbox holds every kind of decision."""
    sale = await open_sale(store, n_holds, hold_ttl_ms=1000, quarantine_ms=500, now_ms=10**12)
    rng = random.Random(3)
    for i in range(n_holds):
        await store.claim(sale.event_id, f"u{i}", f"h{i}")
        roll = rng.random()
        if roll < 0.8:
            await store.start_charge(sale.event_id, f"h{i}", f"u{i}", f"c{i}", 4500)
        if roll < 0.5:
            await callback(sale, f"c{i}", "CAPTURED", attempt=f"att-{sale.event_id}-{i}")
        elif roll < 0.6:
            await callback(sale, f"c{i}", "DECLINED", attempt=f"att-{sale.event_id}-{i}")
        elif roll < 0.7:
            await store.release(sale.event_id, f"h{i}", f"u{i}")
            await callback(sale, f"c{i}", "CAPTURED", attempt=f"att-{sale.event_id}-{i}")
            await store.refund_result(sale.event_id, f"c{i}", refunded=True)
    await sale.at(10**12 + 5000)
    await store.sweep(sale.event_id)
    await store.sweep_quarantine(sale.event_id)
    await sale.audit_ok()
    return sale.event_id


async def drain(writer: LedgerWriter, event_id: str) -> None:
    while await writer.step(event_id):
        pass


async def ledger_rows(pool: asyncpg.Pool) -> dict[str, Any]:
    async with pool.acquire() as conn:
        return {
            "decisions": [
                tuple(r)
                for r in await conn.fetch(
                    "select event_id, decision_id, stream_ms, stream_seq, kind, to_state, terminal "
                    "from decisions order by stream_ms, stream_seq"
                )
            ],
            "holds": [
                tuple(r)
                for r in await conn.fetch(
                    "select hold_id, seat_id, state, winner from holds order by hold_id"
                )
            ],
            "charges": [
                tuple(r)
                for r in await conn.fetch(
                    "select charge_id, state, attempt_id from charges order by charge_id"
                )
            ],
            "refunds": [
                tuple(r)
                for r in await conn.fetch("select charge_id from refunds order by charge_id")
            ],
        }


async def test_stream_mirrors_into_ledger_and_replays_write_nothing_twice(
    real_store: Store, pool: asyncpg.Pool, batch_path: str
) -> None:
    event_id = await busy_sale(real_store)
    writer = LedgerWriter(
        real_store.client, pool, prefix=real_store.prefix, consumer="t1", batch_max=7
    )
    await drain(writer, event_id)
    first = await ledger_rows(pool)
    outbox = await real_store.read.outbox(event_id)
    assert len(first["decisions"]) == len(outbox)
    # The ledger agrees with Redis on every hold and charge that reached a recorded state.
    report = await real_store.read.audit(event_id)
    assert report.ok
    for hold_id, _seat, state, _winner in first["holds"]:
        assert (await real_store.read.hold(event_id, hold_id)).state == state
    for charge_id, state, _attempt in first["charges"]:
        assert (await real_store.read.charge(event_id, charge_id)).state == state
    assert {r[0] for r in first["refunds"]} == {
        c for c, s, _a in first["charges"] if s == "REFUNDED"
    }
    # Replay the whole stream from the start, twice: same rows.
    stream = keys.event_key(event_id, "outbox", real_store.prefix)
    for n in range(2):
        await real_store.client.xgroup_destroy(stream, LEDGER_GROUP)
        replay = LedgerWriter(
            real_store.client, pool, prefix=real_store.prefix, consumer=f"replay{n}", batch_max=50
        )
        await drain(replay, event_id)
        assert await ledger_rows(pool) == first
    assert await writer.lag(event_id) == (0, 0.0)


async def test_a_batch_read_ahead_is_written_once_and_never_lost(
    real_store: Store, pool: asyncpg.Pool
) -> None:
    """A full batch of new entries has the next one read while it is written. That batch is
    pending for the writer: written by its next step, or by `flush` at a stop; when a write
    fails it stays pending and the next take reads it again with the failed one."""
    event_id = await busy_sale(real_store, 12)
    stream = keys.event_key(event_id, "outbox", real_store.prefix)
    total = await real_store.client.xlen(stream)
    writer = LedgerWriter(
        real_store.client, pool, prefix=real_store.prefix, consumer="ra", batch_max=4
    )
    assert await writer.step(event_id) == 4
    assert [len(b.entries) for b in writer._ahead.values()] == [4]  # read, pending, not yet written
    assert (await real_store.client.xpending(stream, LEDGER_GROUP))["pending"] == 4
    real_write = writer.write

    async def outage(*_a: Any) -> bool:
        raise asyncpg.CannotConnectNowError("the ledger is down")

    writer.write = outage  # type: ignore[method-assign]
    with pytest.raises(asyncpg.CannotConnectNowError):
        await writer.step(event_id)  # the read-ahead batch fails; what it read stays pending
    assert not writer._ahead and (await real_store.client.xpending(stream, LEDGER_GROUP))["pending"]
    writer.write = real_write  # type: ignore[method-assign]
    assert await writer.step(event_id) == 4  # the pending ones first, in stream order
    for _ in range(3):  # then new ones again, read ahead
        await writer.step(event_id)
        if writer._ahead:
            break
    assert writer._ahead  # a stop now: flush writes the batch in hand
    await writer.flush()
    assert not writer._ahead
    await drain(writer, event_id)
    assert (await real_store.client.xpending(stream, LEDGER_GROUP))["pending"] == 0
    async with pool.acquire() as conn:
        assert await conn.fetchval("select count(*) from decisions") == total
    assert writer.stats.entries == total


async def test_verified_raw_callbacks_reach_the_ledger_once_byte_for_byte(
    real_store: Store, pool: asyncpg.Pool
) -> None:
    """The raw stream (as the callback route keeps it) lands in raw_callbacks: the first
    delivery of each provider event, byte for byte, with Redis's receive time; a duplicate
    delivery and a replay of the stream add nothing; an entry trimmed while pending is skipped."""
    sale = await open_sale(real_store, 1)
    bodies = {f"evt_{n}": f'{{"id":"evt_{n}","amount":{n},"note":"caf\u00e9 é"}}' for n in range(3)}
    for pev, body in [*bodies.items(), ("evt_1", '{"id":"evt_1","duplicate":true}')]:
        await real_store.notes.keep_raw_callback(sale.event_id, pev, body.encode(), 1000)
    writer = LedgerWriter(real_store.client, pool, prefix=real_store.prefix, consumer="r")
    await drain(writer, sale.event_id)
    raw_stream = keys.event_key(sale.event_id, "raw_callbacks", real_store.prefix)
    first_ms = int((await real_store.client.xrange(raw_stream, count=1))[0][0].split("-")[0])
    async with pool.acquire() as conn:
        rows = await conn.fetch(Q["event_raw_callbacks"], sale.event_id)
    assert {r["provider_event_id"]: bytes(r["body"]).decode() for r in rows} == bodies
    assert all(r["received_at_ms"] >= first_ms for r in rows)
    await real_store.client.xgroup_destroy(raw_stream, LEDGER_GROUP)
    writer._groups.clear()
    await drain(writer, sale.event_id)  # replayed from the start: nothing new
    async with pool.acquire() as conn:
        assert await conn.fetchval("select count(*) from raw_callbacks") == 3
    # Delivered, then trimmed away before the ack (the stream is capped): acknowledged, skipped.
    await real_store.notes.keep_raw_callback(sale.event_id, "evt_9", b"{}", 1000)
    reply = await real_store.client.xreadgroup(LEDGER_GROUP, "dead", {raw_stream: ">"}, count=10)
    await real_store.client.xtrim(raw_stream, maxlen=0)
    slow = LedgerWriter(
        real_store.client, pool, prefix=real_store.prefix, consumer="s", claim_idle_ms=0
    )
    await drain(slow, sale.event_id)
    assert len(reply[0][1]) == 1
    assert (await real_store.client.xpending(raw_stream, LEDGER_GROUP))["pending"] == 0
    async with pool.acquire() as conn:
        assert await conn.fetchval("select count(*) from raw_callbacks") == 3


async def test_a_refused_row_becomes_an_alert_and_the_batch_still_lands(
    real_store: Store, pool: asyncpg.Pool, batch_path: str
) -> None:
    event_id = await busy_sale(real_store, 6)
    stream = keys.event_key(event_id, "outbox", real_store.prefix)
    terminal = next(
        r
        for r in await real_store.read.outbox(event_id)
        if r["kind"] == "hold" and r["terminal"] == "1"
    )
    forged = {
        **terminal,
        "decision_id": terminal["decision_id"] + ":forged",
        "to": "EXPIRED",
        "seq": "0",  # refused for what it says, not for its number
    }
    await real_store.client.xadd(stream, forged)
    writer = LedgerWriter(
        real_store.client, pool, prefix=real_store.prefix, consumer="t", batch_max=1000
    )
    await drain(writer, event_id)
    async with pool.acquire() as conn:
        alerts = await conn.fetch("select decision_id, problem, record from ledger_alerts")
        n_decisions = await conn.fetchval("select count(*) from decisions")
    assert [a["decision_id"] for a in alerts] == [forged["decision_id"]]
    assert "UniqueViolation" in alerts[0]["problem"]
    assert alerts[0]["record"]["to"] == "EXPIRED"
    assert n_decisions == len(await real_store.read.outbox(event_id)) - 1
    assert writer.stats.alerts == 1


async def test_kill_9_mid_batch_loses_nothing_and_duplicates_nothing(
    real_store: Store, ledger_dsn: str, pool: asyncpg.Pool
) -> None:
    event_id = await busy_sale(real_store, 60)
    # A long stream: many decisions so that kills land mid-way.
    stream = keys.event_key(event_id, "outbox", real_store.prefix)
    sample = await real_store.read.outbox(event_id)
    async with real_store.client.pipeline(transaction=False) as pipe:
        for n in range(20_000):
            base = sample[n % len(sample)]
            pipe.xadd(
                stream,
                # planted, not decided: no decision number (as records older than it)
                {**base, "decision_id": f"bulk:{n}", "terminal": "0", "kind": "alert", "seq": "0"},
            )
        await pipe.execute()
    total = await real_store.client.xlen(stream)
    env = {
        **os.environ,
        "ONSALE_REDIS_URL": REDIS_URL,
        "ONSALE_KEY_PREFIX": real_store.prefix,
        "ONSALE_PG_DSN": ledger_dsn,
        "ONSALE_LEDGER_BATCH_MAX": "25",
        "ONSALE_LEDGER_CLAIM_IDLE_MS": "200",
        "ONSALE_LEDGER_METRICS_PORT": str(spare_port()),
    }
    rng = random.Random(9)
    cmd = [sys.executable, "-m", "onsale.cli", "ledger"]

    async def written() -> int:
        async with pool.acquire() as conn:
            return int(await conn.fetchval("select count(*) from decisions"))

    for _ in range(4):
        before = await written()
        proc = await asyncio.create_subprocess_exec(
            *cmd, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        for _ in range(200):  # kill only once it is writing, however slow it was to start
            if await written() > before:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    async with pool.acquire() as conn:
        partial = await conn.fetchval("select count(*) from decisions")
    assert 0 < partial < total  # the kills did land mid-stream
    proc = await asyncio.create_subprocess_exec(
        *cmd, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    try:
        for _ in range(600):
            async with pool.acquire() as conn:
                if await conn.fetchval("select count(*) from decisions") == total:
                    break
            await asyncio.sleep(0.1)
    finally:
        proc.terminate()
        await proc.wait()
    async with pool.acquire() as conn:
        ids = [r[0] for r in await conn.fetch("select decision_id from decisions")]
    outbox_ids = [r["decision_id"] for r in await real_store.read.outbox(event_id, count=10**6)]
    assert sorted(ids) == sorted(outbox_ids)  # nothing lost, nothing twice
    pending = await real_store.client.xpending(stream, LEDGER_GROUP)
    assert pending["pending"] == 0


async def test_trimming_never_passes_what_the_ledger_holds(
    real_store: Store, pool: asyncpg.Pool
) -> None:
    event_id = await busy_sale(real_store, 10)
    stream = keys.event_key(event_id, "outbox", real_store.prefix)
    total = await real_store.client.xlen(stream)
    writer = LedgerWriter(
        real_store.client, pool, prefix=real_store.prefix, consumer="a", batch_max=5, retention_ms=0
    )
    assert await writer.step(event_id) == 5
    # Delivered to a consumer that dies before writing: pending, so never trimmed.
    dead = LedgerWriter(
        real_store.client,
        pool,
        prefix=real_store.prefix,
        consumer="dead",
        batch_max=5,
        retention_ms=0,
    )
    await dead.prepare(event_id)
    reply = await real_store.client.xreadgroup(LEDGER_GROUP, "dead", {stream: ">"}, count=5)
    await writer.step(event_id)  # writes past the dead one's entries (its read-ahead batch)
    first = await real_store.client.xrange(stream, count=1)
    assert first[0][0] == reply[0][1][0][0]  # trimmed up to the pending entries, not past them
    assert await real_store.client.xlen(stream) < total - 5
    await asyncio.sleep(0.05)
    writer.claim_idle_ms = 10
    await drain(writer, event_id)
    assert await real_store.client.xlen(stream) == 0
    async with pool.acquire() as conn:
        assert await conn.fetchval("select count(*) from decisions") == total


async def test_writer_recovers_when_the_stream_is_recreated(
    real_store: Store, pool: asyncpg.Pool
) -> None:
    event_id = await busy_sale(real_store, 4)
    writer = LedgerWriter(real_store.client, pool, prefix=real_store.prefix, consumer="w")
    await drain(writer, event_id)
    stream = keys.event_key(event_id, "outbox", real_store.prefix)
    record = (await real_store.read.outbox(event_id))[0]
    await real_store.client.delete(stream)  # Redis lost the stream (group and all)
    seq = await real_store.client.hincrby(
        keys.event_key(event_id, "event", real_store.prefix), "seq", 1
    )
    await real_store.client.xadd(stream, {**record, "decision_id": "after-the-loss", "seq": seq})
    assert await writer.step(event_id) == 0  # NOGROUP: forgets the group, recreates next time
    await drain(writer, event_id)
    async with pool.acquire() as conn:
        assert (
            await conn.fetchval(
                "select count(*) from decisions where decision_id = 'after-the-loss'"
            )
            == 1
        )


async def test_a_cancelled_sale_reaches_the_ledger_whole(
    real_store: Store, pool: asyncpg.Pool
) -> None:
    """Close and cancel are decisions of kind `event` (ADR 0025); the ledger takes them, and
    every hold and charge move of the cancel, and agrees with Redis."""
    event_id = await busy_sale(real_store)
    await real_store.lifecycle.close(event_id, "ops")
    assert (await real_store.lifecycle.cancel(event_id, "ops", batch=5)).complete
    writer = LedgerWriter(real_store.client, pool, prefix=real_store.prefix, consumer="t1")
    await drain(writer, event_id)
    rows = await ledger_rows(pool)
    assert len(rows["decisions"]) == len(await real_store.read.outbox(event_id))
    assert [(d[4], d[5]) for d in rows["decisions"] if d[4] == "event"] == [
        ("event", "EVENT_CLOSED"),
        ("event", "EVENT_CANCELLED"),
    ]
    for hold_id, _seat, state, _winner in rows["holds"]:
        assert (await real_store.read.hold(event_id, hold_id)).state == state
    assert "CONFIRMED" not in {state for _h, _s, state, _w in rows["holds"]}
    async with pool.acquire() as conn:
        assert await conn.fetchval("select count(*) from ledger_alerts") == 0
    assert (await real_store.read.audit(event_id)).ok


async def test_stopped_writers_leave_the_group_unless_entries_wait_for_them(
    real_store: Store, pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each writer process is its own consumer, so restarts leave consumers behind. A writer's
    first pass over an event removes those idle (an hour; 1 ms here) with nothing pending; one
    that still has entries pending is kept (deleting it would drop them from the group, and the
    ledger would never get them): the writer takes its entries over and writes them."""
    event_id = await busy_sale(real_store)
    stream = keys.event_key(event_id, "outbox", real_store.prefix)
    await real_store.client.xgroup_create(stream, LEDGER_GROUP, id="0", mkstream=True)
    await real_store.client.xgroup_createconsumer(stream, LEDGER_GROUP, "gone-idle")
    await real_store.client.xreadgroup(LEDGER_GROUP, "gone-busy", {stream: ">"}, count=2)
    await asyncio.sleep(0.01)
    monkeypatch.setattr(ledger_group, "CONSUMER_IDLE_MS", 1)
    writer = LedgerWriter(
        real_store.client, pool, prefix=real_store.prefix, consumer="t1", claim_idle_ms=1
    )
    await drain(writer, event_id)
    names = {str(c["name"]) for c in await real_store.client.xinfo_consumers(stream, LEDGER_GROUP)}
    assert names == {"gone-busy", "t1"}  # gone-idle removed; gone-busy had entries pending
    outbox = await real_store.read.outbox(event_id)
    assert len((await ledger_rows(pool))["decisions"]) == len(outbox)  # its two taken over
    gone = await ledger_group.forget_idle_consumers(real_store.client, stream, writer.consumer)
    assert gone == ["gone-busy"]  # nothing pending now
