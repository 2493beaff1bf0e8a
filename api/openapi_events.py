"""The OpenAPI operations of what buyers find: events (api/routes/events.py, ADR 0041), the
public list and the change of a draft's details; and a buyer's own orders and live hold
(api/routes/me.py, ADR 0042). Their requests and answers are declared as types
(api/contract/catalogue.py, mine.py; ADR 0054)."""

from typing import Any

from api.openapi_parts import (
    ADMIN,
    BODY,
    BUYER,
    EVENT_ID,
    ID,
    PATHED,
    STORE,
    STR,
    answer,
    json_body,
    operation,
    query,
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
    body=json_body("EventDetailsChange"),
)
