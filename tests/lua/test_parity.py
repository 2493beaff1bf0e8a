"""Parity: every (state, event) pair of both automata, run through the scripts, must land where
engine/model/states.py says (or stay put where the table has no entry). The tables are the
documentation; this test keeps the scripts honest to them."""

import contextlib
import itertools
from collections.abc import Awaitable

import pytest

from engine.model.errors import NotAnException, NotConfirmed
from engine.model.states import (
    CHARGE_TRANSITIONS,
    HOLD_TRANSITIONS,
    ChargeEvent,
    ChargeState,
    HoldEvent,
    HoldState,
    LatePolicy,
    ReversalPolicy,
)
from engine.store import Store
from tests.conftest import Sale, open_sale
from tests.helpers import callback, reversal

T0 = 1_900_000_000_000
TTL, Q = 1_000, 5_000
E = T0 + TTL


AFTER_SALE = (HoldState.CONFIRMED, HoldState.EXCEPTION, HoldState.REVOKED)


async def hold_in(
    store: Store,
    state: HoldState,
    policy: LatePolicy,
    reversal_policy: ReversalPolicy = ReversalPolicy.MANUAL,
) -> Sale:
    """A sale whose hold h1 (login alice) is in `state`; charge c1 exists where needed."""
    sale = await open_sale(
        store,
        2,
        hold_ttl_ms=TTL,
        quarantine_ms=Q,
        policy=policy,
        now_ms=T0,
        reversal_policy=reversal_policy,
    )
    await store.claim(sale.event_id, "alice", "h1")
    if state in (HoldState.QUARANTINED, *AFTER_SALE):
        await store.start_charge(sale.event_id, "h1", "alice", "c1", 100)
    if state == HoldState.QUARANTINED:
        assert policy == LatePolicy.QUARANTINE
        await sale.at(E)
        await store.sweep(sale.event_id)
    elif state in AFTER_SALE:
        await callback(sale, "c1", "CAPTURED")
        if state == HoldState.EXCEPTION:  # a dispute opened: the money is withdrawn meanwhile
            await reversal(sale, "c1", "DISPUTE_OPENED")
        elif state == HoldState.REVOKED:  # refunded at the provider, revoke policy
            assert reversal_policy == ReversalPolicy.REVOKE
            await reversal(sale, "c1", "REFUND")
    elif state == HoldState.EXPIRED:
        await sale.at(E)
        await store.sweep(sale.event_id)
    elif state == HoldState.RELEASED:
        await store.release(sale.event_id, "h1", "alice")
    assert (await store.read.hold(sale.event_id, "h1")).state == state
    return sale


async def in_flight_charge(store: Store, sale: Sale) -> str:
    """The hold's in-flight charge, started now if the hold is live and has none."""
    h = await store.read.hold(sale.event_id, "h1")
    if h.charge_in_flight:
        return h.charge_in_flight
    if h.state == HoldState.RESERVED:
        await store.start_charge(sale.event_id, "h1", "alice", "c2", 100)
        return "c2"
    return h.charge_ids[-1] if h.charge_ids else "never-started"


async def apply_hold_event(store: Store, sale: Sale, event: HoldEvent) -> None:
    h = await store.read.hold(sale.event_id, "h1")
    if event == HoldEvent.DEADLINE_IDLE:
        await sale.at(max(E, h.expires_ms))
        await store.sweep(sale.event_id)
    elif event in (HoldEvent.DEADLINE_CHARGING, HoldEvent.DEADLINE_CHARGING_RELEASE):
        if h.state == HoldState.RESERVED:
            await in_flight_charge(store, sale)
        await sale.at(max(E, h.expires_ms))
        await store.sweep(sale.event_id)
    elif event == HoldEvent.RELEASE:
        await store.release(sale.event_id, "h1", "alice")
    elif event == HoldEvent.CAPTURE_WINS:
        await callback(sale, await in_flight_charge(store, sale), "CAPTURED")
    elif event == HoldEvent.CHARGE_RESOLVED:
        await callback(sale, await in_flight_charge(store, sale), "DECLINED")
    elif event == HoldEvent.QUARANTINE_TIMEOUT:
        await sale.at(E + Q)
        await store.sweep_quarantine(sale.event_id)
    elif event == HoldEvent.OPERATOR_REVOKE:
        with contextlib.suppress(NotAnException):
            await store.revoke_hold(sale.event_id, "h1", "ops")
    elif event == HoldEvent.SALE_UNDONE:
        await undo_sale(store, sale)
    else:  # money the provider moves on its own, on the hold's winner (or its latest charge)
        charge_id = h.winner or await in_flight_charge(store, sale)
        kind = {
            HoldEvent.DISPUTE_OPENED: "DISPUTE_OPENED",
            HoldEvent.DISPUTE_WON: "DISPUTE_WON",
        }.get(event, "REFUND")
        if event in (HoldEvent.MONEY_LEFT, HoldEvent.MONEY_LEFT_REVOKE) and h.winner:
            winner = await store.read.charge(sale.event_id, h.winner)
            if winner.state == ChargeState.DISPUTED:
                kind = "DISPUTE_LOST"  # for a disputed winner, money leaves when it is lost
        # A charge still CHARGING has no money to move yet: the movement is only noted.
        if charge_id != "never-started":  # no charge, no money the provider could move
            await reversal(sale, charge_id, kind)


