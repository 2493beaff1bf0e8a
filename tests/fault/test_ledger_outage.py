"""PostgreSQL crashes (immediate shutdown) while the writer runs and decisions keep coming:
the writer backs off, Redis keeps the entries (the lag grows and is reported), and once the
database is back the ledger catches up with nothing lost and nothing twice."""

import asyncio
import time

import asyncpg
import pytest

from engine.model import keys
from engine.model.ledger_progress import LEDGER_GROUP
from engine.store import Store
from persistence.database import create_pool
from persistence.metrics import LedgerMetrics
from persistence.migrate import migrate
from persistence.writer import LedgerWriter
from tests.conftest import Sale, open_sale
from tests.fault.conftest import PrivatePostgres
from tests.helpers import callback, wait_until

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]


async def test_writer_rides_out_a_database_crash(
    real_store: Store, private_postgres: PrivatePostgres
) -> None:
    conn = await asyncpg.connect(private_postgres.dsn)
    await migrate(conn)
    await conn.close()
    pool = await create_pool(private_postgres.dsn, size_max=2, timeout_s=2)
    sale = await open_sale(real_store, 200)
    writer = LedgerWriter(
        real_store.client, pool, prefix=real_store.prefix, consumer="w", batch_max=20
    )
    stop = asyncio.Event()
    task = asyncio.create_task(writer.run(stop, idle_s=0.02))

    async def decide(first: int, last: int) -> None:
        for i in range(first, last):
            await real_store.claim(sale.event_id, f"u{i}", f"h{i}")
            await real_store.start_charge(sale.event_id, f"h{i}", f"u{i}", f"c{i}", 100)
            await callback(sale, f"c{i}", "CAPTURED", attempt=f"a-{sale.event_id}-{i}")

    await decide(0, 50)
    await wait_until(lambda: writer.stats.entries >= 150, timeout_s=10)
    private_postgres.crash()
    await decide(50, 150)  # sales go on while the ledger is down
    await wait_until(lambda: writer.stats.errors >= 2, timeout_s=10)
    lag_entries, lag_s = await writer.lag(sale.event_id)
    assert lag_entries >= 200 and lag_s > 0
    private_postgres.start()
    await wait_until(lambda: writer.stats.entries >= 450, timeout_s=30)
    stop.set()
    await asyncio.wait_for(task, 10)
    async with pool.acquire() as c:
        ids = sorted(r[0] for r in await c.fetch("select decision_id from decisions"))
        confirmed = await c.fetchval("select count(*) from holds where state = 'CONFIRMED'")
    outbox = sorted(r["decision_id"] for r in await real_store.read.outbox(sale.event_id))
    assert ids == outbox and confirmed == 150
    stream = keys.event_key(sale.event_id, "outbox", real_store.prefix)
    assert (await real_store.client.xpending(stream, LEDGER_GROUP))["pending"] == 0
    await pool.close()


async def _writer_with_sales(
    store: Store, dsn: str, *, metrics: LedgerMetrics | None = None
) -> tuple[asyncpg.Pool, Sale, LedgerWriter, asyncio.Event, "asyncio.Task[object]"]:
    """A migrated ledger on `dsn`, a sale, and a writer running (with `metrics`)."""
    conn = await asyncpg.connect(dsn)
    await migrate(conn)
    await conn.close()
    pool = await create_pool(dsn, size_max=2, timeout_s=2)
    sale = await open_sale(store, 200)
    writer = LedgerWriter(store.client, pool, prefix=store.prefix, consumer="w", batch_max=20)
    stop = asyncio.Event()
    task = asyncio.create_task(writer.run(stop, idle_s=0.02, metrics=metrics))
    return pool, sale, writer, stop, task


async def _decide(sale: Sale, first: int, last: int) -> None:
    """Three outbox records per buyer: claim, charge start, capture."""
    for i in range(first, last):
        await sale.store.claim(sale.event_id, f"u{i}", f"h{i}")
        await sale.store.start_charge(sale.event_id, f"h{i}", f"u{i}", f"c{i}", 100)
        await callback(sale, f"c{i}", "CAPTURED", attempt=f"a-{sale.event_id}-{i}")


def _gauge(metrics: LedgerMetrics, name: str, event_id: str) -> float:
    value = metrics.registry.get_sample_value(name, {"event": event_id})
    assert value is not None, f"{name} for {event_id} is not exported"
    return value


async def test_the_exported_lag_stays_true_while_the_database_is_down(
    real_store: Store, private_postgres: PrivatePostgres
) -> None:
    """The writer's lag gauges are read from Redis on their own clock, not after each written
    batch: while PostgreSQL is down they keep counting the entries that wait and their age."""
    metrics = LedgerMetrics()
    pool, sale, writer, stop, task = await _writer_with_sales(
        real_store, private_postgres.dsn, metrics=metrics
    )
    await _decide(sale, 0, 20)
    await wait_until(lambda: writer.stats.entries >= 60, timeout_s=10)
    private_postgres.crash()
    await _decide(sale, 20, 70)  # 150 entries wait in Redis
    await wait_until(lambda: writer.stats.errors >= 2, timeout_s=10)
    entries, _age = await writer.lag(sale.event_id)
    assert entries >= 150
    await wait_until(
        lambda: _gauge(metrics, "onsale_ledger_lag_entries", sale.event_id) >= 150, timeout_s=3
    )
    first_age = _gauge(metrics, "onsale_ledger_lag_seconds", sale.event_id)
    await asyncio.sleep(1.5)
    assert _gauge(metrics, "onsale_ledger_lag_seconds", sale.event_id) >= first_age + 1.0
    private_postgres.start()
    await wait_until(lambda: writer.stats.entries >= 210, timeout_s=30)
    await wait_until(
        lambda: _gauge(metrics, "onsale_ledger_lag_entries", sale.event_id) == 0, timeout_s=3
    )
    stop.set()
    await asyncio.wait_for(task, 10)
    await pool.close()


async def test_the_ledger_catches_up_as_soon_as_the_database_is_back(
    real_store: Store, private_postgres: PrivatePostgres
) -> None:
    """The batch that failed stays pending to this writer, which takes it up again first on
    its next pass (not after the idle-claim timeout meant for dead consumers), and the backoff
    between attempts stays short enough to notice the database's return within a second."""
    pool, sale, writer, stop, task = await _writer_with_sales(real_store, private_postgres.dsn)
    assert writer.claim_idle_ms >= 30_000  # the bound the catch-up must not wait for
    await _decide(sale, 0, 20)
    await wait_until(lambda: writer.stats.entries >= 60, timeout_s=10)
    private_postgres.crash()
    await _decide(sale, 20, 70)
    await asyncio.sleep(4)  # several failed passes: the backoff grows meanwhile
    private_postgres.start()
    back = time.monotonic()
    await wait_until(lambda: writer.stats.entries >= 210, timeout_s=40)
    caught_up_s = time.monotonic() - back
    stop.set()
    await asyncio.wait_for(task, 10)
    async with pool.acquire() as c:
        count = await c.fetchval("select count(*) from decisions")
    assert count == 210
    assert caught_up_s < 4.0, f"caught up {caught_up_s:.1f} s after the database came back"
    await pool.close()
