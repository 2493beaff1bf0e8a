"""charge_outcome_v2 verification, charge_reversal, hold_revoke and parked refunds (ADR 0014),
table-driven on fakeredis and real Redis: each case arranges a charge, sends one provider
message, and checks the reply, the state, the alert and the outbox record."""

import asyncio
from typing import Any

import pytest

from engine.model import errors
from engine.model.states import ChargeState, HoldState, ReversalPolicy
from engine.store import Store
from tests.conftest import Sale, open_sale
from tests.helpers import callback, reversal, terminal_records

T0 = 1_900_000_000_000


async def charging(store: Store, **sale_options: Any) -> Sale:
    """Hold h1 (alice) with charge c1 of 100 in flight."""
    sale = await open_sale(store, 2, now_ms=T0, **sale_options)
    await store.claim(sale.event_id, "alice", "h1")
    await store.start_charge(sale.event_id, "h1", "alice", "c1", 100)
    return sale


@pytest.mark.parametrize(
    ("claims", "problem"),
    [
        ({"status": "declined"}, "status"),
        ({"amount": None}, "amount"),
        ({"meta_event": "another-event"}, "event"),
        ({"meta_hold": "h-other"}, "hold"),
        ({"meta_charge": "c-other"}, "charge"),
    ],
)
async def test_a_message_that_does_not_match_moves_nothing(
    store: Store, claims: dict[str, Any], problem: str
) -> None:
    sale = await charging(store)
    outbox_before = len(await store.read.outbox(sale.event_id))
    res = await callback(sale, "c1", "CAPTURED", **claims)
    assert (res.decision, res.charge_state) == ("MISMATCH", ChargeState.CHARGING)
    assert problem in res.problems
    c = await store.read.charge(sale.event_id, "c1")
    assert (c.state, c.attempt_id) == (ChargeState.CHARGING, "")  # not even bound
    assert (await store.read.hold(sale.event_id, "h1")).state == HoldState.RESERVED
    [alert] = await store.read.alerts(sale.event_id)
    assert problem in alert.reason and alert.detail["attempt"] == "att-c1"
    outbox = await store.read.outbox(sale.event_id)
    assert [r["kind"] for r in outbox[outbox_before:]] == ["alert"]
    # The truthful message for the same attempt still confirms afterwards.
    assert (await callback(sale, "c1", "CAPTURED")).decision == "CONFIRMED"
    await sale.audit_ok()


async def test_a_bound_attempt_is_not_rebound_by_another_key(store: Store) -> None:
    sale = await charging(store)
    await store.claim(sale.event_id, "bob", "h2")
    await store.start_charge(sale.event_id, "h2", "bob", "c2", 100)
    await callback(sale, "c1", "CAPTURED")
    # A message naming c2 for c1's attempt: the attempt stays c1's, c2 stays in flight.
    res = await callback(sale, "c2", "CAPTURED", attempt="att-c1")
    assert res.decision == "MISMATCH" and "charge" in res.problems
    assert (await store.read.charge(sale.event_id, "c2")).state == ChargeState.CHARGING
    assert (await store.read.charge(sale.event_id, "c1")).state == ChargeState.CAPTURED
    await sale.audit_ok()


@pytest.mark.parametrize("claims", [{"amount": 1}, {"amount": 250}, {"currency": "USD"}])
async def test_a_capture_of_other_money_is_refunded_and_frees_the_hold(
    store: Store, claims: dict[str, Any]
) -> None:
    sale = await charging(store)
    res = await callback(sale, "c1", "CAPTURED", **claims)
    assert (res.decision, res.charge_state) == ("REFUND", ChargeState.REFUNDING)
    c = await store.read.charge(sale.event_id, "c1")
    assert c.captured == claims.get("amount", 100) and c.reason.startswith("mismatch:")
    assert c.holds_money == c.captured
    h = await store.read.hold(sale.event_id, "h1")
    assert (h.state, h.charge_in_flight) == (HoldState.RESERVED, "")  # the buyer may pay again
    assert await store.read.due_refunds(sale.event_id, T0) == ["c1"]
    await sale.audit_ok()


