"""The OpenAPI document served at /openapi.json. tests/integration/test_openapi.py checks that
it names exactly the routes the app serves and fuzzes the app against it; every limit the
server enforces is stated here from the table the validators use (api/validate.py LIMITS),
which tests/unit/test_api_contract.py checks."""

from typing import Any

from api.errors import STATUS
from api.settings import ApiSettings
from api.validate import LIMITS, SEATS_MAX, SECTION_CHARS_MAX

ERROR = {"$ref": "#/components/schemas/Error"}
ID = {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,64}$"}
# A charge id is minted by the server: <event id>~<24 hex> (engine/keys.py charge_key).
CHARGE_ID = {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,64}(~[0-9a-f]{24})?$"}


def _errors(*codes: int) -> dict[str, Any]:
    return {
        str(c): {"description": "error", "content": {"application/json": {"schema": ERROR}}}
        for c in codes
    }


def _ok(code: int, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"description": "ok"}
    if schema is not None:
        body["content"] = {"application/json": {"schema": schema}}
    return {str(code): body}


def _path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": ID}


def _json_body(
    schema: dict[str, Any], required: bool = True, max_bytes: int = ApiSettings.body_max_bytes
) -> dict[str, Any]:
    return {
        "required": required,
        "description": f"at most {max_bytes} bytes by default (larger: 413 body_too_large)",
        "content": {"application/json": {"schema": schema}},
    }


def _limit(name: str) -> dict[str, Any]:
    return LIMITS[name].schema()


def _query(name: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "schema": _limit(name)}


BEARER: list[dict[str, list[str]]] = [{"bearer": []}]
OBJ: dict[str, Any] = {"type": "object"}
OPS = "Ops only: the metrics token (ONSALE_METRICS_TOKEN) or an admin credential."
CLAIMED: dict[str, Any] = {
    "type": "object",
    "required": ["hold_id", "seat_id", "seat_ids", "expires_ms", "state", "replaced_hold_id"],
    "properties": {
        "hold_id": ID,
        "seat_id": ID,
        "seat_ids": {"type": "array", "items": ID},
        "expires_ms": {"type": "integer"},
        "state": {"type": "string"},
        "replaced_hold_id": {"type": "string", "nullable": True},
    },
}

