"""A sale an operator closed or cancelled stays so through a rebuild from the ledger (ADR 0025):
the rebuild goes from DRAFT straight to closed, and a cancel resumes instead of reopening the
sale. Real Redis and real PostgreSQL."""

from collections.abc import AsyncIterator

import asyncpg
import pytest

from engine.model import errors
from engine.model.states import ChargeState, HoldState
from engine.store import Store
from persistence.rebuild import rebuild
from persistence.writer import LedgerWriter
from tests.conftest import Sale, open_sale
from tests.helpers import callback
from tests.pg import migrated_pool

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


@pytest.fixture
async def pool() -> AsyncIterator[asyncpg.Pool]:
    async with migrated_pool() as p:
        yield p


async def sold_one(store: Store) -> Sale:
    """Three seats; s00000 sold (charge pay), a clock an hour behind Redis's (the rebuild
    happens now, after the sale)."""
    sale = await open_sale(store, 3, now_ms=await store.read.server_time_ms() - 3_600_000)
    await store.claim(sale.event_id, "ann", "h1")
    await store.start_charge(sale.event_id, "h1", "ann", "pay", 100)
    assert (await callback(sale, "pay", "CAPTURED")).decision == "CONFIRMED"
    return sale


async def lost_and_rebuilt(store: Store, pool: asyncpg.Pool, event_id: str) -> None:
    writer = LedgerWriter(store.client, pool, prefix=store.prefix, consumer="t", batch_max=50)
    while await writer.step(event_id):
        pass
    await store.restore.drop_event(event_id)  # Redis lost the event
    async with pool.acquire() as conn:
        await rebuild(store, conn, event_id)


@pytest.mark.parametrize("how", ["closed", "cancelled"])
async def test_a_closed_or_cancelled_sale_is_not_reopened_by_a_rebuild(
    real_store: Store, pool: asyncpg.Pool, how: str
) -> None:
    store = real_store
    sale = await sold_one(store)
    if how == "closed":
        await store.lifecycle.close(sale.event_id, "ops")
    else:
        assert (await store.lifecycle.cancel(sale.event_id, "ops")).complete
    await lost_and_rebuilt(store, pool, sale.event_id)
    assert (await store.read.availability(sale.event_id)).status == how
    with pytest.raises(errors.SaleClosed):
        await store.claim(sale.event_id, "bob", "h2")
    h = await store.read.hold(sale.event_id, "h1")
    expected = HoldState.CONFIRMED if how == "closed" else HoldState.REVOKED
    assert h.state == expected
    if how == "cancelled":  # the sold seat's money is on its way back
        charge = await store.read.charge(sale.event_id, "pay")
        assert charge.state in (ChargeState.REFUNDING, ChargeState.REFUNDED)
    await sale.audit_ok()