async def test_a_zero_capture_closes_the_attempt_and_frees_the_hold_to_pay_again(
    store: Store,
) -> None:
    """The provider says the attempt is captured, for 0 of 1000: it can never win, so it is not
    left in flight: it goes down the refund path (whatever it took goes back), an alert names
    the amount, and the hold may start a new charge at once."""
    sale = await charging(store)
    res = await callback(sale, "c1", "CAPTURED", amount=0)
    assert (res.decision, res.charge_state, res.problems) == (
        "REFUND",
        ChargeState.REFUNDING,
        "amount",
    )
    c = await store.read.charge(sale.event_id, "c1")
    assert (c.captured, c.reason) == (0, "mismatch:amount")
    h = await store.read.hold(sale.event_id, "h1")
    assert (h.state, h.charge_in_flight) == (HoldState.RESERVED, "")
    assert await store.read.due_refunds(sale.event_id, T0) == ["c1"]
    [alert] = await store.read.alerts(sale.event_id)
    assert alert.reason == "mismatch:amount"
    await store.start_charge(sale.event_id, "h1", "alice", "c2", 100)
    assert (await callback(sale, "c2", "CAPTURED")).decision == "CONFIRMED"
    await sale.audit_ok()


@pytest.mark.parametrize("first", ["DECLINED", "FAILED"])
async def test_a_capture_after_the_providers_decline_goes_back_with_one_terminal_record(
    store: Store, first: str
) -> None:
    sale = await charging(store)
    await callback(sale, "c1", first)
    res = await callback(sale, "c1", "CAPTURED")
    assert (res.decision, res.charge_state) == ("REFUND", ChargeState.REFUNDING)
    again = await callback(sale, "c1", "CAPTURED")  # another notice of the same capture
    assert again.decision == "REFUND"
    assert await store.read.due_refunds(sale.event_id, T0) == ["c1"]
    assert await store.refund_result(sale.event_id, "c1", refunded=True) == "REFUNDED"
    assert len(await terminal_records(sale, "charge", "c1")) == 1  # the decline's, only
    assert (await store.read.hold(sale.event_id, "h1")).state == HoldState.RESERVED
    await sale.audit_ok()


async def test_a_decline_after_a_capture_is_a_contradiction_that_changes_nothing(
    store: Store,
) -> None:
    sale = await charging(store)
    await callback(sale, "c1", "CAPTURED")
    res = await callback(sale, "c1", "DECLINED")
    assert (res.decision, res.charge_state) == ("CONTRADICTION", ChargeState.CAPTURED)
    assert "DECLINED_after_CAPTURED" in (await store.read.alerts(sale.event_id))[0].reason
    await sale.audit_ok()


async def test_money_we_cannot_tie_becomes_an_orphan_refund_to_verify(store: Store) -> None:
    sale = await charging(store)
    res = await callback(sale, "foreign-key", "CAPTURED", attempt="att-x", amount=700)
    assert (res.decision, res.charge_id) == ("REFUND", "orphan/att-x")
    o = await store.read.charge(sale.event_id, "orphan/att-x")
    assert (o.state, o.key, o.captured, o.orphan) == (
        ChargeState.REFUNDING,
        "foreign-key",
        700,
        True,
    )
    dup = await callback(sale, "foreign-key", "CAPTURED", attempt="att-x", amount=700)
    assert dup.decision == "REFUND" and len(await store.read.alerts(sale.event_id)) == 1
    # The refund worker parks it when the provider's record disowns it: out of the queue, kept.
    assert await store.park_refund(sale.event_id, "orphan/att-x", "provider says other") == "PARKED"
    assert await store.read.due_refunds(sale.event_id, T0) == []
    o = await store.read.charge(sale.event_id, "orphan/att-x")
    assert (o.state, o.parked) == (ChargeState.REFUNDING, True)
    assert any(a.reason.startswith("refund_parked") for a in await store.read.alerts(sale.event_id))
    await sale.audit_ok()


