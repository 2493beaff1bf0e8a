"""The admin's and ops' answers that the API builds itself (api/routes/admin.py, listings.py,
stock.py, logins.py): an event created and opened, a hold or a login revoked, a stock
correction, the exceptions view and its parts, a sale closed or cancelled (the listings:
api/contract/listings.py)."""

from typing import Annotated, Any, Literal, NotRequired, TypedDict

from msgspec import Meta

from api.contract.atoms import CHARGE_ID, EVENT_ID, HOLD_ID, Amount, AtMs, ChargeId, EventKind, Id
from engine.model.states import ChargeState, HoldState

DECIDED = 1767261620000

Seats = Annotated[
    str,
    Meta(
        description="the hold's seats, comma-separated (a stock hold: its lines, "
        "sku@location*quantity, comma-separated)"
    ),
]
Ms = Annotated[int, Meta(ge=0, description="milliseconds")]


class EventCreated(TypedDict):
    event_id: Id
    kind: EventKind
    seats: NotRequired[Annotated[int, Meta(description="seat events: seats in the map")]]
    skus: NotRequired[Annotated[int, Meta(description="stock events: SKUs on sale")]]
    units: NotRequired[Annotated[int, Meta(description="stock events: units on hand in all")]]


class SaleOpened(TypedDict):
    event_id: Id
    opens_at_ms: Annotated[int, Meta(description="T0")]


class RevokedHold(TypedDict):
    hold_id: Id
    state: HoldState
    seat_id: Seats


class LoginRevoked(TypedDict):
    login: str
    revoked_before_ms: Annotated[int, Meta(description="tokens issued up to now")]


class StockCorrected(TypedDict):
    correction_id: Id
    on_hand: int
    available: int
    replay: Annotated[bool, Meta(description="applied before: the figures it left")]


class AdminCharge(TypedDict):
    charge_id: ChargeId
    hold_id: Id | None
    state: ChargeState
    amount: Amount
    reason: str | None
    refund_attempts: int
    attempt_id: Annotated[str | None, Meta(description="the provider's attempt")]
    captured: Annotated[int, Meta(description="minor units the provider reported captured")]
    parked: Annotated[bool, Meta(description="its refund was stopped, for a person to decide")]


class SeatWithoutMoney(TypedDict):
    hold_id: Id
    seat_id: Seats
    login: str
    reason: str
    winner: AdminCharge | None


class RevokedSeat(TypedDict):
    hold_id: Id
    seat_id: Seats
    reason: str


class Money(TypedDict):
    """The money invariant's right-hand side: what the provider should hold."""

    sold_seats_value: Amount
    to_refund: Amount
    provider_should_hold: Amount


class Alert(TypedDict):
    """A provider message the engine refused (or applied only partly)."""

    alert_id: str
    reason: str
    at_ms: AtMs
    charge_id: str | None
    hold_id: str | None
    claimed: Annotated[dict[str, Any], Meta(description="what the refused message claimed")]


class BlockedSeat(TypedDict):
    hold_id: Id
    seat_id: Seats
    state: HoldState
    until_ms: AtMs
    charge_id: str


class RefundTimes(TypedDict):
    """From the moment a charge went REFUNDING (a late or contradicting capture, a cancelled
    sale) to its refund recorded, over the charges Redis still keeps; the refunds still open
    count with the time they have waited so far. bound_ms is the largest of both."""

    refunded: Annotated[int, Meta(ge=0)]
    p50_ms: Ms | None
    p99_ms: Ms | None
    max_ms: Ms | None
    waiting: Annotated[int, Meta(ge=0)]
    oldest_waiting_ms: Ms | None
    bound_ms: Ms | None


class MoneyViews(TypedDict):
    """Money without a seat and where its refund stands (part of the exceptions view)."""

    captured_without_seat: list[AdminCharge]
    refunds_pending: list[AdminCharge]
    refunds_retrying: list[AdminCharge]
    refunds_parked: list[AdminCharge]
    disputes: list[AdminCharge]


