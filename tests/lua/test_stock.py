"""Quantity stock (ADR 0022) on fakeredis and real Redis: a cart holds lines of SKUs taken from
locations by the documented rule, all or nothing; the lines move as one through every
transition of the seat engine; corrections never take a location below what holds and sales
own; R-42 (capture and sweeper at the deadline) has exactly one winner."""

import pytest

from engine.model import errors
from engine.model.event_config import EventConfig
from engine.model.holds import LoginLimits, SeatSpec
from engine.model.states import HoldState, LatePolicy
from engine.model.stock_lines import SkuSpec, StockLine
from engine.store import Store
from tests.conftest import Sale
from tests.helpers import callback

T0 = 1_900_000_000_000
TTL = 600_000  # a cart reservation: 10 minutes


async def warehouse(
    store: Store,
    *,
    east: int = 5,
    west: int = 3,
    policy: LatePolicy = LatePolicy.QUARANTINE,
    event_id: str = "bikes",
) -> Sale:
    """Two SKUs at two locations: CHAIN (east, west) and TUBE (west only has some)."""
    skus = [
        SkuSpec("CHAIN", 2_500, {"east": east, "west": west}),
        SkuSpec("TUBE", 900, {"east": 0, "west": 4}),
    ]
    await store.stock.create_event(
        event_id,
        ["east", "west"],
        skus,
        EventConfig(hold_ttl_ms=TTL, quarantine_ms=900_000, policy=policy),
    )
    sale = Sale(store, event_id)
    await sale.at(T0)
    await store.open_sale(event_id)
    return sale


async def counts(store: Store, event_id: str, sku: str, location: str) -> dict[str, int]:
    table = await store.stock.table(event_id)
    return dict(table[sku]["locations"][location])


async def test_lines_come_from_the_preferred_location_with_enough(store: Store) -> None:
    sale = await warehouse(store)
    cart = await store.claim(
        sale.event_id, "ann", "c1", lines=[StockLine("CHAIN", 4), StockLine("TUBE", 2)]
    )
    # CHAIN: east (first in the preference order) has 5 >= 4; TUBE: east has 0, west has 4.
    assert cart.listing == "CHAIN@east*4,TUBE@west*2"
    h = await store.read.hold(sale.event_id, "c1")
    assert h.amount == 4 * 2_500 + 2 * 900 and h.is_stock
    # A line is never split: 3 CHAIN now fit only in west (east has 1 left).
    cart2 = await store.claim(sale.event_id, "bob", "c2", lines=[StockLine("CHAIN", 3)])
    assert cart2.listing == "CHAIN@west*3"
    assert await counts(store, sale.event_id, "CHAIN", "east") == {
        "on_hand": 5, "available": 1, "held": 4, "blocked": 0, "sold": 0,
    }  # fmt: skip
    a = await store.read.availability(sale.event_id)
    assert (a.seats_total, a.free, a.held) == (12, 3, 9)
    await sale.audit_ok()


async def test_a_cart_is_all_or_nothing_and_says_what_is_short(store: Store) -> None:
    sale = await warehouse(store)
    with pytest.raises(errors.InsufficientStock) as short:
        await store.claim(
            sale.event_id, "ann", "c1", lines=[StockLine("CHAIN", 2), StockLine("TUBE", 5)]
        )
    assert short.value.public_details() == {"sku": "TUBE", "available": 4}
    with pytest.raises(errors.InsufficientStock):  # asked at a location that has too few
        await store.claim(sale.event_id, "ann", "c2", lines=[StockLine("CHAIN", 4, "west")])
    with pytest.raises(errors.UnknownSku):
        await store.claim(sale.event_id, "ann", "c3", lines=[StockLine("BELL", 1)])
    with pytest.raises(errors.UnknownLocation):
        await store.claim(sale.event_id, "ann", "c4", lines=[StockLine("CHAIN", 1, "north")])
    with pytest.raises(errors.WrongKind):  # a seat claim on a stock event
        await store.claim(sale.event_id, "ann", "c5", quantity=2)
    assert (await store.read.availability(sale.event_id)).held == 0  # nothing taken
    await sale.audit_ok()


async def test_a_cart_moves_as_one_through_expiry_confirmation_and_release(store: Store) -> None:
    sale = await warehouse(store)
    await store.claim(sale.event_id, "ann", "c1", lines=[StockLine("CHAIN", 2)])
    await store.claim(sale.event_id, "bob", "c2", lines=[StockLine("TUBE", 3)])
    await store.start_charge(sale.event_id, "c2", "bob", "pay2", 2_700)
    assert (await callback(sale, "pay2", "CAPTURED")).decision == "CONFIRMED"
    await sale.at(T0 + TTL)
    assert (await store.sweep(sale.event_id)).expired == 1  # ann's cart: back to available
    assert await counts(store, sale.event_id, "CHAIN", "east") == {
        "on_hand": 5, "available": 5, "held": 0, "blocked": 0, "sold": 0,
    }  # fmt: skip
    assert (await counts(store, sale.event_id, "TUBE", "west"))["sold"] == 3
    await store.claim(sale.event_id, "cy", "c3", lines=[StockLine("CHAIN", 1)])
    assert await store.release(sale.event_id, "c3", "cy") == HoldState.RELEASED
    assert (await counts(store, sale.event_id, "CHAIN", "east"))["available"] == 5
    await sale.audit_ok()


