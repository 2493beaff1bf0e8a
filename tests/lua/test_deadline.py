"""The one-clock deadline rule: live while now < expires_ms, applied identically by the callback
path and the sweeper. Callbacks just before, exactly at and just after the deadline, to the
millisecond, under both late-payment policies (test clock; see docs/decisions)."""

import pytest

from engine.model.states import ChargeState, HoldState, LatePolicy
from engine.store import Store
from tests.conftest import Sale, open_sale
from tests.helpers import callback, terminal_records

T0 = 1_900_000_000_000
TTL = 480_000
Q = 300_000
E = T0 + TTL  # the deadline


async def charged_hold(store: Store, policy: LatePolicy) -> Sale:
    sale = await open_sale(store, 2, hold_ttl_ms=TTL, quarantine_ms=Q, policy=policy, now_ms=T0)
    claimed = await store.claim(sale.event_id, "alice", "h1")
    assert claimed.expires_ms == E
    await store.start_charge(sale.event_id, "h1", "alice", "c1", 9900)
    return sale


# (policy, offset from the deadline, expected decision, hold state, charge state, seat free?)
CAPTURE_CASES = [
    (LatePolicy.QUARANTINE, -1, "CONFIRMED", HoldState.CONFIRMED, ChargeState.CAPTURED, False),
    (LatePolicy.QUARANTINE, 0, "CONFIRMED", HoldState.CONFIRMED, ChargeState.CAPTURED, False),
    (LatePolicy.QUARANTINE, 1, "CONFIRMED", HoldState.CONFIRMED, ChargeState.CAPTURED, False),
    (LatePolicy.QUARANTINE, Q - 1, "CONFIRMED", HoldState.CONFIRMED, ChargeState.CAPTURED, False),
    (LatePolicy.QUARANTINE, Q, "REFUND", HoldState.EXPIRED, ChargeState.REFUNDING, True),
    (LatePolicy.RELEASE_REFUND, -1, "CONFIRMED", HoldState.CONFIRMED, ChargeState.CAPTURED, False),
    (LatePolicy.RELEASE_REFUND, 0, "REFUND", HoldState.EXPIRED, ChargeState.REFUNDING, True),
    (LatePolicy.RELEASE_REFUND, 1, "REFUND", HoldState.EXPIRED, ChargeState.REFUNDING, True),
]


@pytest.mark.parametrize(("policy", "offset", "decision", "hold", "charge", "free"), CAPTURE_CASES)
@pytest.mark.parametrize("swept_first", [False, True])
async def test_capture_around_the_deadline(
    store: Store,
    policy: LatePolicy,
    offset: int,
    decision: str,
    hold: HoldState,
    charge: ChargeState,
    free: bool,
    swept_first: bool,
) -> None:
    sale = await charged_hold(store, policy)
    await sale.at(E + offset)
    if swept_first:  # the sweeper ran first at the same instant: same rule, same result
        await store.sweep(sale.event_id)
        await store.sweep_quarantine(sale.event_id)
    res = await callback(sale, "c1", "CAPTURED")
    assert res.decision == decision
    h = await store.read.hold(sale.event_id, "h1")
    c = await store.read.charge(sale.event_id, "c1")
    assert (h.state, c.state) == (hold, charge)
    # A capture that lost to the deadline carries the resolve-by-refund mark and its reason.
    assert c.refund_only == (decision == "REFUND")
    if decision == "REFUND":
        assert c.reason in ("quarantine_timeout", "deadline_release_and_refund")
    assert ("s00000" in await store.read.free_seats(sale.event_id)) == free
    assert len(await terminal_records(sale, "hold", "h1")) == 1
    if policy == LatePolicy.QUARANTINE and offset >= 0:
        kinds = [(r["from"], r["to"]) for r in await sale.store.read.outbox(sale.event_id)]
        assert ("RESERVED", "QUARANTINED") in kinds
    await sale.audit_ok()


@pytest.mark.parametrize("policy", list(LatePolicy))
@pytest.mark.parametrize("offset", [-1, 0, 1])
async def test_sweeper_applies_the_same_rule(store: Store, policy: LatePolicy, offset: int) -> None:
    sale = await charged_hold(store, policy)
    # A second hold with no charge in flight, same deadline.
    await store.claim(sale.event_id, "bob", "h2")
    await sale.at(E + offset)
    result = await store.sweep(sale.event_id)
    h1 = await store.read.hold(sale.event_id, "h1")
    h2 = await store.read.hold(sale.event_id, "h2")
    if offset < 0:
        assert result.examined == 0
        assert (h1.state, h2.state) == (HoldState.RESERVED, HoldState.RESERVED)
    else:
        assert h2.state == HoldState.EXPIRED
        want = HoldState.QUARANTINED if policy == LatePolicy.QUARANTINE else HoldState.EXPIRED
        assert h1.state == want
        assert (await store.read.charge(sale.event_id, "c1")).refund_only == (
            policy == LatePolicy.RELEASE_REFUND
        )
    await sale.audit_ok()


@pytest.mark.parametrize("offset", [-1, 0, 1])
async def test_decline_around_the_deadline_quarantine(store: Store, offset: int) -> None:
    sale = await charged_hold(store, LatePolicy.QUARANTINE)
    await sale.at(E + offset)
    res = await callback(sale, "c1", "DECLINED")
    assert res.decision == "DECLINED"
    h = await store.read.hold(sale.event_id, "h1")
    # Before the deadline the hold stays live and may pay again; after, the seat goes back.
    assert h.state == (HoldState.RESERVED if offset < 0 else HoldState.EXPIRED)
    assert ("s00000" in await store.read.free_seats(sale.event_id)) == (offset >= 0)
    await sale.audit_ok()


async def test_quarantine_timeout_then_late_capture_is_refunded(store: Store) -> None:
    sale = await charged_hold(store, LatePolicy.QUARANTINE)
    await sale.at(E)
    assert (await store.sweep(sale.event_id)).other == 1  # quarantined
    await sale.at(E + Q - 1)
    assert (await store.sweep_quarantine(sale.event_id)).examined == 0
    await sale.at(E + Q)
    assert (await store.sweep_quarantine(sale.event_id)).expired == 1
    c = await store.read.charge(sale.event_id, "c1")
    assert (c.state, c.refund_only, c.reason) == (ChargeState.CHARGING, True, "quarantine_timeout")
    # The seat is back on sale and someone else takes it; the late capture is refunded.
    assert (await store.claim(sale.event_id, "bob", "h2", "s00000")).listing == "s00000"
    res = await callback(sale, "c1", "CAPTURED")
    assert (res.decision, res.hold_state) == ("REFUND", HoldState.EXPIRED)
    assert (await store.read.hold(sale.event_id, "h2")).state == HoldState.RESERVED
    await sale.audit_ok()