@pytest.mark.parametrize("policy", list(ReversalPolicy))
async def test_a_provider_refund_of_the_winner_follows_the_reversal_policy(
    store: Store, policy: ReversalPolicy
) -> None:
    sale = await charging(store, reversal_policy=policy)
    await callback(sale, "c1", "CAPTURED")
    res = await reversal(sale, "c1", "REFUND")
    want = HoldState.EXCEPTION if policy == ReversalPolicy.MANUAL else HoldState.REVOKED
    assert (res.decision, res.charge_state, res.hold_state) == (
        "MONEY_LEFT",
        ChargeState.PROVIDER_REFUNDED,
        want,
    )
    avail = await store.read.availability(sale.event_id)
    assert (avail.sold, avail.free) == ((1, 1) if policy == ReversalPolicy.MANUAL else (0, 2))
    assert (await reversal(sale, "c1", "REFUND")).decision == "DUPLICATE"
    if policy == ReversalPolicy.MANUAL:
        await store.revoke_hold(sale.event_id, "h1", "ops")
        assert (await store.read.hold(sale.event_id, "h1")).state == HoldState.REVOKED
    with pytest.raises(errors.NotAnException):
        await store.revoke_hold(sale.event_id, "h1", "ops")
    assert len(await terminal_records(sale, "hold", "h1")) == 1  # CONFIRMED, only
    assert len(await terminal_records(sale, "charge", "c1")) == 1
    await sale.audit_ok()


async def test_a_dispute_won_after_the_seat_was_revoked_sends_the_money_back(
    store: Store,
) -> None:
    sale = await charging(store)
    await callback(sale, "c1", "CAPTURED")
    assert (await reversal(sale, "c1", "DISPUTE_OPENED")).hold_state == HoldState.EXCEPTION
    await store.revoke_hold(sale.event_id, "h1", "ops")
    res = await reversal(sale, "c1", "DISPUTE_WON")
    assert (res.decision, res.charge_state) == ("REFUND", ChargeState.REFUNDING)
    assert await store.read.due_refunds(sale.event_id, T0) == ["c1"]
    await sale.audit_ok()


@pytest.mark.parametrize("policy", [ReversalPolicy.MANUAL, ReversalPolicy.REVOKE])
async def test_a_refund_before_its_capture_is_noted_and_the_capture_then_sells_nothing_silently(
    store: Store, policy: ReversalPolicy
) -> None:
    """Stripe does not order its events: the refund of a winning capture may come first. It is
    answered (NOTED, never an outage), and the capture that follows ends exactly as the in-order
    pair does: the charge PROVIDER_REFUNDED, the hold an exception or revoked, by the event's
    reversal policy, its seat never a silent sale; the refund's replay changes nothing."""
    sale = await charging(store, reversal_policy=policy)
    early = await reversal(sale, "c1", "REFUND", event_id="pr-1")
    assert (early.decision, early.charge_state) == ("NOTED", ChargeState.CHARGING)
    assert (await store.read.hold(sale.event_id, "h1")).state == HoldState.RESERVED
    await callback(sale, "c1", "CAPTURED")
    c = await store.read.charge(sale.event_id, "c1")
    assert (c.state, c.holds_money) == (ChargeState.PROVIDER_REFUNDED, 0)
    h = await store.read.hold(sale.event_id, "h1")
    revoked = policy == ReversalPolicy.REVOKE
    assert h.state == (HoldState.REVOKED if revoked else HoldState.EXCEPTION)
    assert h.reason == "money_refunded_at_provider"
    # manual: the seat stays assigned for ops, listed as an exception
    assert (h.listing in await store.read.free_seats(sale.event_id)) == revoked
    again = await reversal(sale, "c1", "REFUND", event_id="pr-1")
    assert (again.decision, again.first_seen) == ("NOTED", False)
    assert (await store.read.charge(sale.event_id, "c1")).state == ChargeState.PROVIDER_REFUNDED
    assert await store.read.due_refunds(sale.event_id, T0 + 10**9) == []
    foreign = await reversal(sale, "c1", "DISPUTE_OPENED", meta_event="elsewhere")
    assert foreign.decision == "MISMATCH"
    await sale.audit_ok()


async def test_a_refund_before_a_capture_that_cannot_win_leaves_nothing_to_give_back(
    store: Store,
) -> None:
    """The hold was given up before its money arrived: the capture would go back by our own
    refund, but the provider already refunded it: the charge ends REFUNDED, no refund queued."""
    sale = await charging(store)
    await store.release(sale.event_id, "h1", "alice")
    assert (await reversal(sale, "c1", "REFUND")).decision == "NOTED"
    res = await callback(sale, "c1", "CAPTURED")
    assert (res.decision, res.charge_state) == ("REFUND", ChargeState.REFUNDED)
    assert await store.read.due_refunds(sale.event_id, T0 + 10**9) == []
    assert len(await store.read.free_seats(sale.event_id)) == 2  # its seat is back on sale
    await sale.audit_ok()


