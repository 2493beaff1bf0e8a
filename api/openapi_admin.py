"""The admin listings in the OpenAPI document (api/openapi.py), as component schemas with their
examples, field for field what the engine's views build (engine/views/listings.py, through
api/routes/listings.py): the events, an event's configuration, its holds, charges and
exceptions, a page at a time (ADR 0025). The answers the API builds itself are declared as
types (api/contract/admin.py, ADR 0054). Answers may gain properties."""

from typing import Any

from api.contract.atoms import KIND_SCHEMA
from api.contract.derive import nullable
from api.openapi_parts import (
    AMOUNT,
    AT_MS,
    CURRENCY,
    CURSOR_NEXT,
    EVENT_DETAILS,
    EVENT_DETAILS_EXAMPLE,
    EVENT_ID,
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
DECIDED = 1767261620000

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
ADMIN_SCHEMAS: dict[str, dict[str, Any]] = {
    "EventKind": KIND_SCHEMA,
    "EventSummary": EVENT_SUMMARY,
    "EventPage": EVENT_PAGE,
    "EventConfig": EVENT_CONFIG,
    "SkuPrice": SKU_PRICE,
}
