"""Part of an order given back (lua/hold_refund.lua, ADR 0043) on fakeredis, real Redis and a
cluster: the money of exactly the named seats or units becomes a part charge on the refund
queue, those goods go back on sale and leave the hold, the rest stays sold; naming everything
left gives the whole rest back; an Idempotency-Key is one refund; a provider's report of our
part changes nothing, a part the provider returned on its own sends the order to the
exceptions and its rest back when the seats go back on sale."""

import orjson
import pytest

from engine.model import errors, keys
from engine.model.keys import EVENT_KEYS
from engine.model.records import OutboxRecord
from engine.model.states import ChargeState, HoldState, ReversalPolicy
from engine.model.stock_lines import StockLine
from engine.store import Store
from tests.conftest import Sale, open_sale
from tests.helpers import callback, reversal
from tests.lua.test_stock import warehouse

T0 = 1_900_000_000_000
PRICE = 4_500  # each seat's: the party of four pays 18,000


async def party_sold(store: Store, **sale_options: object) -> Sale:
    """alice's party of four (h1) bought with charge c1 for 4 x PRICE."""
    sale = await open_sale(store, 6, now_ms=T0, **sale_options)  # type: ignore[arg-type]
    await store.claim(sale.event_id, "alice", "h1", seats=["s00000", "s00001", "s00002", "s00003"])
    await store.start_charge(sale.event_id, "h1", "alice", "c1", 4 * PRICE)
    assert (await callback(sale, "c1", "CAPTURED")).decision == "CONFIRMED"
    return sale


async def give_back(sale: Sale, key: str, seats: list[str], amount: int = PRICE) -> list[object]:
    """The script call itself (the store's facet reads prices the test event does not keep)."""
    part = keys.part_id("c1", sale.event_id, "h1", key)
    return await sale.store.runner.run(
        "hold_refund", sale.event_id, ["h1", part, ",".join(seats), amount, "seat broken"]
    )


async def test_one_seat_of_a_party_of_four_gives_back_its_price_and_goes_on_sale(
    store: Store,
) -> None:
    sale = await party_sold(store)
    free_before = (await store.read.availability(sale.event_id)).free
    code, part_id, amount, kept = await give_back(sale, "k1", ["s00002"])
    assert (code, int(amount), kept) == ("PART", PRICE, "s00000,s00001,s00003")
    part = await store.read.charge(sale.event_id, part_id)
    assert (part.state, part.amount, part.seat_id, part.part_of) == (
        ChargeState.REFUNDING, PRICE, "s00002", "c1"
    )  # fmt: skip
    assert (part.key, part.attempt_id) == ("c1", "att-c1")  # the provider's, for its refund
    winner = await store.read.charge(sale.event_id, "c1")
    assert (winner.state, winner.parted, winner.holds_money) == (
        ChargeState.CAPTURED, PRICE, 3 * PRICE
    )  # fmt: skip
    h = await store.read.hold(sale.event_id, "h1")
    assert (h.state, h.seat_ids) == (HoldState.CONFIRMED, ("s00000", "s00001", "s00003"))
    avail = await store.read.availability(sale.event_id)
    assert (avail.free, avail.sold) == (free_before + 1, 3)
    assert part_id in await store.read.due_refunds(sale.event_id, T0 + 1)
    # Another buyer can buy the seat at once.
    assert (await store.claim(sale.event_id, "bob", "h2", "s00002")).listing == "s00002"
    records = [r for r in await store.read.outbox(sale.event_id) if r.get("reason", "") != ""]
    assert [(r["kind"], r["to"]) for r in records[-2:]] == [
        ("charge", "REFUNDING"), ("hold", "CONFIRMED")
    ]  # fmt: skip
    # The refund worker's answer closes the part; the order keeps three seats and their money.
    assert await store.refund_result(sale.event_id, part_id, refunded=True) == "REFUNDED"
    assert (await store.read.charge(sale.event_id, part_id)).holds_money == 0
    await sale.audit_ok()


