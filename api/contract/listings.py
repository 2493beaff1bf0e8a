"""An admin's listings of one event, a page at a time (api/routes/listings.py, ADR 0025): its
holds, its charges, the charges whose money needs an operator's eye, and its orders. The events
and an event's configuration, which the engine's views build, are still described in
api/openapi_admin.py."""

from typing import Annotated, Any, NotRequired, TypedDict

from msgspec import Meta

from api.contract import admin, holds
from api.contract.atoms import AtMs, ChargeId, Id, NextCursor
from api.contract.holds import HeldLine, OrderFields
from engine.model.states import ChargeState, HoldState


class AdminHold(TypedDict):
    hold_id: Id
    login: str
    state: HoldState
    seat_ids: list[Id]
    lines: Annotated[list[HeldLine] | None, Meta(description="a stock hold's; null: seats")]
    created_ms: AtMs
    expires_ms: AtMs
    decided_ms: AtMs | None
    reason: str | None
    charge_ids: list[ChargeId]
    winner: ChargeId | None


class HoldPage(TypedDict):
    event_id: Id
    holds: list[AdminHold]
    next_cursor: NextCursor


class ChargePage(TypedDict):
    event_id: Id
    charges: list[admin.AdminCharge]
    next_cursor: NextCursor


class ExceptionCharge(admin.AdminCharge):
    """A charge whose money needs an operator's eye, with its hold."""

    hold: AdminHold | None


class ExceptionPage(TypedDict):
    event_id: Id
    exceptions: list[ExceptionCharge]
    next_cursor: NextCursor


class OrderRow(OrderFields):
    """A CONFIRMED hold: seat_ids and seat_prices (or a cart's lines), amount, currency, and the
    charge that paid: the buyer's order without its QR code (the buyer's alone, ADR 0042), who
    bought it and when, and the seats as printed at the venue."""

    hold_id: Id
    login: str
    decided_ms: AtMs
    seats_named: NotRequired[
        Annotated[
            str,
            Meta(
                description="the seats as printed at the venue, grouped by section and row "
                "(a seat the map does not place: its id)"
            ),
        ]
    ]


class OrderPage(TypedDict):
    event_id: Id
    orders: list[OrderRow]
    next_cursor: NextCursor


HOLD: AdminHold = {
    "hold_id": admin.HOLD_ID,
    "login": "alice",
    "state": HoldState.CONFIRMED,
    "seat_ids": ["A-1", "A-2"],
    "lines": None,
    "created_ms": 1767261601000,
    "expires_ms": 1767262081000,
    "decided_ms": admin.DECIDED,
    "reason": "captured",
    "charge_ids": [admin.CHARGE_ID],
    "winner": admin.CHARGE_ID,
}
EXCEPTION: ExceptionCharge = {**admin.CHARGE, "state": ChargeState.DISPUTED, "hold": HOLD}
ORDER = holds.ORDER
ROW: OrderRow = {
    "hold_id": admin.HOLD_ID,
    "login": "alice",
    "decided_ms": admin.DECIDED,
    "order_number": ORDER["order_number"],
    "seat_ids": ["A-1", "A-2"],
    "seat_prices": holds.PRICES,
    "amount": 9000,
    "refunded": 0,
    "currency": "EUR",
    "charge_id": admin.CHARGE_ID,
    "seats_named": "Section A, row 1, seats 1, 2",
}
EVENT_ID = admin.EVENT_ID

# Each answer and its example (api/contract/document.py).
EXAMPLES: dict[type, Any] = {
    AdminHold: HOLD,
    HoldPage: HoldPage(event_id=EVENT_ID, holds=[HOLD], next_cursor=None),
    ChargePage: ChargePage(event_id=EVENT_ID, charges=[admin.CHARGE], next_cursor=None),
    ExceptionCharge: EXCEPTION,
    ExceptionPage: ExceptionPage(event_id=EVENT_ID, exceptions=[EXCEPTION], next_cursor=None),
    OrderRow: ROW,
    OrderPage: OrderPage(event_id=EVENT_ID, orders=[ROW], next_cursor=None),
}
