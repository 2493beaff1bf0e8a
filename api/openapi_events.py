"""The OpenAPI parts of what buyers find: events (api/routes/events.py, ADR 0041), the public
list and the change of a draft's details; and a buyer's own orders (api/routes/me.py, ADR
0042)."""

from typing import Any

from api.contract.derive import nullable
from api.openapi_parts import (
    ADMIN,
    AMOUNT,
    AT_MS,
    BODY,
    BOOL,
    BUYER,
    CURRENCY,
    EVENT_DETAILS,
    EVENT_DETAILS_EXAMPLE,
    EVENT_DETAILS_REQUEST,
    EVENT_ID,
    ID,
    INT,
    PATHED,
    REFUNDED,
    STORE,
    STR,
    answer,
    json_body,
    operation,
    path,
    query,
    record,
)

LISTED = record(
    {
        "event_id": ID,
        "status": {**STR, "description": "open: on sale, or to come (see opens_at_ms)"},
        "opens_at_ms": {**AT_MS, "description": "T0: when claims open"},
        "kind": {"type": "string", "enum": ["seats", "stock"]},
        "currency": CURRENCY,
        "price_minor": {**AMOUNT, "description": "a seat's price (seat events without levels)"},
        **EVENT_DETAILS,
    },
    {
        "event_id": EVENT_ID,
        "status": "open",
        "opens_at_ms": 1767261600000,
        "kind": "seats",
        "currency": "EUR",
        "price_minor": 4500,
        **EVENT_DETAILS_EXAMPLE,
    },
)
EVENT_SCHEMAS: dict[str, dict[str, Any]] = {
    "EventListed": LISTED,
    "EventList": record(
        {
            "events": {"type": "array", "items": {"$ref": "#/components/schemas/EventListed"}},
            "next_offset": nullable({**INT, "description": "the next page's offset (null: done)"}),
        },
        {"events": [LISTED["example"]], "next_offset": None},
    ),
    "EventDetailsChange": record(
        EVENT_DETAILS_REQUEST,
        {"name": "Spring Gala (second night)", "description": None},
        optional=tuple(EVENT_DETAILS_REQUEST),
        description="Any of a draft event's details; null clears one. Another field of the "
        "create is 409 not_changeable, an unknown one 400.",
    ),
    "EventDetails": record(
        {"event_id": ID, **EVENT_DETAILS}, {"event_id": EVENT_ID, **EVENT_DETAILS_EXAMPLE}
    ),
}
MY_ORDER = record(
    {
        "event_id": ID,
        "event_name": nullable(STR),
        "hold_id": ID,
        "order_number": {**STR, "description": "the order's number (ADR 0042)"},
        "seat_ids": {"type": "array", "items": ID},
        "lines": {"type": "array", "items": {"$ref": "#/components/schemas/HeldLine"}},
        "amount": nullable(AMOUNT),
        "refunded": REFUNDED,
        "currency": CURRENCY,
        "decided_ms": AT_MS,
    },
    {
        "event_id": EVENT_ID,
        "event_name": "Spring Gala",
        "hold_id": "h-7f3a:1748",
        "order_number": "7K2F-9QX3-MT",
        "seat_ids": ["A-1", "A-2"],
        "amount": 9000,
        "refunded": 0,
        "currency": "EUR",
        "decided_ms": 1767261620000,
    },
    optional=("seat_ids", "lines"),
)
EVENT_SCHEMAS["MyOrder"] = MY_ORDER
EVENT_SCHEMAS["MyOrderPage"] = record(
    {
        "orders": {"type": "array", "items": {"$ref": "#/components/schemas/MyOrder"}},
        "next_cursor": nullable({**STR, "description": "the next page's cursor (null: done)"}),
        "kept": {**BOOL, "description": "false: this deployment keeps no ledger, so no orders"},
    },
    {"orders": [MY_ORDER["example"]], "next_cursor": None, "kept": True},
)
EVENT_SCHEMAS["MyHolds"] = record(
    {
        "event_id": ID,
        "holds": {
            "type": "array",
            "maxItems": 1,
            "description": "the login's live hold (RESERVED or QUARANTINED), or none",
            "items": record(
                {
                    "hold_id": ID,
                    "state": {"type": "string", "enum": ["RESERVED", "QUARANTINED"]},
                    "expires_ms": AT_MS,
                    "seat_id": nullable(ID),
                    "seat_ids": {"type": "array", "items": ID},
                    "lines": {"type": "array", "items": {"$ref": "#/components/schemas/HeldLine"}},
                    "amount": AMOUNT,
                },
                {
                    "hold_id": "h-7f3a:1748",
                    "state": "RESERVED",
                    "expires_ms": 1767262080000,
                    "seat_id": "A-1",
                    "seat_ids": ["A-1", "A-2"],
                },
                optional=("lines", "amount"),
            ),
        },
    },
    {"event_id": EVENT_ID, "holds": []},
)
EVENT_PATHS: dict[str, Any] = {
    "/v1/me/holds": {
        "get": operation(
            "listMyHolds",
            "Find the buyer's live hold in an event",
            answer(200, "MyHolds", "the login's live hold, or none"),
            (*BUYER, *STORE, "invalid_request", "event_not_found"),
            description="The one checkout a login has at a time in an event, found without its "
            "id (a closed tab, another device); read its details at its own path.",
            parameters=[
                {
                    "name": "event_id",
                    "in": "query",
                    "required": True,
                    "schema": ID,
                    "example": EVENT_ID,
                }
            ],
        )
    },
    "/v1/me/orders": {
        "get": operation(
            "listMyOrders",
            "List the buyer's own orders",
            answer(200, "MyOrderPage", "a page of them, newest first"),
            (*BUYER, "invalid_request", "orders_unavailable"),
            description="The token's login's confirmed orders, newest first, from the ledger "
            "(every order the buyer was told of is there). A token for one event sees that "
            "event's. Without a ledger database: none, kept false; an unreachable one: 503 "
            "orders_unavailable.",
            parameters=[
                {
                    "name": "event_id",
                    "in": "query",
                    "required": False,
                    "schema": ID,
                    "example": EVENT_ID,
                },
                query("limit", 50),
                {
                    "name": "cursor",
                    "in": "query",
                    "required": False,
                    "schema": STR,
                    "example": "1767261620000.h-7f3a:1748",
                },
            ],
        )
    },
    "/v1/events": {
        "get": operation(
            "listPublicEvents",
            "List the events on sale or to come",
            answer(200, "EventList", "a page of them, soonest show first"),
            (*STORE, "invalid_request"),
            description="Open events (claims open at opens_at_ms), soonest show first (its "
            "starts_at_ms, else its T0), with what people recognise them by. No login.",
            parameters=[query("offset", 0), query("limit", 50)],
            bearer=False,
        )
    },
}
DESCRIBE = operation(
    "describeEvent",
    "Change a draft event's details",
    answer(200, "EventDetails", "its details now"),
    (*ADMIN, *STORE, *PATHED, *BODY, "event_not_found", "details_fixed", "not_changeable"),
    description="Name, venue, description, image_url, starts_at_ms and time_zone, while the "
    "event is a draft (409 details_fixed after: the ledger holds them from the open on).",
    parameters=[path("event_id")],
    body=json_body("EventDetailsChange"),
)
