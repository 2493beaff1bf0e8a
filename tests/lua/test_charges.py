"""charge_start, charge_abandon, charge_outcome and charge_refund, on fakeredis and real Redis."""

import pytest

from engine.model import errors
from engine.model.states import ChargeState, HoldState
from engine.store import Store
from tests.conftest import Sale, open_sale
from tests.helpers import callback, terminal_records

T0 = 1_900_000_000_000


async def held(store: Store, n_seats: int = 2) -> Sale:
    sale = await open_sale(store, n_seats, now_ms=T0)
    await store.claim(sale.event_id, "alice", "h1")
    return sale


async def test_start_charge_rules(store: Store) -> None:
    sale = await held(store)
    with pytest.raises(errors.NotOwner):
        await store.start_charge(sale.event_id, "h1", "mallory", "c0", 100)
    with pytest.raises(errors.HoldNotFound):
        await store.start_charge(sale.event_id, "nope", "alice", "c0", 100)
    started = await store.start_charge(sale.event_id, "h1", "alice", "c1", 100)
    assert (started.replay, started.state) == (False, ChargeState.CHARGING)
    replay = await store.start_charge(sale.event_id, "h1", "alice", "c1", 100)
    assert (replay.replay, replay.state) == (True, ChargeState.CHARGING)
    with pytest.raises(errors.ChargeInFlight):  # second tab, while one is CHARGING
        await store.start_charge(sale.event_id, "h1", "alice", "c2", 100)
    await store.claim(sale.event_id, "bob", "h2")
    with pytest.raises(errors.IdempotencyKeyReused):
        await store.start_charge(sale.event_id, "h2", "bob", "c1", 100)
    await sale.at(T0 + 480_000)
    with pytest.raises(errors.HoldExpired):
        await store.start_charge(sale.event_id, "h2", "bob", "c3", 100)
    await sale.audit_ok()


async def test_capture_confirms_and_duplicates_change_nothing(store: Store) -> None:
    sale = await held(store)
    await store.start_charge(sale.event_id, "h1", "alice", "c1", 100)
    first = await callback(sale, "c1", "CAPTURED", event_id="pe-1")
    assert (first.decision, first.first_seen, first.hold_state) == (
        "CONFIRMED",
        True,
        HoldState.CONFIRMED,
    )
    outbox_len = len(await store.read.outbox(sale.event_id))
    replay = await callback(sale, "c1", "CAPTURED", event_id="pe-1")
    assert (replay.decision, replay.first_seen) == ("CONFIRMED", False)
    resend = await callback(sale, "c1", "CAPTURED", event_id="pe-2")  # same attempt, new event
    assert (resend.decision, resend.first_seen) == ("CONFIRMED", True)
    assert len(await store.read.outbox(sale.event_id)) == outbox_len
    with pytest.raises(errors.AlreadyConfirmed):
        await store.start_charge(sale.event_id, "h1", "alice", "c9", 100)
    avail = await store.read.availability(sale.event_id)
    assert (avail.sold, avail.held) == (1, 0)
    await sale.audit_ok()


async def test_decline_keeps_hold_live_and_a_retry_can_win(store: Store) -> None:
    sale = await held(store)
    await store.start_charge(sale.event_id, "h1", "alice", "c1", 100)
    assert (await callback(sale, "c1", "DECLINED")).decision == "DECLINED"
    assert (await store.read.hold(sale.event_id, "h1")).state == HoldState.RESERVED
    await store.start_charge(sale.event_id, "h1", "alice", "c2", 100)
    assert (await callback(sale, "c2", "FAILED")).decision == "FAILED"
    await store.start_charge(sale.event_id, "h1", "alice", "c3", 100)
    assert (await callback(sale, "c3", "CAPTURED")).decision == "CONFIRMED"
    h = await store.read.hold(sale.event_id, "h1")
    assert (h.winner, h.charge_ids) == ("c3", ("c1", "c2", "c3"))
    await sale.audit_ok()


async def test_contradiction_changes_nothing(store: Store) -> None:
    sale = await held(store)
    await store.start_charge(sale.event_id, "h1", "alice", "c1", 100)
    await callback(sale, "c1", "CAPTURED")
    res = await callback(sale, "c1", "DECLINED")
    assert (res.decision, res.charge_state) == ("CONTRADICTION", ChargeState.CAPTURED)
    alerts = [r for r in await store.read.outbox(sale.event_id) if r["kind"] == "alert"]
    assert len(alerts) == 1
    await sale.audit_ok()


async def test_unknown_charge_capture_is_refunded(store: Store) -> None:
    sale = await held(store)
    res = await callback(sale, "ghost", "CAPTURED", attempt="att-ghost")
    assert (res.decision, res.charge_state, res.hold_id) == ("REFUND", ChargeState.REFUNDING, "")
    assert await store.read.due_refunds(sale.event_id, T0) == ["orphan/att-ghost"]
    await sale.audit_ok()


