"""The building blocks of the OpenAPI document (api/openapi.py): helpers, the error schema, the
claim's answer, and the quantity stock pieces (ADR 0022). Every limit comes from the table the
validators use (api/validate.py LIMITS)."""

from collections.abc import Iterable
from typing import Any

from api.errors import STATUS
from api.settings import ApiSettings
from api.validate import LIMITS

ERROR = {"$ref": "#/components/schemas/Error"}
ID = {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,64}$"}
STOCK_ID = {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"}  # SKUs and locations
# A charge id is minted by the server: <event id>~<24 hex> (engine/keys.py charge_key).
CHARGE_ID = {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,64}(~[0-9a-f]{24})?$"}
BEARER: list[dict[str, list[str]]] = [{"bearer": []}]
OBJ: dict[str, Any] = {"type": "object"}
OPS = "Ops only: the metrics token (ONSALE_METRICS_TOKEN) or an admin credential."


def errors_of(*statuses: int, codes: Iterable[str] = ()) -> dict[str, Any]:
    """Error answers by status; `codes` names the error codes an operation may answer, each
    under its status (api/errors.py STATUS), in `x-error-codes` and the description."""
    named = sorted(set(codes))
    assert all(STATUS[code] in statuses for code in named), "a code's status is not listed"
    out: dict[str, Any] = {}
    for status in statuses:
        these = [code for code in named if STATUS[code] == status]
        answer: dict[str, Any] = {
            "description": f"error: {', '.join(these)}" if these else "error",
            "content": {"application/json": {"schema": ERROR}},
        }
        if these:
            answer["x-error-codes"] = these
        out[str(status)] = answer
    return out


def ok(code: int, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"description": "ok"}
    if schema is not None:
        body["content"] = {"application/json": {"schema": schema}}
    return {str(code): body}


def path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": ID}


def json_body(
    schema: dict[str, Any], required: bool = True, max_bytes: int = ApiSettings.body_max_bytes
) -> dict[str, Any]:
    return {
        "required": required,
        "description": f"at most {max_bytes} bytes by default (larger: 413 body_too_large)",
        "content": {"application/json": {"schema": schema}},
    }


def limit(name: str, **more: Any) -> dict[str, Any]:
    """The schema of what LIMITS[name] bounds; `x-limit` names the limit when the field's own
    name is another (tests/unit/test_api_contract.py reads it)."""
    return {**LIMITS[name].schema(), "x-limit": name, **more}


def query(name: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "schema": limit(name)}


def _detail(kind: str, description: str, nullable: bool = False) -> dict[str, Any]:
    return {"type": kind, "description": description, **({"nullable": True} if nullable else {})}


ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "request_id"],
            "properties": {
                # "internal": a 500, which is a bug of ours
                "code": {"type": "string", "enum": sorted({*STATUS, "internal"})},
                "message": {"type": "string"},
                "request_id": {"type": "string"},
                "opens_at_ms": _detail(
                    "integer",
                    "sale_not_open: when the sale opens (server clock, ms); null when no "
                    "opening time is set yet; already_open, sale_started: the sale's T0",
                    nullable=True,
                ),
                "state": _detail(
                    "string", "already_confirmed, hold_expired, hold_revoked: the hold's state"
                ),
                "cap": _detail("integer", "limit_exceeded: units a login may hold and buy"),
                "charge_state": _detail(
                    "string", "charge_captured, charge_not_in_flight: the charge's state"
                ),
                "available": _detail(
                    "integer",
                    "not_enough_seats: the seats this claim could have had; insufficient_stock: "
                    "the most one location has of the sku; stock_below_zero: units available",
                ),
                "max_party": _detail("integer", "party_too_large: seats one claim may ask for"),
                "kind": _detail("string", "wrong_event_kind: what the event sells (seats|stock)"),
                "sku": _detail("string", "unknown_sku, insufficient_stock: the sku", True),
                "location": _detail("string", "unknown_location: the location", True),
                "held": _detail("integer", "stock_below_zero: units holds own there"),
                "blocked": _detail("integer", "stock_below_zero: units blocked by late payments"),
                "sold": _detail("integer", "stock_below_zero: units sold there"),
                "sale_status": _detail("string", "sale_closed: closed or cancelled"),
            },
        }
    },
}

