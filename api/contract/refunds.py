"""Refunds an admin asks for (api/routes/refunds.py): part of an order given back (ADR 0043)
and a person's "retry this refund", what each sends (bounded by api/validate.py LIMITS; the
handler accepts exactly the fields declared) and what it answers."""

from typing import Annotated, Any, NotRequired, TypedDict

from msgspec import Meta

from api.contract.atoms import CHARGE_ID, HOLD_ID, Count, PartySeats, StockId, limited
from api.contract.holds import HeldLine
from engine.model.states import ChargeState, HoldState


class RefundLine(TypedDict):
    """Units of one of the order's lines, from the location it was taken from."""

    sku: StockId
    location: StockId
    quantity: Annotated[int, limited("line_quantity")]


class OrderRefundRequest(TypedDict):
    """One of seat_ids (seats of the order) or lines (units of the cart's lines)."""

    seat_ids: NotRequired[PartySeats]
    lines: NotRequired[Annotated[list[RefundLine], limited("lines")]]
    reason: Annotated[str, limited("reason")]


class GoodsKept(TypedDict):
    """What the order holds now: its seats, or a cart's lines."""

    seat_ids: NotRequired[list[str]]
    lines: NotRequired[list[HeldLine]]


class OrderRefunded(TypedDict):
    hold_id: str
    charge_id: Annotated[
        str,
        Meta(
            description="the part's own charge ('<order's charge>:r<12 hex>'), or the order's "
            "charge when the whole rest was given back"
        ),
    ]
    state: ChargeState
    amount: Annotated[Count, Meta(description="minor units this refund gives back")]
    whole: Annotated[bool, Meta(description="the whole rest: the hold is REVOKED")]
    replay: Annotated[bool, Meta(description="made before with this key; nothing new")]
    hold_state: HoldState
    kept: GoodsKept


class RefundRetryRequest(TypedDict):
    charge_id: Annotated[
        str,
        Meta(
            pattern="^(orphan/)?[A-Za-z0-9_.:-]{1,64}(~[0-9a-f]{24})?$",
            description="a charge id, or an orphan's (orphan/<the provider's attempt id>)",
        ),
    ]


class RefundRetried(TypedDict):
    """The refund is due now; the refund worker makes it on its next pass, after asking the
    provider whose money it is."""

    charge_id: str
    state: ChargeState
    due_now: bool
    refund_attempts: Count
    was_parked: bool


KEPT: GoodsKept = {"seat_ids": ["B-3-6", "B-3-7", "B-3-8"]}
# Requests whose unknown fields the handler refuses (400): additionalProperties false.
CLOSED = (RefundLine, OrderRefundRequest, RefundRetryRequest)

# Each request and answer and its example (api/contract/document.py).
EXAMPLES: dict[type, Any] = {
    RefundLine: RefundLine(sku="wheel-700c", location="east", quantity=1),
    OrderRefundRequest: OrderRefundRequest(
        seat_ids=["B-3-5"], reason="seat broken; the buyer keeps the other three"
    ),
    GoodsKept: KEPT,
    OrderRefunded: OrderRefunded(
        hold_id=HOLD_ID,
        charge_id=CHARGE_ID + ":r5c0e1d2a3b4f",
        state=ChargeState.REFUNDING,
        amount=4500,
        whole=False,
        replay=False,
        hold_state=HoldState.CONFIRMED,
        kept=KEPT,
    ),
    RefundRetryRequest: RefundRetryRequest(charge_id=CHARGE_ID),
    RefundRetried: RefundRetried(
        charge_id=CHARGE_ID,
        state=ChargeState.REFUNDING,
        due_now=True,
        refund_attempts=3,
        was_parked=False,
    ),
}
