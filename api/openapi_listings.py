"""The admin listings, the orders export and the end of a sale in the OpenAPI document
(api/routes/listings.py, ADR 0025); api/openapi.py adds them to its paths."""

from typing import Any

from api.openapi_parts import BEARER, OBJ, errors_of, json_body, limit, ok, path, query
from engine.listings import EXCEPTION_STATES
from engine.states import ChargeState, HoldState

COMMON = ("unauthorized", "rate_limited", "store_unavailable", "recovering")
LISTED = (*COMMON, "invalid_request", "invalid_cursor", "event_not_found")
OPEN_CODES = (*COMMON, "invalid_request", "event_not_found", "already_open", "sale_started",
              "sale_closed", "body_too_large", "unsupported_media_type")  # fmt: skip
CANCEL_CODES = (*COMMON, "invalid_request", "event_not_found", "body_too_large",
                "unsupported_media_type")  # fmt: skip
TEXT = {"type": "string"}
CURSOR = {
    "name": "cursor",
    "in": "query",
    "description": "the next_cursor of the previous page (opaque); absent: the first page",
    "schema": {"type": "string", "minLength": 1, "maxLength": 4096},
}
PAGE = (
    " A page holds at most `limit` entries (it may hold fewer, even none, with a next_cursor); "
    "next_cursor is null once the listing is complete. Pages are read with HSCAN steps, never "
    "the whole hash: every entry present from the first page to the last is listed once."
)


def _states(names: list[str]) -> dict[str, Any]:
    pattern = f"^({'|'.join(names)})(,({'|'.join(names)}))*$"
    return {
        "name": "state",
        "in": "query",
        "description": "comma-separated states; absent: all",
        "schema": {"type": "string", "pattern": pattern},
    }


def _list(op_id: str, description: str, *params: dict[str, Any]) -> dict[str, Any]:
    return {
        "operationId": op_id,
        "security": BEARER,
        "description": description + PAGE,
        "parameters": [path("event_id"), *params, query("limit"), CURSOR],
        "responses": {**ok(200, OBJ), **errors_of(400, 401, 404, 429, 503, codes=LISTED)},
    }


EVENTS_LIST_OP: dict[str, Any] = {
    "operationId": "admin_list_events",
    "security": BEARER,
    "description": "The events (from the events index), each with its kind, status, T0 and "
    "counters (free, held, blocked, sold). A page of the index (SSCAN).",
    "parameters": [query("limit"), CURSOR],
    "responses": {
        **ok(200, OBJ),
        **errors_of(400, 401, 429, 503, codes=("invalid_request", "invalid_cursor", *COMMON)),
    },
}

LISTING_PATHS: dict[str, Any] = {
    "/v1/admin/events/{event_id}": {
        "get": {
            "operationId": "admin_event_config",
            "security": BEARER,
            "description": "The event's configuration: kind, status, policy, TTLs, currency, "
            "price (seats) or SKUs with their prices (stock), locations, caps, opens_at_ms.",
            "parameters": [path("event_id")],
            "responses": {
                **ok(200, OBJ),
                **errors_of(400, 401, 404, 429, 503, codes=(*COMMON, "event_not_found")),
            },
        }
    },
    "/v1/admin/events/{event_id}/holds": {
        "get": _list(
            "admin_list_holds",
            "The event's holds with their state, seats or lines, deadline and charges.",
            _states([s.value for s in HoldState]),
        )
    },
    "/v1/admin/events/{event_id}/charges": {
        "get": _list(
            "admin_list_charges",
            "The event's charges with their state, amount, refund attempts and reason.",
            _states([s.value for s in ChargeState]),
        )
    },
    "/v1/admin/events/{event_id}/orders": {
        "get": _list(
            "admin_list_orders",
            "CONFIRMED holds: seat_ids or lines, amount, currency and the winning charge_id.",
        )
    },
    "/v1/admin/events/{event_id}/exceptions/charges": {
        "get": _list(
            "admin_list_exceptions",
            "Charges whose money needs an operator's eye, each with its hold (state, seats): "
            "REFUNDING (money without a seat being given back; `parked` when its refund "
            "stopped), PROVIDER_REFUNDED, DISPUTED, CHARGED_BACK (a sold seat's money left).",
            _states(sorted(EXCEPTION_STATES)),
        )
    },
    "/v1/admin/events/{event_id}/orders.csv": {
        "get": {
            "operationId": "admin_orders_csv",
            "security": BEARER,
            "description": "Every order as CSV (hold_id, login, seat_ids, lines, amount, "
            "currency, charge_id, decided_ms), streamed a page at a time.",
            "parameters": [path("event_id")],
            "responses": {
                "200": {
                    "description": "ok",
                    "content": {"text/csv": {"schema": {"type": "string"}}},
                },
                **errors_of(400, 401, 404, 429, 503, codes=(*COMMON, "event_not_found")),
            },
        }
    },
    "/v1/admin/events/{event_id}/close": {
        "post": {
            "operationId": "admin_close_sale",
            "security": BEARER,
            "description": "Close the sale: claims and charge starts answer 409 sale_closed; "
            "holds run on to their deadlines and provider callbacks still decide. A repeat "
            "answers the same (`status`: closed, or cancelled).",
            "parameters": [path("event_id")],
            "responses": {
                **ok(200, OBJ),
                **errors_of(400, 401, 404, 429, 503, codes=(*COMMON, "event_not_found")),
            },
        }
    },
    "/v1/admin/events/{event_id}/cancel": {
        "post": {
            "operationId": "admin_cancel_sale",
            "security": BEARER,
            "description": "Cancel the sale: closed, every hold ended in a recorded state "
            "(RESERVED -> RELEASED, QUARANTINED -> EXPIRED, CONFIRMED and EXCEPTION -> REVOKED) "
            "and the captured money of every sold seat on the refund queue. Done in bounded "
            "script calls of `batch` holds: 200 when complete, 202 with `remaining` (units "
            "still held, blocked or sold) when more remains: post again. Idempotent.",
            "parameters": [path("event_id")],
            "requestBody": json_body(
                {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"batch": limit("batch")},
                },
                required=False,
            ),
            "responses": {
                **ok(200, OBJ),
                **ok(202, OBJ),
                **errors_of(400, 401, 404, 413, 415, 429, 503, codes=CANCEL_CODES),
            },
        }
    },
}
