"""Recovery without an operator (persistence/auto_rebuild.py): a private Redis is lost mid-sale
(restarted empty) or comes back older (fenced), and two ledger writers running with automatic
rebuilds on bring the event back selling, every sale the ledger holds still sold, with no
command; only one of them rebuilds it (the PostgreSQL advisory lock)."""

import asyncio
import time

import asyncpg
import pytest

from engine.model import errors
from engine.model.event_config import EventConfig
from engine.model.states import HoldState
from engine.store import Store
from persistence.rebuild import RebuildRunning, rebuild, rebuild_lock_key
from persistence.writer import LedgerWriter
from tests.conftest import seats
from tests.fault.conftest import PrivateRedis
from tests.fault.test_redis_durability import connect
from tests.fault.test_stale_redis import alerts, buy, drain, sold_then_snapshot_then_sold

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]


async def writing(store: Store, pool: asyncpg.Pool, name: str) -> LedgerWriter:
    return LedgerWriter(store.client, pool, prefix=store.prefix, consumer=name, auto_rebuild=True)


async def selling_again(store: Store, timeout_s: float) -> float:
    """Seconds until the event is rebuilt (an older Redis still sells until it is fenced: that
    is not selling again) and a claim on it is answered by the live sale."""
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        try:  # a busy machine: a read may time out (StoreUnavailable) and is asked again
            (restored,) = await store.read.event_fields("ev", "restored_at_ms")
            if restored is not None:
                await store.claim("ev", "probe", "h-probe")
                return time.monotonic() - began
        except (errors.Recovering, errors.EventNotFound, errors.SaleNotOpen):
            pass
        except errors.StoreUnavailable:
            pass
        await asyncio.sleep(0.05)
    raise AssertionError(f"the event did not sell again within {timeout_s}s")


@pytest.mark.parametrize("loss", ["empty", "older"])
async def test_a_lost_redis_is_rebuilt_and_sells_again_without_a_command(
    private_redis: PrivateRedis, pool: asyncpg.Pool, opened: list[Store], loss: str
) -> None:
    sold = await sold_then_snapshot_then_sold(private_redis, pool)
    if loss == "empty":
        (private_redis.workdir / "dump.rdb").unlink()
    private_redis.kill()
    private_redis.start()  # empty, or from the snapshot: h1 and h2 gone, their seats free
    store = connect(private_redis)
    opened.append(store)
    writers = [await writing(store, pool, f"w{i}") for i in range(2)]
    stop = asyncio.Event()
    running = [asyncio.create_task(w.run(stop, idle_s=0.02)) for w in writers]
    try:
        took = await selling_again(store, 20.0)
    finally:
        stop.set()
        await asyncio.gather(*running)
    for hold_id in sold:
        assert (await store.read.hold("ev", hold_id)).state == HoldState.CONFIRMED
    assert sum(w.fencer.rebuilder.stats.rebuilt for w in writers) == 1  # one rebuilder
    audit = await store.read.audit("ev")
    assert audit.ok, audit.violations
    # It sells on, numbered after the ledger: the next sale reaches the ledger unrefused.
    await store.release("ev", "h-probe", "probe")
    assert await buy(store, 7) == "CONFIRMED"
    await drain(writers[0])
    async with pool.acquire() as conn:
        assert await conn.fetchval("select count(*) from ledger_alerts") == 0
    assert took < 20.0


async def test_a_second_rebuild_of_an_event_waits_for_the_first(
    private_redis: PrivateRedis, pool: asyncpg.Pool, opened: list[Store]
) -> None:
    """Whoever starts it, one rebuild of an event runs at a time: the lock is the event's."""
    await sold_then_snapshot_then_sold(private_redis, pool)
    store = connect(private_redis)
    opened.append(store)
    await store.restore.drop_event("ev")
    async with pool.acquire() as holder, pool.acquire() as conn:
        key = rebuild_lock_key("ev")
        assert await holder.fetchval("select pg_try_advisory_lock(hashtext($1))", key)
        with pytest.raises(RebuildRunning):
            await rebuild(store, conn, "ev")
        await holder.execute("select pg_advisory_unlock(hashtext($1))", key)
        report = await rebuild(store, conn, "ev")
    assert report.sold == 3


async def test_a_batch_read_from_a_lost_redis_is_not_written_after_the_rebuild(
    private_redis: PrivateRedis, pool: asyncpg.Pool, opened: list[Store]
) -> None:
    """A writer that read a batch of the outbox just before Redis was lost must not write it
    once the event is rebuilt: the rebuild numbered the event's decisions after the ledger's
    last, so the late batch would hold numbers the rebuilt Redis gives again; its next decision
    is refused, the event fenced and rebuilt a second time, decisions superseded (seen twice in
    80 rebuilds of `onsale chaos --lose-redis`). The batch's decisions were lost with Redis:
    what the rebuild restored is the event's truth."""
    store = connect(private_redis)
    opened.append(store)
    await store.create_event("ev", seats(6), EventConfig(hold_ttl_ms=600_000, quarantine_ms=60_000))
    await store.open_sale("ev")
    writer = LedgerWriter(store.client, pool, prefix=store.prefix, consumer="w")
    assert await buy(store, 0) == "CONFIRMED"
    await drain(writer)
    assert await buy(store, 1) == "CONFIRMED"
    await writer.prepare("ev")
    stream = writer._stream("ev")
    late, _new = await writer._take("ev", stream)  # read; its write comes after the rebuild
    assert late
    (private_redis.workdir / "dump.rdb").unlink(missing_ok=True)
    private_redis.kill()
    private_redis.start()  # empty; it answers PING before start returns
    async with pool.acquire() as conn:
        assert (await rebuild(store, conn, "ev", force=True)).sold == 1
    await writer._move("ev", stream, late, None)
    assert await buy(store, 2) == "CONFIRMED"  # the rebuilt event sells on
    for _ in range(3):  # the first step after the loss finds the stream new: prepared again
        await drain(writer)
    async with pool.acquire() as conn:
        sold = await conn.fetch("select hold_id from holds where state = 'CONFIRMED'")
    assert sorted(r["hold_id"] for r in sold) == ["h0", "h2"]  # h1 was lost with Redis
    assert await alerts(pool) == 0
    assert not (await writer.fencer.check()).fenced
    assert (await store.read.event_fields("ev", "status"))[0] == "open"