async def test_a_dispute_closed_before_it_opened_applies_in_the_providers_order(
    store: Store,
) -> None:
    sale = await charging(store)
    await callback(sale, "c1", "CAPTURED")
    assert (await reversal(sale, "c1", "DISPUTE_WON")).decision == "NOTED"
    assert (await store.read.hold(sale.event_id, "h1")).state == HoldState.CONFIRMED
    opened = await reversal(sale, "c1", "DISPUTE_OPENED")
    assert (opened.decision, opened.charge_state) == ("DISPUTED", ChargeState.CAPTURED)
    assert (await store.read.hold(sale.event_id, "h1")).state == HoldState.CONFIRMED
    await sale.audit_ok()


async def test_a_dispute_of_money_being_given_back_stops_the_refund(store: Store) -> None:
    """Found by the property test's money invariant: a capture that can no longer win goes
    REFUNDING; the buyer disputes it before our refund lands and the provider withdraws it. Our
    refund must not go out as well; a won dispute queues it again, a lost one ends it."""
    sale = await charging(store)
    await store.release(sale.event_id, "h1", "alice")  # its capture can no longer win
    assert (await callback(sale, "c1", "CAPTURED")).decision == "REFUND"
    res = await reversal(sale, "c1", "DISPUTE_OPENED")
    assert (res.decision, res.charge_state) == ("DISPUTED", ChargeState.DISPUTED)
    assert (await store.read.charge(sale.event_id, "c1")).holds_money == 0
    assert await store.read.due_refunds(sale.event_id, T0 + 10**9) == []
    won = await reversal(sale, "c1", "DISPUTE_WON")
    assert (won.decision, won.charge_state) == ("REFUND", ChargeState.REFUNDING)
    assert await store.read.due_refunds(sale.event_id, T0 + 10**9) == ["c1"]
    await sale.audit_ok()


async def test_a_capture_of_other_money_after_a_failure_is_refunded(store: Store) -> None:
    """Found by the property test's money invariant: the amount was checked before the state,
    so another amount captured after the provider's own failure was lost, not refunded."""
    sale = await charging(store)
    assert (await callback(sale, "c1", "FAILED")).decision == "FAILED"
    res = await callback(sale, "c1", "CAPTURED", amount=1)
    assert (res.decision, res.charge_state) == ("REFUND", ChargeState.REFUNDING)
    c = await store.read.charge(sale.event_id, "c1")
    assert (c.holds_money, c.final) == (1, True)
    assert len(await terminal_records(sale, "charge", "c1")) == 1  # the failure's
    await sale.audit_ok()


async def test_a_repeated_abandon_answers_abandoned_after_the_charge_moved_on(
    store: Store,
) -> None:
    sale = await charging(store)
    assert await store.abandon_charge(sale.event_id, "h1", "alice", "c1") is True
    await callback(sale, "c1", "FAILED")
    await callback(sale, "c1", "CAPTURED")  # contradicts the failure: REFUNDING, a new reason
    assert await store.abandon_charge(sale.event_id, "h1", "alice", "c1") is True
    await sale.audit_ok()


async def test_a_refund_retry_makes_a_backed_off_refund_due_now(store: Store) -> None:
    """An operator's retry moves a refund the worker scheduled for later to now, keeps its
    attempts, and is idempotent; the refund itself is still recorded only by the worker."""
    sale = await charging(store)
    await callback(sale, "c1", "DECLINED")
    await callback(sale, "c1", "CAPTURED")  # captured after its decline: refunded
    assert await store.refund_result(sale.event_id, "c1", refunded=False, retry_delay_ms=60_000)
    assert await store.read.due_refunds(sale.event_id, T0) == []  # due in a minute
    assert await store.retry_refund(sale.event_id, "c1") == (1, False)
    assert await store.read.due_refunds(sale.event_id, T0) == ["c1"]
    assert await store.retry_refund(sale.event_id, "c1") == (1, False)  # again: same answer
    c = await store.read.charge(sale.event_id, "c1")
    assert (c.state, c.refund_attempts, c.parked) == (ChargeState.REFUNDING, 1, False)
    await sale.audit_ok()