OPENAPI: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "onsale checkout API", "version": "1"},
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "schemas": {
            "Error": {
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
                            "opens_at_ms": {
                                "type": "integer",
                                "nullable": True,
                                "description": "sale_not_open: when the sale opens (server "
                                "clock, ms); null when no opening time is set yet",
                            },
                            "state": {
                                "type": "string",
                                "description": "already_confirmed, hold_expired, hold_revoked: "
                                "the state the hold is in",
                            },
                            "cap": {
                                "type": "integer",
                                "description": "limit_exceeded: seats a login may hold and buy",
                            },
                            "charge_state": {
                                "type": "string",
                                "description": "charge_captured, charge_not_in_flight: the "
                                "state the charge is in",
                            },
                        },
                    }
                },
            },
        },
    },
    "paths": {
        "/healthz": {"get": {"responses": _ok(200, OBJ)}},
        "/readyz": {"get": {"responses": {**_ok(200, OBJ), **_errors(503)}}},
        "/metrics": {
            "get": {
                "security": BEARER,
                "description": OPS,
                "responses": {"200": {"description": "Prometheus text"}, **_errors(401, 429)},
            }
        },
        "/openapi.json": {
            "get": {
                "security": BEARER,
                "description": OPS,
                "responses": {**_ok(200, OBJ), **_errors(401, 429)},
            }
        },
        "/v1/login": {
            "post": {
                "description": "Demo and load runs only (ONSALE_DEMO_LOGIN=1): a signed token "
                "for any name, limited to `event_id` when given; 404 login_disabled otherwise "
                "(buyer tokens come from the identity provider).",
                "requestBody": _json_body(
                    {
                        "type": "object",
                        "required": ["login"],
                        "properties": {"login": ID, "event_id": ID},
                    }
                ),
                "responses": {**_ok(200, OBJ), **_errors(400, 404, 413, 415, 429)},
            }
        },
        "/v1/events/{event_id}": {
            "get": {
                "parameters": [_path("event_id")],
                "responses": {**_ok(200, OBJ), **_errors(400, 404, 503)},
            }
        },
        "/v1/events/{event_id}/seats": {
            "get": {
                "parameters": [_path("event_id"), _query("limit")],
                "responses": {**_ok(200, OBJ), **_errors(400, 404, 503)},
            }
        },
        "/v1/events/{event_id}/holds": {
            "post": {
                "security": BEARER,
                "parameters": [
                    _path("event_id"),
                    {"name": "Idempotency-Key", "in": "header", "schema": ID},
                ],
                "description": "The hold id is derived from the login and its Idempotency-Key: "
                "a retry by the same login within the idempotency window answers 200 with the "
                "same hold; another login's same key is another hold. `replaced_hold_id`: the "
                "login's previous hold, released by this claim (another tab's). 429 "
                "rate_limited (with Retry-After) past the login's claim rate; 409 "
                "limit_exceeded past the seats a login may hold and buy.",
                "requestBody": _json_body(
                    {
                        "type": "object",
                        "description": "One of: seat_id (that seat), seat_ids (those seats, all "
                        "or nothing), quantity (that many best seats: the best block of "
                        "adjacent ones, consecutive ranks in one section, when one is free, "
                        "else the best single seats); none: the best seat. A party is one "
                        "hold, one charge (price x seats), one deadline.",
                        "properties": {
                            "seat_id": ID,
                            "seat_ids": {
                                "type": "array",
                                "items": ID,
                                "minItems": 1,
                                "maxItems": int(LIMITS["quantity"].high),
                                "uniqueItems": True,
                            },
                            "quantity": _limit("quantity"),
                        },
                    },
                    required=False,
                ),
                "responses": {
                    **_ok(201, CLAIMED),
                    **_ok(200, CLAIMED),
                    **_errors(400, 401, 403, 404, 409, 413, 415, 422, 429, 503),
                },
            }
        },
        "/v1/events/{event_id}/holds/{hold_id}": {
            "get": {
                "security": BEARER,
                "parameters": [_path("event_id"), _path("hold_id")],
                "responses": {**_ok(200, OBJ), **_errors(400, 401, 403, 404, 503)},
            },
            "delete": {
                "security": BEARER,
                "description": "200: RELEASED (by this call or an earlier one). 202: the hold "
                "is QUARANTINED (its deadline passed with a charge in flight): it is given up "
                "(given_up, a late capture is refunded, the login may claim again) and ends "
                "when the charge resolves or at quarantine_until_ms. 409: it ended otherwise "
                "(already_confirmed, hold_expired, hold_revoked; `state` in the error).",
                "parameters": [_path("event_id"), _path("hold_id")],
                "responses": {
                    **_ok(200, OBJ),
                    **_ok(202, OBJ),
                    **_errors(400, 401, 403, 404, 409, 503),
                },
            },
        },
        "/v1/events/{event_id}/holds/{hold_id}/charges": {
            "post": {
                "security": BEARER,
                "parameters": [
                    _path("event_id"),
                    _path("hold_id"),
                    {"name": "Idempotency-Key", "in": "header", "schema": ID},
                ],
                "requestBody": _json_body(
                    {"type": "object", "description": "an object (no field is read yet)"},
                    required=False,
                ),
                "responses": {
                    **_ok(202, OBJ),
                    **_errors(400, 401, 403, 404, 409, 413, 415, 422, 429, 502, 503),
                },
            }
        },
        "/v1/events/{event_id}/holds/{hold_id}/charges/{charge_id}/abandon": {
            "post": {
                "security": BEARER,
                "parameters": [
                    _path("event_id"),
                    _path("hold_id"),
                    {"name": "charge_id", "in": "path", "required": True, "schema": CHARGE_ID},
                ],
                "description": "409 charge_captured or charge_not_in_flight (with "
                "`charge_state`) when the charge is not in flight; a repeat answers like the "
                "first abandon.",
                "responses": {**_ok(200, OBJ), **_errors(400, 401, 403, 404, 409, 503)},
            }
        },
        "/v1/provider/callbacks": {
            "post": {
                "description": "Signed with Onsale-Signature: t=<unix s>,v1=<hex HMAC-SHA256>, "
                f"t within {ApiSettings.webhook_tolerance_s} s of now by default. A duplicate "
                "(same provider event id) answers the recorded decision with the charge's and "
                "the hold's states now beside the recorded ones (`recorded`).",
                "requestBody": _json_body(OBJ),
                "responses": {**_ok(200, OBJ), **_errors(400, 401, 404, 409, 413, 503)},
            }
        },
        "/v1/admin/events": {
            "post": {
                "security": BEARER,
                "requestBody": _json_body(
                    {
                        "type": "object",
                        "required": ["event_id", "seats"],
                        "additionalProperties": False,
                        "properties": {
                            "event_id": ID,
                            "seats": {
                                "type": "array",
                                "minItems": 1,
                                "maxItems": SEATS_MAX,
                                "description": "seat ids unique; rank defaults to the position",
                                "items": {
                                    "type": "object",
                                    "required": ["seat_id"],
                                    "additionalProperties": False,
                                    "properties": {
                                        "seat_id": ID,
                                        "rank": _limit("rank"),
                                        "section": {
                                            "type": "string",
                                            "maxLength": SECTION_CHARS_MAX,
                                        },
                                    },
                                },
                            },
                            "hold_ttl_ms": _limit("hold_ttl_ms"),
                            "quarantine_ms": _limit("quarantine_ms"),
                            "policy": {"type": "string", "enum": ["quarantine", "release_refund"]},
                            "price_minor": _limit("price_minor"),
                            "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
                            "reversal_policy": {"type": "string", "enum": ["manual", "revoke"]},
                            "opens_at_ms": {**_limit("opens_at_ms"), "nullable": True},
                        },
                    },
                    max_bytes=ApiSettings.admin_body_max_bytes,
                ),
                "responses": {**_ok(201, OBJ), **_errors(400, 401, 409, 413, 415, 429, 503)},
            }
        },
        "/v1/admin/events/{event_id}/open": {
            "post": {
                "security": BEARER,
                "parameters": [_path("event_id")],
                "requestBody": _json_body(
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {"opens_at_ms": _limit("opens_at_ms")},
                    },
                    required=False,
                ),
                "responses": {**_ok(200, OBJ), **_errors(400, 401, 404, 413, 415, 429, 503)},
            }
        },
        "/v1/admin/events/{event_id}/holds/{hold_id}/revoke": {
            "post": {
                "security": BEARER,
                "parameters": [_path("event_id"), _path("hold_id")],
                "responses": {**_ok(200, OBJ), **_errors(400, 401, 404, 409, 429, 503)},
            }
        },
        "/v1/admin/events/{event_id}/exceptions": {
            "get": {
                "security": BEARER,
                "parameters": [_path("event_id"), _query("charging_older_than_ms")],
                "responses": {**_ok(200, OBJ), **_errors(400, 401, 404, 429, 503)},
            }
        },
        "/v1/admin/logins/{login}/revoke": {
            "post": {
                "security": BEARER,
                "description": "Every token of the login issued up to now (Redis's clock, "
                "`revoked_before_ms`) is refused (401 token_revoked) on every API process "
                "within ONSALE_REVOCATION_POLL_MS.",
                "parameters": [
                    {
                        "name": "login",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string", "pattern": "^[!-~]{1,128}$"},
                    }
                ],
                "responses": {**_ok(200, OBJ), **_errors(400, 401, 404, 429, 503)},
            }
        },
    },
}