def hold_policy(state: HoldState, event: HoldEvent) -> LatePolicy:
    if event == HoldEvent.DEADLINE_CHARGING_RELEASE:
        return LatePolicy.RELEASE_REFUND
    return LatePolicy.QUARANTINE


def reversal_policy_for(state: HoldState, event: HoldEvent) -> ReversalPolicy:
    if event == HoldEvent.MONEY_LEFT_REVOKE or state == HoldState.REVOKED:
        return ReversalPolicy.REVOKE
    return ReversalPolicy.MANUAL


async def hold_pair(store: Store, state: HoldState, event: HoldEvent) -> str | None:
    """`event` applied to a hold in `state` on a sale of its own: None when it lands where the
    table says, else what happened instead."""
    policy = hold_policy(state, event)
    if state == HoldState.QUARANTINED and policy != LatePolicy.QUARANTINE:
        policy = LatePolicy.QUARANTINE  # a quarantined hold only exists under that policy
    sale = await hold_in(store, state, policy, reversal_policy_for(state, event))
    await apply_hold_event(store, sale, event)
    want = HOLD_TRANSITIONS.get((state, event), state)
    got = (await store.read.hold(sale.event_id, "h1")).state
    await sale.audit_ok()
    return None if got == want else f"{state} + {event}: {got}, the table says {want}"


@pytest.mark.parametrize("state", list(HoldState))
async def test_hold_pairs(store: Store, state: HoldState) -> None:
    """Every event on a hold in `state` (one id per state; each pair on its own sale)."""
    wrong = [await pair_result(hold_pair(store, state, event), event) for event in HoldEvent]
    assert [w for w in wrong if w] == []


async def pair_result(pair: Awaitable[str | None], event: object) -> str | None:
    """The pair's result; an error in it is a wrong pair too, named by its event (the state's
    other pairs still run)."""
    try:
        return await pair
    except Exception as exc:
        return f"the pair with {event} failed: {exc!r}"


async def charge_in(store: Store, state: ChargeState) -> Sale:
    """A sale whose charge c1 on hold h1 is in `state`."""
    sale = await open_sale(store, 2, hold_ttl_ms=TTL, quarantine_ms=Q, now_ms=T0)
    await store.claim(sale.event_id, "alice", "h1")
    await store.start_charge(sale.event_id, "h1", "alice", "c1", 100)
    if state == ChargeState.CAPTURED:
        await callback(sale, "c1", "CAPTURED")
    elif state in (ChargeState.PROVIDER_REFUNDED, ChargeState.DISPUTED, ChargeState.CHARGED_BACK):
        await callback(sale, "c1", "CAPTURED")
        if state == ChargeState.PROVIDER_REFUNDED:
            await reversal(sale, "c1", "REFUND")
        else:
            await reversal(sale, "c1", "DISPUTE_OPENED")
            if state == ChargeState.CHARGED_BACK:
                await reversal(sale, "c1", "DISPUTE_LOST")
    elif state in (ChargeState.DECLINED, ChargeState.FAILED):
        await callback(sale, "c1", state.value)
    elif state in (ChargeState.REFUNDING, ChargeState.REFUNDED):
        await store.release(sale.event_id, "h1", "alice")
        await callback(sale, "c1", "CAPTURED")
        if state == ChargeState.REFUNDED:
            await store.refund_result(sale.event_id, "c1", refunded=True)
    assert (await store.read.charge(sale.event_id, "c1")).state == state
    return sale


