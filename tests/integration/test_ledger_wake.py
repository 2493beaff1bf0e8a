"""An idle ledger writer waits on the outboxes themselves (a blocking read), not on a timer: a
decision made while it waits is in the ledger long before its idle interval ends. On real
Redis and real PostgreSQL."""

import asyncio
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest

from engine.model import keys
from engine.model.ledger_progress import LEDGER_GROUP
from engine.store import Store
from persistence import writer as w
from persistence.database import create_pool
from persistence.writer import LedgerWriter
from tests.conftest import open_sale
from tests.helpers import wait_until
from tests.integration.test_ledger import ledger_dsn

__all__ = ["ledger_dsn"]  # a fixture of test_ledger
pytestmark = [pytest.mark.redis, pytest.mark.postgres]

IDLE_S = 4.0  # the writer's idle interval: a decision waiting on it would wait this long


@pytest.fixture
async def pool(ledger_dsn: str) -> AsyncIterator[asyncpg.Pool]:
    p = await create_pool(ledger_dsn, size_max=2, timeout_s=5)
    yield p
    await p.close()


async def recorded(pool: asyncpg.Pool, hold_id: str) -> bool:
    async with pool.acquire() as conn:
        n = await conn.fetchval(
            "select count(*) from decisions where hold_id = $1 and terminal", hold_id
        )
    return bool(n)


async def test_an_idle_writer_records_each_events_decision_as_it_is_made(
    real_store: Store, pool: asyncpg.Pool
) -> None:
    sales = [await open_sale(real_store, 10) for _ in range(3)]
    writer = LedgerWriter(
        real_store.client, pool, prefix=real_store.prefix, consumer="wake", batch_max=50
    )
    stop = asyncio.Event()
    task = asyncio.create_task(writer.run(stop, idle_s=IDLE_S))
    try:
        # Every event prepared (its group made, its config mirrored): the writer is idle now.
        await wait_until(lambda: len(writer._groups) == 3, timeout_s=10)
        await asyncio.sleep(0.3)
        for round_ in range(2):  # twice: the wait resumes after the decisions it woke for
            for n, sale in enumerate(sales):
                hold_id = f"h{round_}-{n}"
                await real_store.claim(sale.event_id, f"u{round_}-{n}", hold_id)
                started = time.monotonic()
                await real_store.release(sale.event_id, hold_id, f"u{round_}-{n}")
                while not await recorded(pool, hold_id):
                    assert time.monotonic() - started < IDLE_S / 2, "waited on the timer"
                    await asyncio.sleep(0.02)
    finally:
        stop.set()
        await asyncio.wait_for(task, 2 * IDLE_S)
    for sale in sales:  # nothing left pending: every entry read was written and acknowledged
        stream = keys.event_key(sale.event_id, "outbox", real_store.prefix)
        assert (await real_store.client.xpending(stream, LEDGER_GROUP))["pending"] == 0
    assert writer.stats.entries == 6 and not writer._ahead


async def test_an_event_stuck_on_a_record_is_not_waited_past_it(
    real_store: Store, pool: asyncpg.Pool
) -> None:
    """A record the writer cannot read stays pending, and the event's step fails on it at every
    pass (one event's problem, logged; the others go on). The idle wait must not take that
    event's newer entries as its next batch: they would reach the ledger before the stuck one,
    out of stream order."""
    sale = await open_sale(real_store, 10)
    writer = LedgerWriter(
        real_store.client, pool, prefix=real_store.prefix, consumer="stuck", batch_max=50
    )
    await writer.prepare(sale.event_id)
    stream = keys.event_key(sale.event_id, "outbox", real_store.prefix)
    await real_store.client.xadd(stream, {"unreadable": "1"})
    with pytest.raises(KeyError):
        await writer.step(sale.event_id)
    await real_store.claim(sale.event_id, "u1", "h1")
    await real_store.release(sale.event_id, "h1", "u1")  # a decision after the stuck record
    assert await writer.wait(0.2) is False  # nothing to wait on
    assert not writer._ahead
    with pytest.raises(KeyError):  # still the stuck record first
        await writer.step(sale.event_id)
    async with pool.acquire() as conn:
        assert await conn.fetchval("select count(*) from decisions") == 0


