"""A Redis that lost an event or went back in time answers "recovering", never a wrong answer
(ADR 0017): event_fence, the lost-events marker and the rebuild flag, on fakeredis and real
Redis."""

import pytest

from engine.model import errors, keys
from engine.model.event_config import EventConfig
from engine.model.replies import FenceCode, RestoreCode
from engine.model.states import HoldState
from engine.store import Store
from tests.conftest import Sale, open_sale, seats
from tests.helpers import callback

T0 = 1_900_000_000_000


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
    with pytest.raises(errors.Recovering):  # 503 recovering: the provider retries after it
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
    with pytest.raises(errors.Recovering):  # not its half-built counters, as if on sale
        await store.read.availability(sale.event_id)
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


async def test_a_restored_charge_the_provider_moves_afterwards_keeps_the_audit_clean(
    store: Store,
) -> None:
    """A charge restored from the ledger has its terminal record there, not in the outbox; the
    provider capturing it after the rebuild (a capture after its decline, refunded) changes its
    reason, and the audit must still not ask the outbox for that record."""
    t0 = 1_900_000_000_000
    sale = await open_sale(store, 2, now_ms=t0)
    await store.claim(sale.event_id, "alice", "h1")
    await store.start_charge(sale.event_id, "h1", "alice", "c1", 100)
    await callback(sale, "c1", "DECLINED")
    declined = await store.read.charge(sale.event_id, "c1")
    assert declined.final
    # Redis lost the event; the rebuild puts back what the ledger has: the declined charge.
    await store.restore.drop_event(sale.event_id)
    await store.create_event(
        sale.event_id, seats(2), EventConfig(hold_ttl_ms=480_000, quarantine_ms=900_000)
    )
    again = Sale(store, sale.event_id)
    await again.at(t0 + 1_000)
    assert await store.restore.charge(sale.event_id, declined) == RestoreCode.RESTORED
    await store.restore.mark(sale.event_id, t0 + 1_000)
    await store.open_sale(sale.event_id)
    await again.audit_ok()
    res = await callback(again, "c1", "CAPTURED")  # the provider captured it after all
    assert res.decision == "REFUND"
    assert await store.refund_result(sale.event_id, "c1", refunded=True) == "REFUNDED"
    assert (await store.read.charge(sale.event_id, "c1")).reason != "restored"
    await again.audit_ok()


async def test_a_fence_never_lands_on_a_rebuild_nor_on_an_event_that_caught_up(
    store: Store,
) -> None:
    """The ledger writer's look may be older than the rebuild it races: the fence is decided in
    the script, against the event as it is now (issue: a rebuild fenced half built)."""
    sale = await open_sale(store, 2)
    await store.claim(sale.event_id, "ann", "h1")  # decision number 0: no decision yet
    await store.restore.drop_event(sale.event_id)
    # The rebuild's first write: rebuilding, numbered after the ledger's last decision (7).
    await store.restore.begin(sale.event_id, 7)
    with pytest.raises(errors.Recovering):  # the event is not there yet: recovering, not 404
        await store.read.availability(sale.event_id)
    await store.create_event(
        sale.event_id, seats(2), EventConfig(hold_ttl_ms=60_000, quarantine_ms=60_000)
    )
    assert await store.fence(sale.event_id, "writer look", 7) == FenceCode.REBUILDING
    assert await store.fence(sale.event_id, "ledger refused") == FenceCode.REBUILDING
    assert await store.restore.half_built(sale.event_id)
    await store.open_sale(sale.event_id)
    await store.restore.rebuilding(sale.event_id, on=False)
    assert not await store.restore.half_built(sale.event_id)
    await store.claim(sale.event_id, "bob", "h2")
    await store.release(sale.event_id, "h2", "bob")  # a decision: numbered 8, after the ledger
    assert (await store.read.outbox(sale.event_id))[-1]["seq"] == "8"
    # A look taken before the rebuild (Redis at 0 < ledger 7) comes too late: nothing happens.
    assert await store.fence(sale.event_id, "stale look", 7) == FenceCode.CURRENT
    assert (await store.read.availability(sale.event_id)).free == 2
    # Behind the ledger now, and not rebuilding: fenced.
    assert await store.fence(sale.event_id, "behind", 9) == FenceCode.FENCED


async def test_an_event_this_process_answered_for_is_recovering_the_moment_redis_lacks_it(
    store: Store,
) -> None:
    """Before the ledger writer's look marks it lost (up to a second), Redis restarted empty
    answered "not found" for an event this API had been selling: buyers took that as final."""
    sale = await open_sale(store, 2)
    await store.claim(sale.event_id, "ann", "h1")
    await store.read.hold(sale.event_id, "h1")  # this process has answered for the event
    other = await open_sale(store, 1)
    await store.restore.drop_event(sale.event_id)
    await store.restore.drop_event(other.event_id)  # never read here: nothing to tell
    with pytest.raises(errors.Recovering):
        await store.read.hold(sale.event_id, "h1")
    with pytest.raises(errors.Recovering):
        await store.read.availability(sale.event_id)
    with pytest.raises(errors.Recovering):
        await store.claim(sale.event_id, "bob", "h2")
    with pytest.raises(errors.EventNotFound):
        await store.read.availability(other.event_id)


async def test_a_hold_made_before_a_rebuild_and_lost_with_redis_is_told_so(store: Store) -> None:
    """A hold RESERVED without money when Redis lost the event: the ledger never had it, so the
    rebuilt event lacks it. Its buyer reads a final answer that says so (410), never 404."""
    window_ms = 60_000
    windowed = Store(
        store.client, prefix=store.prefix, scripts=store.scripts, idempotency_window_ms=window_ms
    )
    sale = await open_sale(windowed, 2, now_ms=T0)
    claimed = await windowed.claim(sale.event_id, "ann", "h1")
    await windowed.restore.drop_event(sale.event_id)
    await open_sale(windowed, 2, event_id=sale.event_id, now_ms=T0 + 1_000)  # the rebuild
    await windowed.restore.mark(sale.event_id, T0 + 1_000)
    with pytest.raises(errors.HoldLost):
        await windowed.read.hold(sale.event_id, claimed.hold_id)
    after = await windowed.claim(sale.event_id, "bob", "h2")  # made after it: found
    assert (await windowed.read.hold(sale.event_id, after.hold_id)).login == "bob"
    with pytest.raises(errors.HoldNotFound):  # an id of no window: never ours
        await windowed.read.hold(sale.event_id, "no-such-hold")
