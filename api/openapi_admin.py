"""The answers of the admin operations in the OpenAPI document (api/openapi.py), as component
schemas with their examples, field for field what api/routes/admin.py, listings.py and stock.py
send: creating and opening an event, revocations, corrections, the exceptions view, and the
listings (ADR 0025). Answers may gain properties."""

from typing import Any

from api.contract.derive import nullable
from api.openapi_parts import (
    AMOUNT,
    AT_MS,
    BOOL,
    CHARGE_ID,
    CHARGE_ID_EXAMPLE,
    CHARGE_STATE,
    CURRENCY,
    CURSOR_NEXT,
    EVENT_DETAILS,
    EVENT_DETAILS_EXAMPLE,
    EVENT_ID,
    HOLD_ID,
    HOLD_STATE,
    ID,
    INT,
    STOCK_ID,
    STR,
    array,
    record,
    ref,
)
from engine.model.states import LatePolicy, ReversalPolicy

KIND = ref("EventKind")
SEATS_TEXT = {
    **STR,
    "description": "the hold's seats, comma-separated (a stock hold: its lines, "
    "sku@location*quantity, comma-separated)",
}
DECIDED = 1767261620000

EVENT_CREATED = record(
    {
        "event_id": ID,
        "kind": KIND,
        "seats": {**INT, "description": "seat events: seats in the map"},
        "skus": {**INT, "description": "stock events: SKUs on sale"},
        "units": {**INT, "description": "stock events: units on hand in all"},
    },
    {"event_id": EVENT_ID, "kind": "seats", "seats": 2},
    optional=("seats", "skus", "units"),
)
SALE_OPENED = record(
    {"event_id": ID, "opens_at_ms": {**AT_MS, "description": "T0"}},
    {"event_id": EVENT_ID, "opens_at_ms": 1767261600000},
)
REVOKED_HOLD = record(
    {"hold_id": ID, "state": HOLD_STATE, "seat_id": SEATS_TEXT},
    {"hold_id": HOLD_ID, "state": "REVOKED", "seat_id": "A-1,A-2"},
)
LOGIN_REVOKED = record(
    {"login": STR, "revoked_before_ms": {**AT_MS, "description": "tokens issued up to now"}},
    {"login": "alice", "revoked_before_ms": 1767261700000},
)
STOCK_CORRECTED = record(
    {
        "correction_id": ID,
        "on_hand": INT,
        "available": INT,
        "replay": {**BOOL, "description": "applied before: the figures it left"},
    },
    {"correction_id": "recount-0412", "on_hand": 38, "available": 34, "replay": False},
)
ADMIN_CHARGE_PROPERTIES: dict[str, Any] = {
    "charge_id": CHARGE_ID,
    "hold_id": nullable(ID),
    "state": CHARGE_STATE,
    "amount": AMOUNT,
    "reason": nullable(STR),
    "refund_attempts": INT,
    "attempt_id": nullable({**STR, "description": "the provider's attempt"}),
    "captured": {**AMOUNT, "description": "minor units the provider reported captured"},
    "parked": {**BOOL, "description": "its refund was stopped, for a person to decide"},
}
ADMIN_CHARGE_EXAMPLE = {
    "charge_id": CHARGE_ID_EXAMPLE,
    "hold_id": HOLD_ID,
    "state": "CAPTURED",
    "amount": 9000,
    "reason": None,
    "refund_attempts": 0,
    "attempt_id": "att_02cd63c4_1",
    "captured": 9000,
    "parked": False,
}
ADMIN_CHARGE = record(ADMIN_CHARGE_PROPERTIES, ADMIN_CHARGE_EXAMPLE)
SEAT_WITHOUT_MONEY = record(
    {
        "hold_id": ID,
        "seat_id": SEATS_TEXT,
        "login": STR,
        "reason": STR,
        "winner": nullable(ref("AdminCharge")),
    },
    {
        "hold_id": HOLD_ID,
        "seat_id": "A-1",
        "login": "alice",
        "reason": "dispute_lost",
        "winner": {**ADMIN_CHARGE_EXAMPLE, "state": "CHARGED_BACK"},
    },
)
REVOKED_SEAT = record(
    {"hold_id": ID, "seat_id": SEATS_TEXT, "reason": STR},
    {"hold_id": HOLD_ID, "seat_id": "A-1", "reason": "operator_revoke"},
)
MONEY = record(
    {"sold_seats_value": AMOUNT, "to_refund": AMOUNT, "provider_should_hold": AMOUNT},
    {"sold_seats_value": 9000, "to_refund": 0, "provider_should_hold": 9000},
    description="The money invariant's right-hand side: what the provider should hold.",
)
ALERT = record(
    {
        "alert_id": STR,
        "reason": STR,
        "at_ms": AT_MS,
        "charge_id": nullable(STR),
        "hold_id": nullable(STR),
        "claimed": {"type": "object", "description": "what the refused message claimed"},
    },
    {
        "alert_id": "a-17",
        "reason": "amount_mismatch",
        "at_ms": DECIDED,
        "charge_id": CHARGE_ID_EXAMPLE,
        "hold_id": None,
        "claimed": {"amount": 1},
    },
    description="A provider message the engine refused (or applied only partly).",
)
BLOCKED_SEAT = record(
    {
        "hold_id": ID,
        "seat_id": SEATS_TEXT,
        "state": HOLD_STATE,
        "until_ms": AT_MS,
        "charge_id": STR,
    },
    {
        "hold_id": HOLD_ID,
        "seat_id": "A-1",
        "state": "QUARANTINED",
        "until_ms": 1767262800000,
        "charge_id": CHARGE_ID_EXAMPLE,
    },
)
CHARGES = array(ref("AdminCharge"))
EXCEPTIONS_REPORT = record(
    {
        "event_id": ID,
        "server_time_ms": AT_MS,
        "captured_without_seat": CHARGES,
        "refunds_pending": CHARGES,
        "refunds_retrying": CHARGES,
        "refunds_parked": CHARGES,
        "refund_times": ref("RefundTimes"),
        "disputes": CHARGES,
        "seats_without_money": array(ref("SeatWithoutMoney")),
        "revoked": array(ref("RevokedSeat")),
        "money": ref("Money"),
        "alerts": array(ref("Alert")),
        "blocked_seats": array(ref("BlockedSeat")),
        "charging_too_long": CHARGES,
    },
    {
        "event_id": EVENT_ID,
        "server_time_ms": 1767261700000,
        "captured_without_seat": [],
        "refunds_pending": [],
        "refunds_retrying": [],
        "refunds_parked": [],
        "refund_times": {
            "refunded": 0,
            "p50_ms": None,
            "p99_ms": None,
            "max_ms": None,
            "waiting": 0,
            "oldest_waiting_ms": None,
            "bound_ms": None,
        },
        "disputes": [],
        "seats_without_money": [],
        "revoked": [],
        "money": MONEY["example"],
        "alerts": [],
        "blocked_seats": [],
        "charging_too_long": [],
    },
    description="What the business must look at: money without a seat and its refunds, "
    "seats whose money left, disputes, alerts, blocked seats, old charges in flight.",
)