async def test_the_same_key_is_one_refund_and_another_body_is_refused(store: Store) -> None:
    sale = await party_sold(store)
    first = await give_back(sale, "k1", ["s00001"])
    again = await give_back(sale, "k1", ["s00001"])
    assert again[0] == "REPLAY" and again[1:3] == first[1:3]
    assert (await store.read.availability(sale.event_id)).sold == 3  # given back once
    assert (await give_back(sale, "k1", ["s00003"]))[:2] == ["IDEMPOTENCY_KEY_REUSED", "s00001"]
    assert (await store.read.charge(sale.event_id, "c1")).parted == PRICE
    await sale.audit_ok()


async def test_what_the_order_does_not_hold_or_an_unpaid_hold_changes_nothing(
    store: Store,
) -> None:
    sale = await party_sold(store)
    assert (await give_back(sale, "k1", ["s00001", "s00005"]))[:2] == ["NOT_IN_ORDER", "s00005"]
    await store.claim(sale.event_id, "bob", "h2", "s00005")
    part = keys.part_id("c1", sale.event_id, "h2", "k")
    reply = await store.runner.run("hold_refund", sale.event_id, ["h2", part, "s00005", 1, "x"])
    assert reply == ["NOT_CONFIRMED", "RESERVED"]
    h = await store.read.hold(sale.event_id, "h1")
    assert len(h.seat_ids) == 4 and (await store.read.charge(sale.event_id, "c1")).parted == 0
    with pytest.raises(errors.NotConfirmed):
        await store.order_refunds.refund(sale.event_id, "h2", "k", seat_ids=["s00005"], reason="x")
    await sale.audit_ok()


async def test_naming_everything_left_gives_the_rest_back_and_revokes(store: Store) -> None:
    sale = await party_sold(store)
    await give_back(sale, "k1", ["s00000"])
    code, charge_id, amount = await give_back(sale, "k2", ["s00001", "s00002", "s00003"], 0)
    assert (code, charge_id, int(amount)) == ("WHOLE", "c1", 3 * PRICE)
    winner = await store.read.charge(sale.event_id, "c1")
    assert (winner.state, winner.holds_money) == (ChargeState.REFUNDING, 3 * PRICE)
    h = await store.read.hold(sale.event_id, "h1")
    assert h.state == HoldState.REVOKED
    avail = await store.read.availability(sale.event_id)
    assert (avail.free, avail.sold) == (6, 0)
    assert (await give_back(sale, "k2", ["s00001", "s00002", "s00003"], 0))[0] == "REPLAY"
    await sale.audit_ok()


async def test_units_of_a_cart_give_back_their_sku_price(store: Store) -> None:
    sale = await warehouse(store, event_id=f"bikes-{keys.slot_of('x')}")
    cart = await store.claim(
        sale.event_id, "ann", "c", lines=[StockLine("CHAIN", 3), StockLine("TUBE", 2)]
    )
    await store.start_charge(sale.event_id, cart.hold_id, "ann", "k1", cart.amount)
    assert (await callback(sale, "k1", "CAPTURED")).decision == "CONFIRMED"
    refund = await store.order_refunds.refund(
        sale.event_id, cart.hold_id, "r1", lines=[StockLine("CHAIN", 1, "east")], reason="late"
    )
    assert (refund.amount, refund.whole, refund.replay) == (2_500, False, False)
    h = await store.read.hold(sale.event_id, cart.hold_id)
    assert (h.listing, h.amount) == ("CHAIN@east*2,TUBE@west*2", cart.amount - 2_500)
    table = await store.stock.table(sale.event_id)
    assert table["CHAIN"]["locations"]["east"]["sold"] == 2
    assert (await store.read.charge(sale.event_id, "k1")).holds_money == cart.amount - 2_500
    with pytest.raises(errors.NotInOrder):
        await store.order_refunds.refund(
            sale.event_id, cart.hold_id, "r2", lines=[StockLine("TUBE", 3, "west")], reason="x"
        )
    await sale.audit_ok()


async def test_the_providers_report_of_our_part_changes_nothing(store: Store) -> None:
    sale = await party_sold(store)
    await give_back(sale, "k1", ["s00002"])
    # Stripe reports a charge's refunded total; a single refund's amount is as much or less.
    res = await reversal(sale, "c1", "REFUND", amount=PRICE)
    assert (res.decision, res.charge_state) == ("DUPLICATE", ChargeState.CAPTURED)
    assert (await store.read.hold(sale.event_id, "h1")).state == HoldState.CONFIRMED
    assert await store.read.alerts(sale.event_id) == []
    await sale.audit_ok()