async def undo_sale(store: Store, sale: Sale) -> None:
    """The operator gives h1's whole order back (refused unless it is a CONFIRMED sale)."""
    seat = (await store.read.hold(sale.event_id, "h1")).listing
    with contextlib.suppress(NotConfirmed):
        await store.order_refunds.refund(
            sale.event_id, "h1", "undo", seat_ids=[seat], reason="parity"
        )


async def apply_charge_event(store: Store, sale: Sale, event: ChargeEvent) -> None:
    if event == ChargeEvent.SALE_UNDONE:
        await undo_sale(store, sale)
    elif event == ChargeEvent.CAPTURE_WINS:
        await callback(sale, "c1", "CAPTURED")
    elif event == ChargeEvent.CAPTURE_LOSES:
        await store.release(sale.event_id, "h1", "alice")
        await callback(sale, "c1", "CAPTURED")
    elif event == ChargeEvent.DECLINE:
        await callback(sale, "c1", "DECLINED")
    elif event == ChargeEvent.FAIL:
        await callback(sale, "c1", "FAILED")
    elif event == ChargeEvent.REFUND_CONFIRMED:
        await store.refund_result(sale.event_id, "c1", refunded=True)
    elif event in (ChargeEvent.CAPTURE_AFTER_REFUND, ChargeEvent.CAPTURE_CONTRADICTS):
        await callback(sale, "c1", "CAPTURED")
    else:
        if event == ChargeEvent.DISPUTE_WON_NO_SEAT:  # the seat was taken back meanwhile
            with contextlib.suppress(NotAnException):
                await store.revoke_hold(sale.event_id, "h1", "ops")
        kind = {
            ChargeEvent.PROVIDER_REFUND: "REFUND",
            ChargeEvent.DISPUTE_OPENED: "DISPUTE_OPENED",
            ChargeEvent.DISPUTE_WON: "DISPUTE_WON",
            ChargeEvent.DISPUTE_WON_NO_SEAT: "DISPUTE_WON",
            ChargeEvent.DISPUTE_LOST: "DISPUTE_LOST",
        }[event]
        await reversal(sale, "c1", kind)  # CHARGING: nothing to move yet, only noted


# A capture after a refund only means something once the charge was captured before; a capture
# of a declined or failed attempt is by definition the contradicting one, and a contradicting
# capture needs an earlier decline or failure.
_CAPTURES = (ChargeEvent.CAPTURE_WINS, ChargeEvent.CAPTURE_LOSES, ChargeEvent.CAPTURE_AFTER_REFUND)
NOT_APPLICABLE = {
    (ChargeState.CHARGING, ChargeEvent.CAPTURE_AFTER_REFUND),
    (ChargeState.CHARGING, ChargeEvent.CAPTURE_CONTRADICTS),
    *((s, e) for s in (ChargeState.DECLINED, ChargeState.FAILED) for e in _CAPTURES),
}


CHARGE_PAIRS = [p for p in itertools.product(ChargeState, ChargeEvent) if p not in NOT_APPLICABLE]


async def charge_pair(store: Store, state: ChargeState, event: ChargeEvent) -> str | None:
    """As hold_pair, for a charge."""
    sale = await charge_in(store, state)
    await apply_charge_event(store, sale, event)
    want = CHARGE_TRANSITIONS.get((state, event), state)
    got = (await store.read.charge(sale.event_id, "c1")).state
    await sale.audit_ok()
    return None if got == want else f"{state} + {event}: {got}, the table says {want}"


@pytest.mark.parametrize("state", list(ChargeState))
async def test_charge_pairs(store: Store, state: ChargeState) -> None:
    """Every applicable event on a charge in `state` (one id per state)."""
    events = [e for s, e in CHARGE_PAIRS if s == state]
    wrong = [await pair_result(charge_pair(store, state, event), event) for event in events]
    assert [w for w in wrong if w] == []
