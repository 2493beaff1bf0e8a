"""Trimming against the real ledger (ADR 0018): the floor is the ledger writer's own position, a
hold goes only once the writer committed its decision, and a rebuild from the ledger brings
trimmed holds back as ended records (never live), trimmed again by the next pass."""

import asyncio

import pytest

from engine.model.states import HoldState
from engine.store import Store
from engine.workers.trim import Trimmer
from persistence.rebuild import rebuild
from persistence.writer import LedgerWriter
from tests.conftest import open_sale
from tests.helpers import callback
from tests.pg import migrated_pool

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

RETENTION = 1  # the Redis clock, as in production: a tiny retention, then a short wait


async def test_trimmed_holds_are_in_the_ledger_and_a_rebuild_brings_them_back_ended(
    real_store: Store,
) -> None:
    store = real_store
    sale = await open_sale(store, 5)
    event_id = sale.event_id
    for i in range(20):
        await store.claim(event_id, "flood", f"f{i}")  # f0..f18 RELEASED, f19 live
    await store.claim(event_id, "ann", "a1")
    await store.start_charge(event_id, "a1", "ann", "ca", 100)
    await callback(sale, "ca", "CAPTURED")  # a sale: never trimmed
    holds = store.key(event_id, "holds")
    trimmer = Trimmer(store, retention_ms=RETENTION)
    async with migrated_pool() as pool:
        writer = LedgerWriter(store.client, pool, prefix=store.prefix, consumer="t", batch_max=7)
        await writer.step(event_id)  # one batch of seven: the rest is not in the ledger yet
        await asyncio.sleep(0.01)
        await trimmer.run_once()
        assert trimmer.stats.trimmed == 7  # f0..f6: only what the ledger committed
        while await writer.step(event_id):
            pass
        await trimmer.run_once()
        assert trimmer.stats.trimmed == 19
        assert sorted(await store.client.hkeys(holds)) == ["a1", "f19"]
        await sale.audit_ok()
        async with pool.acquire() as conn:
            in_ledger = {r["hold_id"] for r in await conn.fetch("select hold_id from holds")}
            assert {f"f{i}" for i in range(19)} <= in_ledger
            await rebuild(store, conn, event_id, force=True)
        # Back from the ledger as ended records, indexed again; the sale with its seat.
        assert (await store.read.hold(event_id, "f0")).state == HoldState.RELEASED
        assert (await store.read.hold(event_id, "a1")).state == HoldState.CONFIRMED
        assert await store.client.zcard(store.key(event_id, "ended")) == 19
        await sale.audit_ok()
        assert await trimmer.ledger_floor(event_id) is None  # its outbox is new: no group yet
        await writer.step(event_id)  # the writer notices (NOGROUP), then makes the group again
        while await writer.step(event_id):
            pass
        assert await trimmer.ledger_floor(event_id) is not None
        await asyncio.sleep(0.01)
        before = trimmer.stats.trimmed
        await trimmer.run_once()
        assert trimmer.stats.trimmed - before == 19
        assert await store.client.hkeys(holds) == ["a1"]
        await sale.audit_ok()