@pytest.mark.parametrize("policy", [ReversalPolicy.MANUAL, ReversalPolicy.REVOKE])
async def test_a_part_the_provider_returned_on_its_own_sends_the_rest_back_with_the_seats(
    store: Store, policy: ReversalPolicy
) -> None:
    sale = await party_sold(store, reversal_policy=policy)
    res = await reversal(sale, "c1", "REFUND", amount=PRICE)  # from its dashboard
    assert (res.decision, res.charge_state) == ("MONEY_LEFT", ChargeState.PROVIDER_REFUNDED)
    winner = await store.read.charge(sale.event_id, "c1")
    assert winner.moved == PRICE
    h = await store.read.hold(sale.event_id, "h1")
    if policy == ReversalPolicy.MANUAL:
        # Which seat that paid for is a person's call: the order waits in the exceptions with
        # the rest of its money still at the provider.
        assert (h.state, h.reason) == (HoldState.EXCEPTION, "money_partly_refunded_at_provider")
        assert winner.holds_money == 3 * PRICE
        await store.revoke_hold(sale.event_id, "h1", "ops")
    rest = await store.read.charge(sale.event_id, "c1:r000000000000")
    assert (rest.state, rest.amount, rest.part_of) == (ChargeState.REFUNDING, 3 * PRICE, "c1")
    assert (await store.read.charge(sale.event_id, "c1")).holds_money == 0
    assert (await store.read.hold(sale.event_id, "h1")).state == HoldState.REVOKED
    assert (await store.read.availability(sale.event_id)).sold == 0
    await sale.audit_ok()


async def test_the_provider_giving_back_everything_closes_the_parts_on_their_way(
    store: Store,
) -> None:
    sale = await party_sold(store)
    _, part_id, _, _ = await give_back(sale, "k1", ["s00000"])
    # Its refunded total is the whole capture: our part's money is back with the buyer too.
    res = await reversal(sale, "c1", "REFUND", amount=4 * PRICE)
    assert (res.decision, res.charge_state) == ("MONEY_LEFT", ChargeState.PROVIDER_REFUNDED)
    part = await store.read.charge(sale.event_id, part_id)
    assert (part.state, part.reason) == (ChargeState.REFUNDED, "operator_refund:seat broken")
    assert part_id not in await store.read.due_refunds(sale.event_id, T0 + 10**9)
    assert (await store.read.charge(sale.event_id, "c1")).holds_money == 0
    await sale.audit_ok()


async def test_more_leaving_a_partly_refunded_order_is_followed(store: Store) -> None:
    sale = await party_sold(store)
    await reversal(sale, "c1", "REFUND", amount=PRICE)  # one seat's worth, at the provider
    await reversal(sale, "c1", "REFUND", amount=3 * PRICE)  # its refunded total grew
    assert (await store.read.charge(sale.event_id, "c1")).holds_money == PRICE
    await reversal(sale, "c1", "REFUND", amount=4 * PRICE)  # and then all of it
    winner = await store.read.charge(sale.event_id, "c1")
    assert winner.holds_money == 0
    await store.revoke_hold(sale.event_id, "h1", "ops")  # nothing left to give back
    with pytest.raises(errors.ChargeNotFound):
        await store.read.charge(sale.event_id, "c1:r000000000000")
    await sale.audit_ok()


# -- what a review found (each failed before its fix) -------------------------------------------


async def test_a_late_report_of_a_part_does_not_close_the_rest_on_its_way(store: Store) -> None:
    """A part's refund reported by the provider after the rest of the order went REFUNDING: our
    part, nothing else; the rest stays on the refund queue until its own money is back."""
    sale = await party_sold(store)
    await give_back(sale, "k1", ["s00000"])
    await give_back(sale, "k2", ["s00001", "s00002", "s00003"], 0)  # the whole rest
    res = await reversal(sale, "c1", "REFUND", amount=PRICE)  # the part's, delivered late
    assert (res.decision, res.charge_state) == ("DUPLICATE", ChargeState.REFUNDING)
    assert "c1" in await store.read.due_refunds(sale.event_id, T0 + 10**9)
    # The total reaching the whole capture is the rest's money back too.
    res = await reversal(sale, "c1", "REFUND", amount=4 * PRICE)
    assert res.charge_state == ChargeState.REFUNDED
    await sale.audit_ok()