LINE = {
    "type": "object",
    "required": ["sku", "location", "quantity"],
    "properties": {"sku": STOCK_ID, "location": STOCK_ID, "quantity": {"type": "integer"}},
}
CLAIMED: dict[str, Any] = {
    "type": "object",
    "required": ["hold_id", "seat_id", "seat_ids", "expires_ms", "state", "replaced_hold_id"],
    "description": "A stock hold (a cart) has no seats (seat_id null, seat_ids empty): its "
    "`lines`, each with the location it was taken from, and `amount`, what the charge will ask.",
    "properties": {
        "hold_id": ID,
        "seat_id": {**ID, "nullable": True},
        "seat_ids": {"type": "array", "items": ID},
        "expires_ms": {"type": "integer"},
        "state": {"type": "string"},
        "replaced_hold_id": {"type": "string", "nullable": True},
        "lines": {"type": "array", "items": LINE},
        "amount": {"type": "integer"},
    },
}
CLAIM_LINES = limit(
    "lines",
    description="A cart of quantity stock (stock events only): each line from its location, or "
    "else from the first of the event's locations, in its order, that has the whole quantity "
    "(a line is never split); all lines or none.",
    uniqueItems=True,
    items={
        "type": "object",
        "required": ["sku", "quantity"],
        "additionalProperties": False,
        "properties": {
            "sku": STOCK_ID,
            "quantity": limit("line_quantity"),
            "location": STOCK_ID,
        },
    },
)
CLAIM_CODES = (
    "invalid_request", "unauthorized", "token_revoked", "token_scope", "event_not_found",
    "unknown_seat", "unknown_sku", "unknown_location", "sold_out", "seat_taken",
    "not_enough_seats", "party_too_large", "wrong_event_kind", "insufficient_stock",
    "limit_exceeded", "charge_in_flight", "sale_not_open", "sale_closed", "body_too_large",
    "unsupported_media_type", "idempotency_key_reused", "rate_limited", "store_unavailable",
    "recovering", "identity_unavailable",
)  # fmt: skip

# The create request's fields beside the common ones (admin create: api/routes/admin.py).
KIND_FIELDS: dict[str, Any] = {
    "kind": {"type": "string", "enum": ["seats", "stock"], "description": "default seats"},
    "login_cap": limit(
        "login_cap",
        nullable=True,
        description="units a login may hold and buy here; 0: none; null: the deployment's "
        "ONSALE_LOGIN_CAP",
    ),
    "max_party": limit("max_party", description="seat events: seats one claim may ask for"),
    "locations": limit(
        "locations",
        items=STOCK_ID,
        uniqueItems=True,
        description="stock events: location ids, in the order lines are served from",
    ),
    "skus": limit(
        "skus",
        description="stock events: the SKUs on sale (unique), each with its price and its "
        "initial count at each location (unnamed: 0), recorded as a correction",
        items={
            "type": "object",
            "required": ["sku", "price_minor"],
            "additionalProperties": False,
            "properties": {
                "sku": STOCK_ID,
                "price_minor": limit("price_minor"),
                "on_hand": {
                    "type": "object",
                    "maxProperties": int(LIMITS["locations"].high),
                    "description": "location -> units on hand (locations of the event only)",
                    "additionalProperties": limit("on_hand"),
                },
            },
        },
    ),
}

STOCK_CODES = (
    "invalid_request", "wrong_event_kind", "event_not_found", "store_unavailable", "recovering",
)  # fmt: skip
STOCK_TABLE_OP: dict[str, Any] = {
    "description": "Availability per SKU and location (one read, no scan): on_hand = available "
    "+ held + blocked + sold at every location; `available` per SKU is the sum.",
    "parameters": [path("event_id")],
    "responses": {**ok(200, OBJ), **errors_of(400, 404, 503, codes=STOCK_CODES)},
}

CORRECTION_CODES = (
    "invalid_request", "wrong_event_kind", "unauthorized", "event_not_found", "unknown_sku",
    "unknown_location", "stock_below_zero", "correction_id_reused", "sale_not_open",
    "body_too_large", "unsupported_media_type", "rate_limited", "store_unavailable", "recovering",
)  # fmt: skip
CORRECTION_OP: dict[str, Any] = {
    "security": BEARER,
    "description": "Set or adjust one location's on-hand count, idempotent by correction_id: "
    "201 applied, 200 a replay (the figures it left); the same id with another body is 409 "
    "correction_id_reused. Refused (409 stock_below_zero, with available, held, blocked and "
    "sold) when available would go below zero: units a cart holds or a sale owns are never "
    "corrected away. `operator` defaults to the admin credential's name.",
    "parameters": [path("event_id")],
    "requestBody": json_body(
        {
            "type": "object",
            "required": ["correction_id", "sku", "location", "reason"],
            "additionalProperties": False,
            "description": "exactly one of set and adjust",
            "properties": {
                "correction_id": ID,
                "sku": STOCK_ID,
                "location": STOCK_ID,
                "set": limit("set"),
                "adjust": limit("adjust"),
                "reason": limit("reason"),
                "operator": limit("operator"),
            },
        }
    ),
    "responses": {
        **ok(201, OBJ),
        **ok(200, OBJ),
        **errors_of(400, 401, 404, 409, 413, 415, 429, 503, codes=CORRECTION_CODES),
    },
}

CREATE_CODES = (
    "invalid_request", "unauthorized", "event_exists", "body_too_large", "unsupported_media_type",
    "rate_limited", "store_unavailable",
)  # fmt: skip