async def test_two_tabs_a_new_cart_replaces_the_old_and_may_reuse_its_units(store: Store) -> None:
    sale = await warehouse(store, east=2, west=0)
    await store.claim(sale.event_id, "ann", "t1", lines=[StockLine("CHAIN", 2)])
    # The second tab asks for the same two: they count as available, the first cart gives them up.
    second = await store.claim(sale.event_id, "ann", "t2", lines=[StockLine("CHAIN", 2)])
    assert second.replaced == "t1" and second.listing == "CHAIN@east*2"
    assert (await store.read.hold(sale.event_id, "t1")).state == HoldState.RELEASED
    await sale.audit_ok()


async def test_the_cap_counts_units_and_an_event_may_set_its_own(store: Store) -> None:
    store.limits = LoginLimits(cap=3)
    store.claim_limits[2] = 3
    sale = await warehouse(store)
    with pytest.raises(errors.LimitExceeded):
        await store.claim(sale.event_id, "ann", "c1", lines=[StockLine("CHAIN", 4)])
    await store.stock.create_event(
        "shop2",
        ["east"],
        [SkuSpec("BELL", 100, {"east": 9})],
        EventConfig(hold_ttl_ms=TTL, quarantine_ms=900_000, login_cap=0),
    )
    await Sale(store, "shop2").at(T0)
    await store.open_sale("shop2")
    cart = await store.claim("shop2", "ann", "c1", lines=[StockLine("BELL", 8)])
    assert cart.listing == "BELL@east*8"  # the event's cap (none) wins over the deployment's


async def test_a_correction_never_takes_what_holds_and_sales_own(store: Store) -> None:
    sale = await warehouse(store)
    await store.claim(sale.event_id, "ann", "c1", lines=[StockLine("CHAIN", 4)])
    with pytest.raises(errors.StockBelowZero) as below:
        await store.stock.correct(
            sale.event_id, "k1", "CHAIN", "east", set_to=3, reason="count", operator="op"
        )
    assert below.value.public_details() == {"available": 1, "held": 4, "blocked": 0, "sold": 0}
    done = await store.stock.correct(
        sale.event_id, "k2", "CHAIN", "east", adjust_by=-1, reason="damaged", operator="op"
    )
    assert (done.on_hand, done.available, done.replay) == (4, 0, False)
    again = await store.stock.correct(
        sale.event_id, "k2", "CHAIN", "east", adjust_by=-1, reason="damaged", operator="op"
    )
    assert (again.on_hand, again.replay) == (4, True)  # applied once
    with pytest.raises(errors.CorrectionIdReused):
        await store.stock.correct(
            sale.event_id, "k2", "CHAIN", "east", adjust_by=-2, reason="damaged", operator="op"
        )
    up = await store.stock.correct(
        sale.event_id, "k3", "CHAIN", "east", set_to=10, reason="delivery", operator="op"
    )
    assert (up.on_hand, up.available) == (10, 6)
    records = [r for r in await store.read.outbox(sale.event_id) if r["kind"] == "correction"]
    applied = [(r["id"], r["from"], r["to"], r["mode"], r["value"]) for r in records]
    assert applied[-2:] == [("k2", "5", "4", "adjust", "-1"), ("k3", "4", "10", "set", "10")]
    await sale.audit_ok()


@pytest.mark.parametrize("policy", [LatePolicy.QUARANTINE, LatePolicy.RELEASE_REFUND])
@pytest.mark.parametrize("offset_ms", [-1, 0, 1])
async def test_r42_capture_at_the_deadline_has_one_winner(
    store: Store, policy: LatePolicy, offset_ms: int
) -> None:
    """R-42: the capture lands just before, at or just after the deadline, and the sweeper runs
    at the same instant. Live while now < expires_ms: before, the capture wins; at or after,
    the deadline does (quarantine: the units stay blocked and the capture still confirms;
    release-and-refund: the units go back and the capture is refunded)."""
    sale = await warehouse(store, policy=policy)
    await store.claim(sale.event_id, "ann", "r42", lines=[StockLine("CHAIN", 5)])
    await store.start_charge(sale.event_id, "r42", "ann", "pay", 12_500)
    await sale.at(T0 + TTL + offset_ms)
    await store.sweep(sale.event_id)
    result = await callback(sale, "pay", "CAPTURED")
    h = await store.read.hold(sale.event_id, "r42")
    east = await counts(store, sale.event_id, "CHAIN", "east")
    if offset_ms < 0 or policy == LatePolicy.QUARANTINE:
        assert (result.decision, h.state, east["sold"]) == ("CONFIRMED", HoldState.CONFIRMED, 5)
    else:
        assert (result.decision, h.state, east["available"]) == ("REFUND", HoldState.EXPIRED, 5)
    await sale.audit_ok()