async def test_new_attempt_on_a_bound_charge_is_its_own_charge(store: Store) -> None:
    sale = await held(store)
    await store.start_charge(sale.event_id, "h1", "alice", "c1", 100)
    assert (await callback(sale, "c1", "DECLINED", attempt="a1")).decision == "DECLINED"
    # The buyer retried on the provider's page: same intent, new attempt id.
    res = await callback(sale, "c1", "CAPTURED", attempt="a2")
    assert (res.decision, res.charge_id) == ("CONFIRMED", "c1/a2")
    assert (await store.read.charge(sale.event_id, "c1")).state == ChargeState.DECLINED
    # A later capture of a third attempt on the same intent: money for a sold hold, refunded.
    assert (await callback(sale, "c1", "CAPTURED", attempt="a3")).decision == "REFUND"
    await sale.audit_ok()


async def test_refund_lifecycle_and_rerefund_after_refunded(store: Store) -> None:
    sale = await held(store)
    await store.start_charge(sale.event_id, "h1", "alice", "c1", 100)
    await store.release(sale.event_id, "h1", "alice")
    assert (await callback(sale, "c1", "CAPTURED")).decision == "REFUND"
    assert await store.read.due_refunds(sale.event_id, T0) == ["c1"]
    assert await store.refund_result(sale.event_id, "c1", refunded=False, retry_delay_ms=5000) == (
        "RETRY_SCHEDULED"
    )
    assert await store.read.due_refunds(sale.event_id, T0) == []
    assert await store.read.due_refunds(sale.event_id, T0 + 5000) == ["c1"]
    assert await store.refund_result(sale.event_id, "c1", refunded=True) == "REFUNDED"
    assert await store.refund_result(sale.event_id, "c1", refunded=True) == "ALREADY_REFUNDED"
    assert len(await terminal_records(sale, "charge", "c1")) == 1
    # REFUNDED is a sink: a late duplicate capture only re-requests the idempotent refund.
    res = await callback(sale, "c1", "CAPTURED")
    assert (res.decision, res.charge_state) == ("REFUND", ChargeState.REFUNDED)
    assert await store.read.due_refunds(sale.event_id, T0 + 5000) == ["c1"]
    assert await store.refund_result(sale.event_id, "c1", refunded=True) == "ALREADY_REFUNDED"
    assert len(await terminal_records(sale, "charge", "c1")) == 1
    assert (await store.read.charge(sale.event_id, "c1")).state == ChargeState.REFUNDED
    await sale.audit_ok()


async def test_refund_result_on_a_charge_that_is_not_refunding(store: Store) -> None:
    sale = await held(store)
    await store.start_charge(sale.event_id, "h1", "alice", "c1", 100)
    assert await store.refund_result(sale.event_id, "c1", refunded=True) == "NOT_REFUNDING"
    with pytest.raises(errors.ChargeNotFound):
        await store.refund_result(sale.event_id, "nope", refunded=True)


@pytest.mark.parametrize(
    "order",
    [
        ("c1", "c2"),
        ("c2", "c1"),
        ("c1", "c1", "c2"),
        ("c2", "c1", "c2", "c1"),
        ("c2", "c2", "c1", "c1"),
    ],
)
async def test_two_tabs_one_confirmed_other_refunded(store: Store, order: tuple[str, ...]) -> None:
    """Tab 1 starts c1, its client call times out and is abandoned; tab 2 pays with c2. Both
    capture. Whatever order (and duplicates) the callbacks arrive in: c2 wins, c1 refunded."""
    sale = await held(store)
    await store.start_charge(sale.event_id, "h1", "alice", "c1", 100)
    assert await store.abandon_charge(sale.event_id, "h1", "alice", "c1") is True
    await store.start_charge(sale.event_id, "h1", "alice", "c2", 100)
    for n, charge in enumerate(order):
        await callback(sale, charge, "CAPTURED", event_id=f"pe-{charge}-{n % 2}")
    h = await store.read.hold(sale.event_id, "h1")
    assert (h.state, h.winner) == (HoldState.CONFIRMED, "c2")
    assert (await store.read.charge(sale.event_id, "c1")).state == ChargeState.REFUNDING
    assert (await store.read.charge(sale.event_id, "c2")).state == ChargeState.CAPTURED
    assert (await store.read.availability(sale.event_id)).sold == 1
    await sale.audit_ok()