async def test_a_batch_waited_for_before_its_event_was_fenced_is_never_written(
    real_store: Store, pool: asyncpg.Pool
) -> None:
    """The idle wait reads a decision; the next pass finds the event fenced (its Redis went
    back in time). That batch is dropped (left pending, as a fenced event's entries are: the
    rebuild replaces the stream), never written then or later, and the event is not waited on
    while fenced."""
    sale = await open_sale(real_store, 10)
    writer = LedgerWriter(
        real_store.client, pool, prefix=real_store.prefix, consumer="fence", batch_max=50
    )
    assert await writer.step(sale.event_id) == 0  # prepared, its stream read: idle
    await real_store.claim(sale.event_id, "u1", "h1")
    await real_store.release(sale.event_id, "h1", "u1")
    assert await writer.wait(2.0) is True
    assert [len(a.entries) for a in writer._ahead.values()] == [1]  # read, not yet written
    await writer.fencer.fence(sale.event_id, "a test's Redis went back in time")
    assert await writer.step(sale.event_id) == 0
    assert not writer._ahead
    assert await writer.wait(0.2) is False  # not waited on while fenced
    await writer.flush()
    async with pool.acquire() as conn:
        assert await conn.fetchval("select count(*) from decisions") == 0
    stream = keys.event_key(sale.event_id, "outbox", real_store.prefix)
    assert (await real_store.client.xpending(stream, LEDGER_GROUP))["pending"] == 1


async def test_a_read_ahead_that_finds_the_backlog_ended_leaves_no_empty_batch(
    real_store: Store, pool: asyncpg.Pool
) -> None:
    """A backlog that ends exactly on a full batch: the read-ahead finds nothing. No empty batch
    is kept (it would stand in for the event's next take, and keep it from the idle wait)."""
    sale = await open_sale(real_store, 10)
    writer = LedgerWriter(
        real_store.client, pool, prefix=real_store.prefix, consumer="exact", batch_max=2
    )
    await writer.prepare(sale.event_id)
    await real_store.claim(sale.event_id, "u1", "h1")
    await real_store.release(sale.event_id, "h1", "u1")
    await real_store.claim(sale.event_id, "u2", "h2")
    await real_store.release(sale.event_id, "h2", "u2")
    stream = keys.event_key(sale.event_id, "outbox", real_store.prefix)
    assert await real_store.client.xlen(stream) == 2  # exactly one full batch
    assert await writer.step(sale.event_id) == 2
    assert not writer._ahead
    assert await writer.wait(0.2) is True  # the event is waited on again


async def test_entries_delivered_behind_the_writers_back_are_read_within_a_look(
    real_store: Store, pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read whose reply was lost and that the client retried leaves entries pending for this
    writer that it never saw. It reads its own pending entries again at every look (once a
    second; 0.1 s here), not only after a failure: they are written first, in stream order."""
    monkeypatch.setattr(w, "RECLAIM_S", 0.1)
    sale = await open_sale(real_store, 10)
    writer = LedgerWriter(
        real_store.client, pool, prefix=real_store.prefix, consumer="lost", batch_max=50
    )
    assert await writer.step(sale.event_id) == 0  # idle, its stream read
    stream = keys.event_key(sale.event_id, "outbox", real_store.prefix)
    await real_store.claim(sale.event_id, "u1", "h1")
    await real_store.release(sale.event_id, "h1", "u1")
    await real_store.client.xreadgroup(LEDGER_GROUP, "lost", {stream: ">"})  # the lost reply's
    await real_store.claim(sale.event_id, "u2", "h2")
    await real_store.release(sale.event_id, "h2", "u2")
    await asyncio.sleep(0.15)
    assert await writer.step(sale.event_id) == 1  # the one delivered unseen, first
    assert await writer.step(sale.event_id) == 1  # then the new one
    async with pool.acquire() as conn:
        holds = [r[0] for r in await conn.fetch("select hold_id from decisions order by seq")]
    assert holds == ["h1", "h2"]
    assert (await real_store.client.xpending(stream, LEDGER_GROUP))["pending"] == 0
