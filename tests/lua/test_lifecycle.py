"""The end of a sale (ADR 0025): a second open does not move T0, close refuses new claims and
charge starts while callbacks still decide, and cancel ends every hold in a recorded state with
the captured money of every sold seat on the refund queue, bounded per call and idempotent."""

import pytest

from engine.model.errors import AlreadyOpen, SaleClosed, SaleStarted
from engine.model.states import ChargeState, HoldState, LatePolicy
from engine.store import Store
from engine.views.listings import Listings
from tests.conftest import open_sale
from tests.helpers import callback

T0 = 1_900_000_000_000
TTL, Q = 1_000, 5_000


async def test_a_second_open_answers_already_open_and_moves_t0_only_before_it(
    store: Store,
) -> None:
    sale = await open_sale(store, 2, now_ms=T0)
    with pytest.raises(AlreadyOpen) as caught:
        await store.lifecycle.open(sale.event_id, T0 + 50)
    assert caught.value.public_details() == {"opens_at_ms": T0}
    # Opened "now" at T0: the sale started, T0 stays.
    with pytest.raises(SaleStarted):
        await store.lifecycle.open(sale.event_id, T0 + 50, reschedule=True)
    other = await open_sale(store, 2, now_ms=T0)
    await store.client.hset(store.keys(other.event_id)[0], "opens_at_ms", T0 + 10_000)
    assert await store.lifecycle.open(other.event_id, T0 + 20_000, reschedule=True) == T0 + 20_000
    ev = await store.read.availability(other.event_id)
    assert ev.opens_at_ms == T0 + 20_000


async def test_close_refuses_claims_and_charge_starts_while_callbacks_decide(
    store: Store,
) -> None:
    sale = await open_sale(store, 4, now_ms=T0, hold_ttl_ms=TTL, quarantine_ms=Q)
    await store.claim(sale.event_id, "alice", "h1")
    await store.claim(sale.event_id, "bob", "h2")
    await store.start_charge(sale.event_id, "h1", "alice", "c1", 100)
    assert await store.lifecycle.close(sale.event_id, "ops") == "closed"
    assert await store.lifecycle.close(sale.event_id, "ops") == "closed"  # a repeat
    with pytest.raises(SaleClosed) as caught:
        await store.claim(sale.event_id, "carol", "h3")
    assert caught.value.public_details() == {"sale_status": "closed"}
    with pytest.raises(SaleClosed):
        await store.start_charge(sale.event_id, "h2", "bob", "c2", 100)
    with pytest.raises(SaleClosed):
        await store.lifecycle.open(sale.event_id, 0, reschedule=True)
    await callback(sale, "c1", "CAPTURED")
    assert (await store.read.hold(sale.event_id, "h1")).state == HoldState.CONFIRMED
    await sale.at(T0 + TTL)  # holds run on to their deadlines
    await store.sweep(sale.event_id)
    assert (await store.read.hold(sale.event_id, "h2")).state == HoldState.EXPIRED
    closes = [r for r in await store.read.outbox(sale.event_id) if r["kind"] == "event"]
    assert [(r["to"], r["from"]) for r in closes] == [("EVENT_CLOSED", "open")]
    await sale.audit_ok()


async def test_cancel_ends_every_hold_and_refunds_every_sold_seat(store: Store) -> None:
    sale = await open_sale(
        store, 8, now_ms=T0, hold_ttl_ms=TTL, quarantine_ms=Q, policy=LatePolicy.QUARANTINE
    )
    ev = sale.event_id
    for n, login in enumerate(("ann", "bea", "cid", "dan", "eve"), start=1):
        await store.claim(ev, login, f"h{n}")
    for n, login in ((1, "ann"), (2, "bea"), (4, "dan")):
        await store.start_charge(ev, f"h{n}", login, f"c{n}", 100)
    await callback(sale, "c1", "CAPTURED")  # h1 sold
    await store.release(ev, "h5", "eve")
    await sale.at(T0 + TTL)  # h4's deadline passes with c4 in flight: QUARANTINED
    await store.sweep(ev)
    await sale.at(T0 + TTL + 1)
    progress = await store.lifecycle.cancel(ev, "ops", batch=1)
    assert progress.complete and progress.remaining == 0 and progress.done >= 3
    states = {f"h{n}": (await store.read.hold(ev, f"h{n}")).state for n in range(1, 6)}
    assert states == {
        "h1": HoldState.REVOKED,
        "h2": HoldState.EXPIRED,  # past its deadline with c2 in flight: quarantined, then ended
        "h3": HoldState.EXPIRED,
        "h4": HoldState.EXPIRED,
        "h5": HoldState.RELEASED,
    }
    c1 = await store.read.charge(ev, "c1")
    assert (c1.state, c1.reason, c1.captured) == (ChargeState.REFUNDING, "event_cancelled", 100)
    assert await store.read.due_refunds(ev, T0 + 10_000) == ["c1"]
    page, holds = await Listings(store.read).exceptions(ev, None, 10)
    assert [(c.charge_id, c.state) for c in page.items] == [("c1", ChargeState.REFUNDING)]
    assert holds["h1"].state == HoldState.REVOKED and page.cursor is None
    assert (await store.read.charge(ev, "c2")).refund_only
    a = await store.read.availability(ev)
    assert (a.status, a.free, a.held, a.blocked, a.sold) == ("cancelled", 8, 0, 0, 0)
    await sale.audit_ok()
    before = len(await store.read.outbox(ev))
    again = await store.lifecycle.cancel(ev, "ops")
    assert (again.complete, again.done) == (True, 0)
    assert len(await store.read.outbox(ev)) == before  # idempotent: nothing recorded again
    await callback(sale, "c2", "CAPTURED")  # a late capture on a cancelled sale: refunded
    assert (await store.read.charge(ev, "c2")).state == ChargeState.REFUNDING
    await store.refund_result(ev, "c1", refunded=True)
    assert (await store.read.charge(ev, "c1")).state == ChargeState.REFUNDED
    cancels = [r for r in await store.read.outbox(ev) if r["kind"] == "event"]
    assert [r["to"] for r in cancels] == ["EVENT_CANCELLED"]
    await sale.audit_ok()


async def test_cancel_of_live_holds_releases_them(store: Store) -> None:
    sale = await open_sale(store, 3, now_ms=T0, hold_ttl_ms=TTL, quarantine_ms=Q)
    ev = sale.event_id
    await store.claim(ev, "ann", "h1")
    await store.claim(ev, "bea", "h2")
    await store.start_charge(ev, "h2", "bea", "c2", 100)
    progress = await store.lifecycle.cancel(ev, "ops")
    assert progress.complete
    for hold_id in ("h1", "h2"):
        assert (await store.read.hold(ev, hold_id)).state == HoldState.RELEASED
    assert (await store.read.charge(ev, "c2")).refund_only
    await callback(sale, "c2", "CAPTURED")
    assert (await store.read.charge(ev, "c2")).state == ChargeState.REFUNDING
    await sale.audit_ok()