async def test_a_late_capture_never_takes_units_another_cart_has(store: Store) -> None:
    """Payment success alone never authorizes negative stock: the expired cart's units went to
    another buyer, so its late capture is refunded in full, and nothing goes below zero."""
    sale = await warehouse(store, east=2, west=0, policy=LatePolicy.RELEASE_REFUND)
    await store.claim(sale.event_id, "ann", "a", lines=[StockLine("CHAIN", 2)])
    await store.start_charge(sale.event_id, "a", "ann", "pay-a", 5_000)
    await sale.at(T0 + TTL)
    await store.sweep(sale.event_id)
    await store.claim(sale.event_id, "bob", "b", lines=[StockLine("CHAIN", 2)])
    late = await callback(sale, "pay-a", "CAPTURED")
    assert late.decision == "REFUND"
    assert (await counts(store, sale.event_id, "CHAIN", "east"))["held"] == 2
    await sale.audit_ok()


async def test_a_rebuild_restores_stock_and_sold_lines(store: Store) -> None:
    sale = await warehouse(store)
    await store.claim(sale.event_id, "ann", "c1", lines=[StockLine("CHAIN", 2)])
    await store.start_charge(sale.event_id, "c1", "ann", "pay", 5_000)
    await callback(sale, "pay", "CAPTURED")
    await store.stock.create_event(
        "again",
        ["east", "west"],
        [SkuSpec("CHAIN", 2_500)],
        EventConfig(hold_ttl_ms=TTL, quarantine_ms=900_000),
    )
    assert await store.restore.stock("again", "CHAIN", "east", 5) == "RESTORED"
    assert await store.restore.stock("again", "CHAIN", "east", 5) == "EXISTS"
    code = await store.restore.hold(
        "again", "c1", "ann", "CHAIN@east*2", "pay", T0, HoldState.CONFIRMED
    )
    assert code == "RESTORED"
    assert await counts(store, "again", "CHAIN", "east") == {
        "on_hand": 5, "available": 3, "held": 0, "blocked": 0, "sold": 2,
    }  # fmt: skip
    code = await store.restore.hold(
        "again", "c9", "bob", "CHAIN@east*4", "pay9", T0, HoldState.CONFIRMED
    )
    assert code == "SEAT_NOT_FREE"  # only 3 left: none taken
    assert (await counts(store, "again", "CHAIN", "east"))["sold"] == 2


async def test_a_restored_cart_keeps_its_amount_and_a_value_is_one_body_however_written(
    store: Store,
) -> None:
    await store.stock.create_event(
        "again",
        ["east"],
        [SkuSpec("CHAIN", 2_500)],
        EventConfig(hold_ttl_ms=TTL, quarantine_ms=900_000),
    )
    await store.restore.stock("again", "CHAIN", "east", 5)
    await store.restore.hold("again", "c1", "ann", "CHAIN@east*2", "pay", T0, HoldState.CONFIRMED)
    assert (await store.read.hold("again", "c1")).amount == 5_000
    await Sale(store, "again").at(T0)
    await store.open_sale("again")
    first = await store.scripts.call(
        "stock_correct", store.keys("again"), ["k1", "CHAIN", "east", "adjust", "+4", "r", "op"]
    )
    again = await store.scripts.call(
        "stock_correct", store.keys("again"), ["k1", "CHAIN", "east", "adjust", "4", "r", "op"]
    )
    assert (first[0], again[0], again[1]) == ("APPLIED", "REPLAY", 9)


async def test_stock_answers_on_a_seat_event_name_the_kind(store: Store) -> None:
    await store.create_event(
        "gig", [SeatSpec("A1", 1)], EventConfig(hold_ttl_ms=TTL, quarantine_ms=900_000)
    )
    with pytest.raises(errors.WrongKind) as wrong:
        await store.stock.correct("gig", "k1", "CHAIN", "east", set_to=1, reason="r", operator="o")
    assert wrong.value.public_details() == {"kind": "seats"}
    with pytest.raises(errors.WrongKind):
        await store.stock.table("gig")
    with pytest.raises(errors.EventNotFound):
        await store.stock.table("nope")
    assert (await store.read.availability("gig")).kind == "seats"
