"""The OpenAPI parts of events as buyers find them (api/routes/events.py, ADR 0041): the public
list, and the change of a draft's details."""

from typing import Any

from api.openapi_parts import (
    ADMIN,
    AMOUNT,
    AT_MS,
    BODY,
    CURRENCY,
    EVENT_DETAILS,
    EVENT_DETAILS_EXAMPLE,
    EVENT_DETAILS_REQUEST,
    EVENT_ID,
    ID,
    INT,
    PATHED,
    STORE,
    STR,
    answer,
    json_body,
    nullable,
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
EVENT_PATHS: dict[str, Any] = {
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