async def test_a_refund_retry_unparks_an_orphan_and_nothing_else_moves(store: Store) -> None:
    sale = await charging(store)
    await callback(sale, "foreign-key", "CAPTURED", attempt="att-x", amount=700)
    await store.park_refund(sale.event_id, "orphan/att-x", "provider says other")
    outbox_before = len(await store.read.outbox(sale.event_id))
    assert await store.retry_refund(sale.event_id, "orphan/att-x") == (0, True)
    assert await store.read.due_refunds(sale.event_id, T0) == ["orphan/att-x"]
    o = await store.read.charge(sale.event_id, "orphan/att-x")
    assert (o.state, o.parked, o.captured) == (ChargeState.REFUNDING, False, 700)
    assert len(await store.read.outbox(sale.event_id)) == outbox_before  # no decision made
    # Parked again by the worker (the provider still disowns it): one alert, not two.
    assert await store.park_refund(sale.event_id, "orphan/att-x", "still other") == "PARKED"
    assert await store.read.due_refunds(sale.event_id, T0) == []
    await sale.audit_ok()


@pytest.mark.parametrize("outcome", [None, "CAPTURED", "DECLINED"])
async def test_a_refund_retry_of_a_charge_not_refunding_is_refused(
    store: Store, outcome: str | None
) -> None:
    sale = await charging(store)
    if outcome:
        await callback(sale, "c1", outcome)
    before = await store.read.charge(sale.event_id, "c1")
    with pytest.raises(errors.NotRefunding):
        await store.retry_refund(sale.event_id, "c1")
    assert await store.read.charge(sale.event_id, "c1") == before
    assert await store.read.due_refunds(sale.event_id, 2**62) == []
    with pytest.raises(errors.ChargeNotFound):
        await store.retry_refund(sale.event_id, "c-none")


async def test_a_refund_keeps_when_its_charge_went_refunding(store: Store) -> None:
    """refunding_ms: set when the charge goes REFUNDING, kept once REFUNDED (decided_ms is then
    the refund's time: the pair is the capture-to-refund time), cleared if it leaves REFUNDING
    for anything else (a dispute), and set anew if it comes back."""
    sale = await charging(store)
    await callback(sale, "c1", "DECLINED")
    await sale.at(T0 + 1_000)
    await callback(sale, "c1", "CAPTURED")
    assert (await store.read.charge(sale.event_id, "c1")).refunding_ms == T0 + 1_000
    await sale.at(T0 + 1_250)
    assert await store.refund_result(sale.event_id, "c1", refunded=True) == "REFUNDED"
    c = await store.read.charge(sale.event_id, "c1")
    assert (c.state, c.refunding_ms, c.decided_ms) == (ChargeState.REFUNDED, T0 + 1_000, T0 + 1_250)
    # A charge that went REFUNDING, then DISPUTED, then back: timed from its return.
    await store.claim(sale.event_id, "bob", "h2")
    await store.start_charge(sale.event_id, "h2", "bob", "c2", 100)
    await callback(sale, "c2", "DECLINED")
    await callback(sale, "c2", "CAPTURED")
    await reversal(sale, "c2", "DISPUTE_OPENED")
    assert (await store.read.charge(sale.event_id, "c2")).refunding_ms == 0
    await sale.at(T0 + 5_000)
    await reversal(sale, "c2", "DISPUTE_WON")
    c2 = await store.read.charge(sale.event_id, "c2")
    assert (c2.state, c2.refunding_ms) == (ChargeState.REFUNDING, T0 + 5_000)


async def test_refund_retries_racing_the_refund_worker_end_in_one_refund(store: Store) -> None:
    """An operator pressing "retry" while the refund worker records the refund, many times at
    once, on each backend: the charge ends REFUNDED once, out of the queue, with one terminal
    record, and a retry after that is refused (409 not_refunding), never a second refund."""
    for trial in range(20):
        sale = await charging(store)
        await callback(sale, "c1", "DECLINED")
        await callback(sale, "c1", "CAPTURED")  # money to give back
        calls = [store.retry_refund(sale.event_id, "c1") for _ in range(8)]
        calls.insert(trial % 9, store.refund_result(sale.event_id, "c1", refunded=True))
        await asyncio.gather(*calls, return_exceptions=True)
        c = await store.read.charge(sale.event_id, "c1")
        assert c.state == ChargeState.REFUNDED
        assert await store.read.due_refunds(sale.event_id, 2**62) == []
        assert len(await terminal_records(sale, "charge", "c1")) == 1  # the decline's, only
        with pytest.raises(errors.NotRefunding):
            await store.retry_refund(sale.event_id, "c1")
        await sale.audit_ok()
