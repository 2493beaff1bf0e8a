"""PostgreSQL crashes (immediate shutdown) while the writer runs and decisions keep coming:
the writer backs off, Redis keeps the entries (the lag grows and is reported), and once the
database is back the ledger catches up with nothing lost and nothing twice."""

import asyncio

import asyncpg
import pytest

from engine import keys
from engine.store import Store
from persistence import writer as w
from persistence.database import create_pool
from persistence.migrate import migrate
from persistence.writer import LedgerWriter
from tests.conftest import open_sale
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
    assert (await real_store.client.xpending(stream, w.GROUP))["pending"] == 0
    await pool.close()
