"""An event in the ledger belongs to the deployment (Redis key prefix) whose writer mirrored it:
another deployment's ledger process, writing into the same database, never calls it lost,
never fences it, never rebuilds it into its own Redis (where a copy of the event would decide
money the owner never hears of: once, a copy's reconciliation marked the owner's in-flight
charge FAILED at its own provider, and the owner's sale of that seat kept no money). Real
Redis and real PostgreSQL."""

from collections.abc import AsyncIterator

import asyncpg
import pytest

from engine.store import Store
from engine.store.scripts import Scripts
from persistence.rebuild import RebuildRefused, rebuild
from persistence.writer import LedgerWriter
from tests.conftest import Sale, new_prefix, open_sale
from tests.pg import migrated_pool

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


@pytest.fixture
async def pool() -> AsyncIterator[asyncpg.Pool]:
    async with migrated_pool() as p:
        yield p


async def mirrored(store: Store, pool: asyncpg.Pool) -> tuple[Sale, LedgerWriter]:
    sale = await open_sale(store, 2)
    await store.claim(sale.event_id, "ann", "h1")
    writer = LedgerWriter(store.client, pool, prefix=store.prefix, consumer="t", batch_max=50)
    while await writer.step(sale.event_id):
        pass
    await store.start_charge(sale.event_id, "h1", "ann", "c1", 100)
    while await writer.step(sale.event_id):
        pass
    return sale, writer


async def test_another_deployments_ledger_process_leaves_an_event_alone(
    real_store: Store, pool: asyncpg.Pool
) -> None:
    owner = real_store
    other = Store(owner.client, scripts=Scripts(owner.client, test_clock=True), prefix=new_prefix())
    sale, owners_writer = await mirrored(owner, pool)
    others_writer = LedgerWriter(other.client, pool, prefix=other.prefix, consumer="t")
    report = await others_writer.fencer.check()
    assert sale.event_id not in report.to_rebuild()
    assert not await other.read.recovering(sale.event_id)
    async with pool.acquire() as conn:
        with pytest.raises(RebuildRefused, match="another deployment"):
            await rebuild(other, conn, sale.event_id)
    assert (await other.read.event_fields(sale.event_id, "status"))[0] is None
    # The owner still sees its own event, and would rebuild it (lost here).
    await owner.restore.drop_event(sale.event_id)
    assert sale.event_id in (await owners_writer.fencer.check()).lost


async def test_an_event_mirrored_before_owners_were_named_is_claimed_by_its_deployment(
    real_store: Store, pool: asyncpg.Pool
) -> None:
    """A row from before the ledger named owners ('') is claimed by the first writer of the
    deployment whose Redis holds the event; from then on another deployment leaves it alone."""
    owner = real_store
    other = Store(owner.client, scripts=Scripts(owner.client, test_clock=True), prefix=new_prefix())
    sale, _writer = await mirrored(owner, pool)
    async with pool.acquire() as conn:
        await conn.execute(
            "update event_configs set redis_prefix = '' where event_id = $1", sale.event_id
        )
    restarted = LedgerWriter(owner.client, pool, prefix=owner.prefix, consumer="t2")
    await restarted.prepare(sale.event_id)
    others_writer = LedgerWriter(other.client, pool, prefix=other.prefix, consumer="t")
    assert sale.event_id not in (await others_writer.fencer.check()).to_rebuild()