class AfterSale(TypedDict):
    """Sold seats whose money left, and what the provider should hold (part of the view)."""

    seats_without_money: list[SeatWithoutMoney]
    revoked: list[RevokedSeat]
    money: Money


class ExceptionsReport(MoneyViews, AfterSale):
    """What the business must look at: money without a seat and its refunds, seats whose money
    left, disputes, alerts, blocked seats, old charges in flight."""

    event_id: Id
    server_time_ms: AtMs
    refund_times: RefundTimes
    alerts: list[Alert]
    blocked_seats: list[BlockedSeat]
    charging_too_long: list[AdminCharge]


class SaleStatus(TypedDict):
    event_id: Id
    status: Literal["closed", "cancelled"]


class CancelProgress(TypedDict):
    event_id: Id
    status: Literal["cancelled"]
    holds_ended: Annotated[int, Meta(description="holds this request ended")]
    remaining: Annotated[int, Meta(description="units still held, blocked or sold")]
    complete: bool


CHARGE: AdminCharge = {
    "charge_id": CHARGE_ID,
    "hold_id": HOLD_ID,
    "state": ChargeState.CAPTURED,
    "amount": 9000,
    "reason": None,
    "refund_attempts": 0,
    "attempt_id": "att_02cd63c4_1",
    "captured": 9000,
    "parked": False,
}
MONEY: Money = {"sold_seats_value": 9000, "to_refund": 0, "provider_should_hold": 9000}
NO_TIMES: RefundTimes = {
    "refunded": 0,
    "p50_ms": None,
    "p99_ms": None,
    "max_ms": None,
    "waiting": 0,
    "oldest_waiting_ms": None,
    "bound_ms": None,
}

# Each answer and its example (api/contract/document.py).
EXAMPLES: dict[type, Any] = {
    EventCreated: EventCreated(event_id=EVENT_ID, kind="seats", seats=2),
    SaleOpened: SaleOpened(event_id=EVENT_ID, opens_at_ms=1767261600000),
    RevokedHold: RevokedHold(hold_id=HOLD_ID, state=HoldState.REVOKED, seat_id="A-1,A-2"),
    LoginRevoked: LoginRevoked(login="alice", revoked_before_ms=1767261700000),
    StockCorrected: StockCorrected(
        correction_id="recount-0412", on_hand=38, available=34, replay=False
    ),
    AdminCharge: CHARGE,
    SeatWithoutMoney: SeatWithoutMoney(
        hold_id=HOLD_ID,
        seat_id="A-1",
        login="alice",
        reason="dispute_lost",
        winner={**CHARGE, "state": ChargeState.CHARGED_BACK},
    ),
    RevokedSeat: RevokedSeat(hold_id=HOLD_ID, seat_id="A-1", reason="operator_revoke"),
    Money: MONEY,
    Alert: Alert(
        alert_id="a-17",
        reason="amount_mismatch",
        at_ms=DECIDED,
        charge_id=CHARGE_ID,
        hold_id=None,
        claimed={"amount": 1},
    ),
    BlockedSeat: BlockedSeat(
        hold_id=HOLD_ID,
        seat_id="A-1",
        state=HoldState.QUARANTINED,
        until_ms=1767262800000,
        charge_id=CHARGE_ID,
    ),
    RefundTimes: RefundTimes(
        refunded=31,
        p50_ms=219,
        p99_ms=1055,
        max_ms=1093,
        waiting=1,
        oldest_waiting_ms=412,
        bound_ms=1093,
    ),
    ExceptionsReport: ExceptionsReport(
        event_id=EVENT_ID,
        server_time_ms=1767261700000,
        captured_without_seat=[],
        refunds_pending=[],
        refunds_retrying=[],
        refunds_parked=[],
        refund_times=NO_TIMES,
        disputes=[],
        seats_without_money=[],
        revoked=[],
        money=MONEY,
        alerts=[],
        blocked_seats=[],
        charging_too_long=[],
    ),
    SaleStatus: SaleStatus(event_id=EVENT_ID, status="closed"),
    CancelProgress: CancelProgress(
        event_id=EVENT_ID, status="cancelled", holds_ended=2, remaining=0, complete=True
    ),
}
