"""What a hold and an order look like to a client: a hold's goods (seats and their prices, or a
cart's lines), the hold view with its charges, and an order (its number, ADR 0042, and for its
buyer the QR code of that number). Shared by the buyer's routes (api/routes/checkout.py) and
the admin listings (api/routes/listings.py)."""

from collections.abc import Sequence

from api.contract import holds as answers
from api.durable import CONFIRMING
from api.qr import qr_data_url
from api.routes.stock import lines_view
from engine.model.holds import Charge, Claimed, Hold
from engine.model.orders import order_number
from engine.model.states import HoldState


def goods_view(h: Hold | Claimed, prices: Sequence[int] = ()) -> answers.Goods:
    """What the hold owns: its seats (with `prices`, each seat's and their sum), or a stock
    hold's lines and their amount."""
    if h.is_stock:
        return {"seat_id": None, "seat_ids": [], "lines": lines_view(h.listing), "amount": h.amount}
    first = h.seat_ids[0] if h.seat_ids else h.listing
    goods: answers.Goods = {"seat_id": first, "seat_ids": list(h.seat_ids)}
    if prices:
        goods["seat_prices"] = dict(zip(h.seat_ids, prices, strict=True))
        goods["amount"] = sum(prices)
    return goods


def order_view(
    event_id: str, h: Hold, charges: list[Charge], currency: str, prices: Sequence[int] = ()
) -> answers.OrderFields:
    """What a confirmed hold bought, its number (ADR 0042), and the one charge that paid."""
    winner = next((ch for ch in charges if ch.charge_id == h.winner), None)
    if h.is_stock:
        goods: answers.OrderGoods = {"lines": lines_view(h.listing)}
        amount: int | None = h.amount
    else:
        goods = {"seat_ids": list(h.seat_ids)}
        if prices:
            goods["seat_prices"] = dict(zip(h.seat_ids, prices, strict=True))
        amount = winner.amount - winner.parted if winner is not None else None
    # Parts given back (ADR 0043): the order's amount is what it still paid for.
    refunded = winner.parted if winner is not None else 0
    return {"order_number": order_number(event_id, h.hold_id), **goods, "amount": amount,
            "refunded": refunded, "currency": currency, "charge_id": h.winner}  # fmt: skip


def hold_view(
    event_id: str,
    h: Hold,
    charges: list[Charge],
    *,
    durable: bool,
    currency: str,
    prices: Sequence[int],
    now_ms: int,
) -> answers.Hold:
    """`durable`: False while the hold's sale is decided but not yet in the ledger; the buyer
    then reads CONFIRMING (ADR 0016), and sees its `order` only once it is told. `currency`:
    the event's, for the order of a CONFIRMED hold; `prices`: each seat's; `now_ms`: the
    server's clock, which the hold's deadline counts down by."""
    told = durable and h.state == HoldState.CONFIRMED
    return {
        "hold_id": h.hold_id,
        **goods_view(h, prices),
        "state": h.state if durable else CONFIRMING,
        "expires_ms": h.expires_ms,
        "winner": h.winner or None,
        "charge_in_flight": h.charge_in_flight or None,
        "quarantine_until_ms": h.until_ms or None,
        "decided_ms": h.decided_ms or None,
        "reason": h.reason or None,
        "given_up": h.given_up,
        "charges": [charge_view(ch) for ch in charges],
        "order": buyer_order(event_id, h, charges, currency, prices) if told else None,
        "server_time_ms": now_ms,
    }


def charge_view(ch: Charge) -> answers.HoldCharge:
    return {
        "charge_id": ch.charge_id,
        "state": ch.state,
        "amount": ch.amount,
        "refund_only": ch.refund_only,
        "reason": ch.reason or None,
    }


def buyer_order(
    event_id: str, h: Hold, charges: list[Charge], currency: str, prices: Sequence[int]
) -> answers.Order:
    """The order as its buyer reads it: with a QR code of its number, for the door."""
    order = order_view(event_id, h, charges, currency, prices)
    return {**order, "qr": qr_data_url(order["order_number"])}