EVENT_SUMMARY = record(
    {
        "event_id": ID,
        "status": STR,
        "kind": KIND,
        "opens_at_ms": AT_MS,
        "seats_total": INT,
        "free": INT,
        "held": INT,
        "blocked": INT,
        "sold": INT,
        "currency": CURRENCY,
    },
    {"event_id": EVENT_ID, "status": "open", "kind": "seats", "opens_at_ms": 1767261600000,
     "seats_total": 6, "free": 2, "held": 2, "blocked": 0, "sold": 2, "currency": "EUR"},
)  # fmt: skip
EVENT_PAGE = record(
    {"events": array(ref("EventSummary")), "next_cursor": CURSOR_NEXT},
    {"events": [EVENT_SUMMARY["example"]], "next_cursor": None},
)
EVENT_CONFIG = record(
    {
        "event_id": ID,
        "kind": KIND,
        "status": STR,
        "policy": {**STR, "description": f"{', '.join(LatePolicy)}, or a shadow rollout's"},
        "hold_ttl_ms": INT,
        "quarantine_ms": INT,
        "currency": CURRENCY,
        "reversal_policy": {"type": "string", "enum": [*ReversalPolicy]},
        "price_minor": nullable({**AMOUNT, "description": "seat events"}),
        "opens_at_ms": AT_MS,
        "login_cap": nullable(INT),
        "max_party": {**INT, "description": "0: the API's limit"},
        "locations": array(STOCK_ID),
        "seats_total": INT,
        "policy_grace_ms": nullable(INT),
        "shadow_policy": nullable(STR),
        "closed_at_ms": nullable(AT_MS),
        "cancelled_at_ms": nullable(AT_MS),
        "skus": array(ref("SkuPrice"), description="stock events: the SKUs and their prices"),
        **EVENT_DETAILS,
    },
    {
        **EVENT_DETAILS_EXAMPLE,
        "event_id": EVENT_ID,
        "kind": "seats",
        "status": "open",
        "policy": "quarantine",
        "hold_ttl_ms": 480000,
        "quarantine_ms": 900000,
        "currency": "EUR",
        "reversal_policy": "manual",
        "price_minor": 4500,
        "opens_at_ms": 1767261600000,
        "login_cap": None,
        "max_party": 0,
        "locations": [],
        "seats_total": 6,
        "policy_grace_ms": None,
        "shadow_policy": None,
        "closed_at_ms": None,
        "cancelled_at_ms": None,
    },
    optional=("skus",),
)
SKU_PRICE = record(
    {"sku": STOCK_ID, "price_minor": AMOUNT}, {"sku": "wheel-700c", "price_minor": 8900}
)
ADMIN_HOLD = record(
    {
        "hold_id": ID,
        "login": STR,
        "state": HOLD_STATE,
        "seat_ids": array(ID),
        "lines": nullable(array(ref("HeldLine"), description="a stock hold's; null: seats")),
        "created_ms": AT_MS,
        "expires_ms": AT_MS,
        "decided_ms": nullable(AT_MS),
        "reason": nullable(STR),
        "charge_ids": array(CHARGE_ID),
        "winner": nullable(CHARGE_ID),
    },
    {
        "hold_id": HOLD_ID,
        "login": "alice",
        "state": "CONFIRMED",
        "seat_ids": ["A-1", "A-2"],
        "lines": None,
        "created_ms": 1767261601000,
        "expires_ms": 1767262081000,
        "decided_ms": DECIDED,
        "reason": "captured",
        "charge_ids": [CHARGE_ID_EXAMPLE],
        "winner": CHARGE_ID_EXAMPLE,
    },
)
HOLD_PAGE = record(
    {"event_id": ID, "holds": array(ref("AdminHold")), "next_cursor": CURSOR_NEXT},
    {"event_id": EVENT_ID, "holds": [ADMIN_HOLD["example"]], "next_cursor": None},
)
CHARGE_PAGE = record(
    {"event_id": ID, "charges": CHARGES, "next_cursor": CURSOR_NEXT},
    {"event_id": EVENT_ID, "charges": [ADMIN_CHARGE_EXAMPLE], "next_cursor": None},
)
EXCEPTION_CHARGE = record(
    {**ADMIN_CHARGE_PROPERTIES, "hold": nullable(ref("AdminHold"))},
    {**ADMIN_CHARGE_EXAMPLE, "state": "DISPUTED", "hold": ADMIN_HOLD["example"]},
    description="A charge whose money needs an operator's eye, with its hold.",
)
EXCEPTION_PAGE = record(
    {"event_id": ID, "exceptions": array(ref("ExceptionCharge")), "next_cursor": CURSOR_NEXT},
    {"event_id": EVENT_ID, "exceptions": [EXCEPTION_CHARGE["example"]], "next_cursor": None},
)
SALE_STATUS = record(
    {"event_id": ID, "status": {"type": "string", "enum": ["closed", "cancelled"]}},
    {"event_id": EVENT_ID, "status": "closed"},
)
CANCEL_PROGRESS = record(
    {
        "event_id": ID,
        "status": {"type": "string", "enum": ["cancelled"]},
        "holds_ended": {**INT, "description": "holds this request ended"},
        "remaining": {**INT, "description": "units still held, blocked or sold"},
        "complete": BOOL,
    },
    {
        "event_id": EVENT_ID,
        "status": "cancelled",
        "holds_ended": 2,
        "remaining": 0,
        "complete": True,
    },
)