async def test_drop_a_grab_b_a_captures_late(store: Store) -> None:
    """Drop A (charge in flight), grab B, A's charge still captures: A refunded, B kept, seat A
    never sold to someone else while A's money is in flight."""
    sale = await open_sale(store, 3, now_ms=T0)
    await store.claim(sale.event_id, "alice", "hA", "s00000")
    await store.start_charge(sale.event_id, "hA", "alice", "cA", 100)
    await store.release(sale.event_id, "hA", "alice")
    await store.claim(sale.event_id, "alice", "hB", "s00001")
    with pytest.raises(errors.SeatTaken):
        await store.claim(sale.event_id, "bob", "hX", "s00000")
    await store.start_charge(sale.event_id, "hB", "alice", "cB", 100)
    assert (await callback(sale, "cA", "CAPTURED")).decision == "REFUND"
    assert (await callback(sale, "cB", "CAPTURED")).decision == "CONFIRMED"
    assert (await store.read.hold(sale.event_id, "hA")).state == HoldState.RELEASED
    assert (await store.read.hold(sale.event_id, "hB")).state == HoldState.CONFIRMED
    assert (await store.claim(sale.event_id, "bob", "hX", "s00000")).listing == "s00000"
    await sale.audit_ok()


async def test_abandon_rules(store: Store) -> None:
    sale = await held(store)
    await store.start_charge(sale.event_id, "h1", "alice", "c1", 100)
    with pytest.raises(errors.NotOwner):
        await store.abandon_charge(sale.event_id, "h1", "mallory", "c1")
    with pytest.raises(errors.ChargeNotFound):
        await store.abandon_charge(sale.event_id, "h1", "alice", "nope")
    assert await store.abandon_charge(sale.event_id, "h1", "alice", "c1") is True
    outbox_len = len(await store.read.outbox(sale.event_id))
    # A retried abandon answers like the first one and changes nothing.
    assert await store.abandon_charge(sale.event_id, "h1", "alice", "c1") is True
    assert len(await store.read.outbox(sale.event_id)) == outbox_len
    # An abandoned charge that declines is simply declined; the hold is still live.
    assert (await callback(sale, "c1", "DECLINED")).decision == "DECLINED"
    assert (await store.read.hold(sale.event_id, "h1")).state == HoldState.RESERVED
    await sale.audit_ok()


async def test_release_of_quarantined_hold_makes_its_charge_refund_only(store: Store) -> None:
    sale = await open_sale(store, 1, hold_ttl_ms=1000, quarantine_ms=5000, now_ms=T0)
    await store.claim(sale.event_id, "alice", "h1")
    await store.start_charge(sale.event_id, "h1", "alice", "c1", 100)
    await sale.at(T0 + 1000)
    await store.sweep(sale.event_id)
    assert await store.release(sale.event_id, "h1", "alice") == HoldState.QUARANTINED
    res = await callback(sale, "c1", "CAPTURED")
    assert (res.decision, res.hold_state) == ("REFUND", HoldState.EXPIRED)
    assert (await store.read.availability(sale.event_id)).free == 1
    await sale.audit_ok()


async def test_a_given_up_quarantined_hold_is_never_confirmed(store: Store) -> None:
    """Released while quarantined: even a new attempt on an earlier, declined charge of the hold
    (not itself resolve-by-refund) must not confirm it."""
    sale = await open_sale(store, 1, hold_ttl_ms=1000, quarantine_ms=5000, now_ms=T0)
    await store.claim(sale.event_id, "alice", "h1")
    await store.start_charge(sale.event_id, "h1", "alice", "d1", 100)
    await callback(sale, "d1", "DECLINED", attempt="a1")
    await store.start_charge(sale.event_id, "h1", "alice", "p1", 100)
    await sale.at(T0 + 1000)
    await store.sweep(sale.event_id)
    assert await store.release(sale.event_id, "h1", "alice") == HoldState.QUARANTINED
    assert (await store.read.hold(sale.event_id, "h1")).given_up  # the read view says so too
    res = await callback(sale, "d1", "CAPTURED", attempt="a2")  # new attempt on d1
    assert res.decision == "REFUND"
    assert (await store.read.hold(sale.event_id, "h1")).state == HoldState.QUARANTINED
    await sale.audit_ok()


async def test_a_sale_names_its_last_outbox_record(store: Store) -> None:
    """The hold keeps the id of the sale's last record (the charge's CAPTURED), which the API
    compares with the ledger's position before telling anyone (ADR 0016); a duplicate capture
    does not move it."""
    sale = await open_sale(store, 1)
    await store.claim(sale.event_id, "ann", "h1")
    await store.start_charge(sale.event_id, "h1", "ann", "c1", 100)
    assert (await store.read.hold(sale.event_id, "h1")).record == ""
    await callback(sale, "c1", "CAPTURED")
    entries = await store.read.outbox_entries(sale.event_id, newest=True)
    last_id, last = entries[0]
    assert (last["kind"], last["id"], last["to"]) == ("charge", "c1", "CAPTURED")
    assert (await store.read.hold(sale.event_id, "h1")).record == last_id
    await callback(sale, "c1", "CAPTURED")
    assert (await store.read.hold(sale.event_id, "h1")).record == last_id
