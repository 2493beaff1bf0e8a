"""An admin's listings, a page at a time (api/routes/listings.py, ADR 0025): the events with
their counters, an event's configuration, and one event's holds, its charges, the charges whose
money needs an operator's eye, and its orders."""

from typing import Annotated, Any, NotRequired, TypedDict

from msgspec import Meta

from api.contract import admin, holds
from api.contract.atoms import (
    CHARGE_ID,
    EVENT_DETAILS_EXAMPLE,
    EVENT_ID,
    HOLD_ID,
    Amount,
    AtMs,
    ChargeId,
    Currency,
    DetailFields,
    EventKind,
    Id,
    NextCursor,
    StockId,
)
from api.contract.holds import HeldLine, OrderFields
from engine.model.states import ChargeState, HoldState, LatePolicy, ReversalPolicy


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


class SeatsNamed(TypedDict, total=False):
    """A seat order's seats as printed at the venue (a cart has none)."""

    seats_named: Annotated[
        str,
        Meta(
            description="the seats as printed at the venue, grouped by section and row "
            "(a seat the map does not place: its id)"
        ),
    ]


class OrderRow(OrderFields, SeatsNamed):
    """A CONFIRMED hold: seat_ids and seat_prices (or a cart's lines), amount, currency, and the
    charge that paid: the buyer's order without its QR code (the buyer's alone, ADR 0042), who
    bought it and when, and the seats as printed at the venue."""

    hold_id: Id
    login: str
    decided_ms: AtMs


class OrderPage(TypedDict):
    event_id: Id
    orders: list[OrderRow]
    next_cursor: NextCursor


class EventSummary(TypedDict):
    event_id: Id
    status: str
    kind: EventKind
    opens_at_ms: AtMs
    seats_total: int
    free: int
    held: int
    blocked: int
    sold: int
    currency: Currency


class EventPage(TypedDict):
    events: list[EventSummary]
    next_cursor: NextCursor


class SkuPrice(TypedDict):
    sku: StockId
    price_minor: Amount


class EventConfig(DetailFields):
    event_id: Id
    kind: EventKind
    status: str
    policy: Annotated[str, Meta(description=f"{', '.join(LatePolicy)}, or a shadow rollout's")]
    hold_ttl_ms: int
    quarantine_ms: int
    currency: Currency
    reversal_policy: Annotated[str, Meta(extra_json_schema={"enum": [*ReversalPolicy]})]
    price_minor: Annotated[Amount | None, Meta(description="seat events")]
    opens_at_ms: AtMs
    login_cap: int | None
    max_party: Annotated[int, Meta(description="0: the API's limit")]
    locations: list[StockId]
    seats_total: int
    policy_grace_ms: int | None
    shadow_policy: str | None
    closed_at_ms: AtMs | None
    cancelled_at_ms: AtMs | None
    skus: NotRequired[
        Annotated[list[SkuPrice], Meta(description="stock events: the SKUs and their prices")]
    ]


SUMMARY: EventSummary = {
    "event_id": EVENT_ID, "status": "open", "kind": "seats", "opens_at_ms": 1767261600000,
    "seats_total": 6, "free": 2, "held": 2, "blocked": 0, "sold": 2, "currency": "EUR",
}  # fmt: skip
CONFIG = EventConfig(
    **EVENT_DETAILS_EXAMPLE,
    event_id=EVENT_ID,
    kind="seats",
    status="open",
    policy="quarantine",
    hold_ttl_ms=480000,
    quarantine_ms=900000,
    currency="EUR",
    reversal_policy="manual",
    price_minor=4500,
    opens_at_ms=1767261600000,
    login_cap=None,
    max_party=0,
    locations=[],
    seats_total=6,
    policy_grace_ms=None,
    shadow_policy=None,
    closed_at_ms=None,
    cancelled_at_ms=None,
    skus=[],
)
del CONFIG["skus"]  # a seat event's: no SKUs (named above only for the type check's sake)
HOLD: AdminHold = {
    "hold_id": HOLD_ID,
    "login": "alice",
    "state": HoldState.CONFIRMED,
    "seat_ids": ["A-1", "A-2"],
    "lines": None,
    "created_ms": 1767261601000,
    "expires_ms": 1767262081000,
    "decided_ms": admin.DECIDED,
    "reason": "captured",
    "charge_ids": [CHARGE_ID],
    "winner": CHARGE_ID,
}
EXCEPTION: ExceptionCharge = {**admin.CHARGE, "state": ChargeState.DISPUTED, "hold": HOLD}
ORDER = holds.ORDER
ROW: OrderRow = {
    "hold_id": HOLD_ID,
    "login": "alice",
    "decided_ms": admin.DECIDED,
    "order_number": ORDER["order_number"],
    "seat_ids": ["A-1", "A-2"],
    "seat_prices": holds.PRICES,
    "amount": 9000,
    "refunded": 0,
    "currency": "EUR",
    "charge_id": CHARGE_ID,
    "seats_named": "Section A, row 1, seats 1, 2",
}

# Each answer and its example (api/contract/document.py).
EXAMPLES: dict[type, Any] = {
    AdminHold: HOLD,
    HoldPage: HoldPage(event_id=EVENT_ID, holds=[HOLD], next_cursor=None),
    ChargePage: ChargePage(event_id=EVENT_ID, charges=[admin.CHARGE], next_cursor=None),
    ExceptionCharge: EXCEPTION,
    ExceptionPage: ExceptionPage(event_id=EVENT_ID, exceptions=[EXCEPTION], next_cursor=None),
    OrderRow: ROW,
    OrderPage: OrderPage(event_id=EVENT_ID, orders=[ROW], next_cursor=None),
    EventSummary: SUMMARY,
    EventPage: EventPage(events=[SUMMARY], next_cursor=None),
    EventConfig: CONFIG,
    SkuPrice: SkuPrice(sku="wheel-700c", price_minor=8900),
}