async def test_goods_of_the_other_kind_are_not_in_the_order(store: Store) -> None:
    sale = await party_sold(store)
    part = keys.part_id("c1", sale.event_id, "h1", "k")
    reply = await store.runner.run(
        "hold_refund", sale.event_id, ["h1", part, "CHAIN@east*1", PRICE, "x"]
    )
    assert reply[0] == "NOT_IN_ORDER"
    cart_sale = await warehouse(store, event_id=f"cart-{keys.slot_of('y')}")
    cart = await store.claim(cart_sale.event_id, "ann", "c", lines=[StockLine("CHAIN", 2)])
    await store.start_charge(cart_sale.event_id, cart.hold_id, "ann", "k1", cart.amount)
    await callback(cart_sale, "k1", "CAPTURED")
    with pytest.raises(errors.NotInOrder):
        await store.order_refunds.refund(
            cart_sale.event_id, cart.hold_id, "r", seat_ids=["s00000"], reason="x"
        )
    assert (await store.read.charge(cart_sale.event_id, "k1")).parted == 0
    await sale.audit_ok()
    await cart_sale.audit_ok()


async def test_a_key_is_one_part_even_when_the_order_forgot_its_parts(store: Store) -> None:
    """As after a rebuild that restored the part but not the order's map of parts: the part
    itself answers a replay, and refuses other goods under its key."""
    sale = await party_sold(store)
    first = await give_back(sale, "k1", ["s00001"])
    charges = store.keys(sale.event_id)[EVENT_KEYS.index("charges")]
    winner = orjson.loads(await store.client.hget(charges, "c1"))
    del winner["parts"]
    await store.client.hset(charges, "c1", orjson.dumps(winner))
    again = await give_back(sale, "k1", ["s00001"])
    assert again[:3] == ["REPLAY", first[1], first[2]]
    assert (await give_back(sale, "k1", ["s00002"]))[:2] == ["IDEMPOTENCY_KEY_REUSED", "s00001"]
    assert (await store.read.availability(sale.event_id)).sold == 3


async def test_the_rest_given_back_is_recorded_as_the_rest(store: Store) -> None:
    """The order's own refund record names only what it gives back after its parts: the
    ledger's refunds and the merchant's order.refunded add up to the capture, not more."""
    sale = await party_sold(store)
    _, part_id, _, _ = await give_back(sale, "k1", ["s00000"])
    await give_back(sale, "k2", ["s00001", "s00002", "s00003"], 0)
    await store.refund_result(sale.event_id, part_id, refunded=True)
    await store.refund_result(sale.event_id, "c1", refunded=True)
    records = [OutboxRecord.from_fields(f) for f in await store.read.outbox(sale.event_id)]
    back = {r.entity_id: r.returned for r in records if r.to_state == "REFUNDED"}
    assert back == {part_id: PRICE, "c1": 3 * PRICE}


async def test_nothing_is_given_back_on_a_fenced_event(store: Store) -> None:
    sale = await party_sold(store)
    await store.fence(sale.event_id, "test")
    with pytest.raises(errors.Recovering):
        await store.order_refunds.refund(sale.event_id, "h1", "k", seat_ids=["s00000"],
                                         reason="x")  # fmt: skip
    assert (await store.read.charge(sale.event_id, "c1")).parted == 0


async def test_what_the_provider_returned_is_counted_against_parts_already_back(
    store: Store,
) -> None:
    """A part still on its way when the provider returns some more itself: the rest given back
    on the revoke is what the provider still holds beyond that part, never more."""
    sale = await party_sold(store)
    await give_back(sale, "k1", ["s00000"])  # 4,500 on its way, not yet back
    await reversal(sale, "c1", "REFUND", amount=PRICE + PRICE // 2)  # the provider, 6,750 total
    await store.revoke_hold(sale.event_id, "h1", "ops")
    rest = await store.read.charge(sale.event_id, "c1:r000000000000")
    # The capture 18,000 less the part 4,500 less what the provider returned on its own 6,750.
    assert rest.amount == 4 * PRICE - PRICE - (PRICE + PRICE // 2)
    await sale.audit_ok()
