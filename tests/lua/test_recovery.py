"""A Redis that lost an event or went back in time answers "recovering", never a wrong answer
(ADR 0017): event_fence, the lost-events marker and the rebuild flag, on fakeredis and real
Redis."""

import pytest

from engine import errors, keys
from engine.scripts import FenceCode
from engine.states import HoldState
from engine.store import Store
from tests.conftest import open_sale
from tests.helpers import callback


async def test_a_fenced_event_decides_nothing_until_rebuilt(store: Store) -> None:
    sale = await open_sale(store, 3)
    await store.claim(sale.event_id, "ann", "h1")
    await store.start_charge(sale.event_id, "h1", "ann", "c1", 100)
    await store.claim(sale.event_id, "bob", "h2")
    outbox = len(await store.read.outbox(sale.event_id))
    assert await store.fence(sale.event_id, "test") == FenceCode.FENCED
    assert await store.fence(sale.event_id, "again") == FenceCode.ALREADY_FENCED
    with pytest.raises(errors.Recovering):
        await store.claim(sale.event_id, "cy", "h3")
    with pytest.raises(errors.Recovering):
        await store.start_charge(sale.event_id, "h2", "bob", "c2", 100)
    with pytest.raises(errors.StoreUnavailable):  # the provider retries after the rebuild
        await callback(sale, "c1", "CAPTURED")
    assert (await store.read.hold(sale.event_id, "h1")).state == HoldState.RESERVED
    assert len(await store.read.outbox(sale.event_id)) == outbox  # nothing was decided
    assert await store.read.recovering(sale.event_id)


async def test_a_lost_event_answers_recovering_not_found_until_its_rebuild(store: Store) -> None:
    sale = await open_sale(store, 1)
    await store.restore.drop_event(sale.event_id)  # Redis restarted empty
    with pytest.raises(errors.HoldNotFound):  # nobody said it was lost: a plain not-found
        await store.read.hold(sale.event_id, "h1")
    await store.restore.mark_lost(sale.event_id)
    with pytest.raises(errors.Recovering):
        await store.read.hold(sale.event_id, "h1")
    with pytest.raises(errors.Recovering):
        await store.read.availability(sale.event_id)
    with pytest.raises(errors.Recovering):
        await store.claim(sale.event_id, "ann", "h1")
    with pytest.raises(errors.Recovering):
        await callback(sale, "c1", "CAPTURED")
    # The rebuild starts: the event exists again (a draft), still recovering until it ends.
    await open_sale(store, 1, event_id=sale.event_id)
    await store.restore.rebuilding(sale.event_id, on=True)
    assert not await store.client.hexists(keys.lost_events(store.prefix), sale.event_id)
    with pytest.raises(errors.Recovering):
        await store.read.hold(sale.event_id, "h1")
    await store.restore.rebuilding(sale.event_id, on=False)
    with pytest.raises(errors.HoldNotFound):
        await store.read.hold(sale.event_id, "h1")
    assert not await store.read.recovering(sale.event_id)


async def test_every_decision_is_numbered_in_order(store: Store) -> None:
    sale = await open_sale(store, 2)
    await store.claim(sale.event_id, "ann", "h1")
    await store.start_charge(sale.event_id, "h1", "ann", "c1", 100)
    await callback(sale, "c1", "CAPTURED")
    await store.claim(sale.event_id, "bob", "h2")
    await store.release(sale.event_id, "h2", "bob")
    numbers = [int(r["seq"]) for r in await store.read.outbox(sale.event_id)]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 4
    assert await store.read.event_fields(sale.event_id, "seq") == [str(len(numbers))]
