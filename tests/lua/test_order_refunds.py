"""Part of an order given back (lua/hold_refund.lua, ADR 0043) on fakeredis, real Redis and a
cluster: the money of exactly the named seats or units becomes a part charge on the refund
queue, those goods go back on sale and leave the hold, the rest stays sold; naming everything
left gives the whole rest back; an Idempotency-Key is one refund; a provider's report of our
part changes nothing, a part the provider returned on its own sends the order to the
exceptions and its rest back when the seats go back on sale."""

import pytest

from engine import errors, keys
from engine.states import ChargeState, HoldState, ReversalPolicy
from engine.stock_lines import StockLine
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
    assert (await store.claim(sale.event_id, "bob", "h2", "s00002")).seat_id == "s00002"
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
    assert (h.seat_id, h.amount) == ("CHAIN@east*2,TUBE@west*2", cart.amount - 2_500)
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
