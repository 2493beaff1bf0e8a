"""The admin operations in the OpenAPI document: creating and opening an event, corrections,
revocations, the exceptions view (api/routes/admin.py, stock.py, logins.py), and the listings,
the orders export and the end of a sale (api/routes/listings.py, ADR 0025); api/openapi.py adds
them to its paths. Their answers are declared as types (api/contract/admin.py, listings.py, ADR
0054)."""

from typing import Any

from api.openapi_parts import (
    ADMIN,
    BODY,
    PATHED,
    STORE,
    answer,
    json_body,
    operation,
    path,
    query,
)
from api.settings import ApiSettings
from engine.model.states import ChargeState, HoldState
from engine.views.listings import EXCEPTION_STATES

LISTED = (*ADMIN, *STORE, *PATHED, "invalid_cursor", "event_not_found")
OPEN_CODES = (*ADMIN, *STORE, *PATHED, *BODY, "event_not_found", "already_open", "sale_started",
              "sale_closed")  # fmt: skip
CURSOR = {
    "name": "cursor",
    "in": "query",
    "description": "the next_cursor of the previous page (opaque); absent: the first page",
    "schema": {"type": "string", "minLength": 1, "maxLength": 4096},
    "example": "MTIzfHw",
}
PAGE = (
    " A page holds at most `limit` entries (it may hold fewer, even none, with a next_cursor); "
    "next_cursor is null once the listing is complete. Pages are read with HSCAN steps, never "
    "the whole hash: every entry present from the first page to the last is listed once."
)
CSV_EXAMPLE = (
    "hold_id,login,seat_ids,lines,amount,currency,charge_id,decided_ms,seat_prices,order_number,"
    "seats_named\n"
    "9f2c4e1ab7d35f60c8e21d4b6a9f0e73:1748,alice,A-1 A-2,,9000,EUR,"
    "spring-gala~3f9a1c2e7b4d6f8a0c1e2b3d,1767261620000,A-1=4500 A-2=4500,7K2F-9QX3-MT,"
    '"Section A, row 1, seats 1, 2"\n'
)


def _states(names: list[str]) -> dict[str, Any]:
    pattern = f"^({'|'.join(names)})(,({'|'.join(names)}))*$"
    return {
        "name": "state",
        "in": "query",
        "description": "comma-separated states; absent: all",
        "schema": {"type": "string", "pattern": pattern},
        "example": names[0],
    }


def _list(
    op_id: str, summary: str, schema: str, description: str, *params: dict[str, Any]
) -> dict[str, Any]:
    return operation(
        op_id,
        summary,
        answer(200, schema, "a page"),
        LISTED,
        description=description + PAGE,
        parameters=[*params, query("limit", 100), CURSOR],
    )


EVENTS_LIST_OP = operation(
    "listEvents",
    "List the events",
    answer(200, "EventPage", "a page of the events"),
    (*ADMIN, "store_unavailable", "invalid_request", "invalid_cursor"),
    description="The events (from the events index), each with its kind, status, T0 and "
    "counters (free, held, blocked, sold). A page of the index (SSCAN).",
    parameters=[query("limit", 100), CURSOR],
)
CSV_OK = {
    "200": {
        "description": "the orders, one line each, after a header line",
        "content": {"text/csv": {"schema": {"type": "string"}, "example": CSV_EXAMPLE}},
    }
}

LISTING_PATHS: dict[str, Any] = {
    "/v1/admin/events/{event_id}": {
        "get": operation(
            "getEventConfig",
            "Read an event's configuration",
            answer(200, "EventConfig", "the configuration"),
            (*ADMIN, *STORE, *PATHED, "event_not_found"),
            description="The event's configuration: kind, status, policy, TTLs, currency, "
            "price (seats) or SKUs with their prices (stock), locations, caps, opens_at_ms.",
        )
    },
    "/v1/admin/events/{event_id}/holds": {
        "get": _list(
            "listHolds",
            "List an event's holds",
            "HoldPage",
            "The event's holds with their state, seats or lines, deadline and charges.",
            _states([s.value for s in HoldState]),
        )
    },
    "/v1/admin/events/{event_id}/charges": {
        "get": _list(
            "listCharges",
            "List an event's charges",
            "ChargePage",
            "The event's charges with their state, amount, refund attempts and reason.",
            _states([s.value for s in ChargeState]),
        )
    },
    "/v1/admin/events/{event_id}/orders": {
        "get": _list(
            "listOrders",
            "List an event's orders",
            "OrderPage",
            "CONFIRMED holds: seat_ids or lines, amount, currency and the winning charge_id.",
        )
    },
    "/v1/admin/events/{event_id}/exceptions/charges": {
        "get": _list(
            "listExceptionCharges",
            "List the charges that need an operator",
            "ExceptionPage",
            "Charges whose money needs an operator's eye, each with its hold (state, seats): "
            "REFUNDING (money without a seat being given back; `parked` when its refund "
            "stopped), PROVIDER_REFUNDED, DISPUTED, CHARGED_BACK (a sold seat's money left).",
            _states(sorted(EXCEPTION_STATES)),
        )
    },
    "/v1/admin/events/{event_id}/orders.csv": {
        "get": operation(
            "exportOrdersCsv",
            "Export an event's orders as CSV",
            CSV_OK,
            (*ADMIN, *STORE, *PATHED, "event_not_found"),
            description="Every order as CSV (hold_id, login, seat_ids, lines, amount, "
            "currency, charge_id, decided_ms, seat_prices as seat=price pairs, order_number, "
            "seats_named: the seats as printed at the venue), "
            "streamed a page at a time.",
        )
    },
    "/v1/admin/events/{event_id}/close": {
        "post": operation(
            "closeSale",
            "Close a sale",
            answer(200, "SaleStatus", "closed (or cancelled before)"),
            (*ADMIN, *STORE, *PATHED, "event_not_found"),
            description="Close the sale: claims and charge starts answer 409 sale_closed; "
            "holds run on to their deadlines and provider callbacks still decide. A repeat "
            "answers the same (`status`: closed, or cancelled).",
        )
    },
    "/v1/admin/events/{event_id}/cancel": {
        "post": operation(
            "cancelSale",
            "Cancel a sale and refund it",
            {
                **answer(200, "CancelProgress", "complete"),
                **answer(202, "CancelProgress", "more remains: post again"),
            },
            (*ADMIN, *STORE, *PATHED, *BODY, "event_not_found"),
            description="Cancel the sale: closed, every hold ended in a recorded state "
            "(RESERVED -> RELEASED, QUARANTINED -> EXPIRED, CONFIRMED and EXCEPTION -> REVOKED) "
            "and the captured money of every sold seat on the refund queue. Done in bounded "
            "script calls of `batch` holds: 200 when complete, 202 with `remaining` (units "
            "still held, blocked or sold) when more remains: post again. Idempotent.",
            body=json_body("CancelSaleRequest", required=False),
        )
    },
}

