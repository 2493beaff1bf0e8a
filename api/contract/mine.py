"""A buyer's own (api/routes/me.py, ADR 0042): the login's orders from the ledger, newest
first, and its live hold in an event, found without its id."""

from typing import Annotated, Any, Literal, NotRequired, TypedDict

from msgspec import Meta

from api.contract.atoms import EVENT_ID, Amount, AtMs, Currency, Id, Refunded
from api.contract.holds import HeldLine


class ItemGoods(TypedDict, total=False):
    """What an order of the list owns: its seats, or a cart's lines."""

    seat_ids: list[Id]
    lines: list[HeldLine]


class MyOrder(TypedDict):
    event_id: Id
    event_name: str | None
    hold_id: Id
    order_number: Annotated[str, Meta(description="the order's number (ADR 0042)")]
    seat_ids: NotRequired[list[Id]]
    lines: NotRequired[list[HeldLine]]
    amount: Amount | None
    refunded: Refunded
    currency: Currency
    decided_ms: AtMs


class MyOrderPage(TypedDict):
    orders: list[MyOrder]
    next_cursor: Annotated[str | None, Meta(description="the next page's cursor (null: done)")]
    kept: Annotated[bool, Meta(description="false: this deployment keeps no ledger, so no orders")]


class MyHold(TypedDict):
    hold_id: Id
    state: Literal["RESERVED", "QUARANTINED"]
    expires_ms: AtMs
    seat_id: Id | None
    seat_ids: list[Id]
    lines: NotRequired[list[HeldLine]]
    amount: NotRequired[Amount]


class MyHolds(TypedDict):
    event_id: Id
    holds: Annotated[
        list[MyHold],
        Meta(max_length=1, description="the login's live hold (RESERVED or QUARANTINED), or none"),
    ]


ORDER: MyOrder = {
    "event_id": EVENT_ID,
    "event_name": "Spring Gala",
    "hold_id": "h-7f3a:1748",
    "order_number": "7K2F-9QX3-MT",
    "seat_ids": ["A-1", "A-2"],
    "amount": 9000,
    "refunded": 0,
    "currency": "EUR",
    "decided_ms": 1767261620000,
}

# Each answer and its example (api/contract/document.py).
EXAMPLES: dict[type, Any] = {
    MyOrder: ORDER,
    MyOrderPage: MyOrderPage(orders=[ORDER], next_cursor=None, kept=True),
    MyHold: MyHold(
        hold_id="h-7f3a:1748",
        state="RESERVED",
        expires_ms=1767262080000,
        seat_id="A-1",
        seat_ids=["A-1", "A-2"],
    ),
    MyHolds: MyHolds(event_id=EVENT_ID, holds=[]),
}