ADMIN_SCHEMAS: dict[str, dict[str, Any]] = {
    "EventKind": {"type": "string", "enum": ["seats", "stock"], "example": "seats"},
    "EventCreated": EVENT_CREATED,
    "SaleOpened": SALE_OPENED,
    "RevokedHold": REVOKED_HOLD,
    "LoginRevoked": LOGIN_REVOKED,
    "StockCorrected": STOCK_CORRECTED,
    "AdminCharge": ADMIN_CHARGE,
    "SeatWithoutMoney": SEAT_WITHOUT_MONEY,
    "RevokedSeat": REVOKED_SEAT,
    "Money": MONEY,
    "Alert": ALERT,
    "BlockedSeat": BLOCKED_SEAT,
    "ExceptionsReport": EXCEPTIONS_REPORT,
    "EventSummary": EVENT_SUMMARY,
    "EventPage": EVENT_PAGE,
    "EventConfig": EVENT_CONFIG,
    "SkuPrice": SKU_PRICE,
    "AdminHold": ADMIN_HOLD,
    "HoldPage": HOLD_PAGE,
    "ChargePage": CHARGE_PAGE,
    "ExceptionCharge": EXCEPTION_CHARGE,
    "ExceptionPage": EXCEPTION_PAGE,
    "SaleStatus": SALE_STATUS,
    "CancelProgress": CANCEL_PROGRESS,
}