CREATE_CODES = (*ADMIN, *BODY, "store_unavailable", "event_exists")
CORRECTION_CODES = (
    *ADMIN, *BODY, *PATHED, *STORE, "wrong_event_kind", "event_not_found", "unknown_sku",
    "unknown_location", "stock_below_zero", "correction_id_reused", "sale_not_open",
)  # fmt: skip
EVENT_READ = (*PATHED, *STORE, "event_not_found")

ADMIN_PATHS: dict[str, Any] = {
    "/v1/admin/events": {
        "get": EVENTS_LIST_OP,
        "post": operation(
            "createEvent",
            "Create a seat or stock event",
            answer(201, "EventCreated", "created (and opened, with opens_at_ms)"),
            CREATE_CODES,
            description="kind seats (default): `seats` (and optionally price_minor, max_party); "
            "kind stock: `locations` and `skus` instead (no seats, max_party or price_minor). "
            "A field of the other kind is 400 invalid_request; a refused create writes nothing.",
            body=json_body("CreateEventRequest", max_bytes=ApiSettings.admin_body_max_bytes),
        ),
    },
    "/v1/admin/events/{event_id}/stock/corrections": {
        "post": operation(
            "correctStock",
            "Correct a location's on-hand count",
            {
                **answer(201, "StockCorrected", "applied"),
                **answer(200, "StockCorrected", "a replay: the figures it left"),
            },
            CORRECTION_CODES,
            description="Set or adjust one location's on-hand count, idempotent by "
            "correction_id; the same id with another body is 409 correction_id_reused. Refused "
            "(409 stock_below_zero, with available, held, blocked and sold) when available "
            "would go below zero. `operator` defaults to the admin credential's name.",
            body=json_body("StockCorrectionRequest"),
        )
    },
    "/v1/admin/events/{event_id}/open": {
        "post": operation(
            "openSale",
            "Open a sale (or move its T0)",
            answer(200, "SaleOpened", "open at opens_at_ms"),
            OPEN_CODES,
            description="Open the sale at opens_at_ms (0 or absent: now). An open event answers "
            "409 already_open with its opens_at_ms, unless reschedule is true and its T0 is "
            "still to come (after it: 409 sale_started); a closed or cancelled sale never "
            "opens again (409 sale_closed).",
            body=json_body("OpenSaleRequest", required=False),
        )
    },
    "/v1/admin/events/{event_id}/holds/{hold_id}/revoke": {
        "post": operation(
            "revokeHold",
            "Take back a seat whose money left",
            answer(200, "RevokedHold", "revoked: the seat is on sale again"),
            (*ADMIN, *PATHED, *STORE, "hold_not_found", "not_an_exception"),
            description="Only for holds in EXCEPTION; anything else is 409 not_an_exception.",
        )
    },
    "/v1/admin/events/{event_id}/exceptions": {
        "get": operation(
            "getExceptions",
            "What the business must look at",
            answer(200, "ExceptionsReport", "the exceptions view"),
            (*ADMIN, *EVENT_READ),
            parameters=[query("charging_older_than_ms", 300000)],
        )
    },
    "/v1/admin/logins/{login}/revoke": {
        "post": operation(
            "revokeLogin",
            "Revoke every token of a login",
            answer(200, "LoginRevoked", "revoked"),
            (*ADMIN, *PATHED, "store_unavailable"),
            description="Every token of the login issued up to now (Redis's clock, "
            "`revoked_before_ms`) is refused (401 token_revoked) on every API process within "
            "ONSALE_REVOCATION_POLL_MS.",
            parameters=[path("login", {"type": "string", "pattern": "^[!-~]{1,128}$"})],
        )
    },
}
