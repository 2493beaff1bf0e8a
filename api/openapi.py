"""The OpenAPI document served at /openapi.json. tests/integration/test_openapi.py checks that
it names exactly the routes the app serves and fuzzes the app against it; every limit the
server enforces is stated here from the table the validators use (api/validate.py LIMITS),
which tests/unit/test_api_contract.py checks."""

from typing import Any

from api.openapi_listings import EVENTS_LIST_OP, LISTING_PATHS, OPEN_CODES
from api.openapi_parts import (
    BEARER,
    CHARGE_ID,
    CLAIM_CODES,
    CLAIM_LINES,
    CLAIMED,
    CORRECTION_OP,
    CREATE_CODES,
    ERROR_SCHEMA,
    ID,
    KIND_FIELDS,
    OBJ,
    OPS,
    STOCK_TABLE_OP,
    errors_of,
    json_body,
    limit,
    ok,
    path,
    query,
)
from api.openapi_webhooks import WEBHOOK_PATHS
from api.settings import ApiSettings
from api.validate import LIMITS, SEATS_MAX, SECTION_CHARS_MAX

OPENAPI: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "onsale checkout API", "version": "1"},
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "schemas": {
            "Error": ERROR_SCHEMA,
        },
    },
    "paths": {
        "/healthz": {"get": {"responses": ok(200, OBJ)}},
        "/readyz": {"get": {"responses": {**ok(200, OBJ), **errors_of(503)}}},
        "/metrics": {
            "get": {
                "security": BEARER,
                "description": OPS,
                "responses": {"200": {"description": "Prometheus text"}, **errors_of(401, 429)},
            }
        },
        "/openapi.json": {
            "get": {
                "security": BEARER,
                "description": OPS,
                "responses": {**ok(200, OBJ), **errors_of(401, 429)},
            }
        },
        "/v1/login": {
            "post": {
                "description": "Demo and load runs only (ONSALE_DEMO_LOGIN=1): a signed token "
                "for any name, limited to `event_id` when given; 404 login_disabled otherwise "
                "(buyer tokens come from the identity provider).",
                "requestBody": json_body(
                    {
                        "type": "object",
                        "required": ["login"],
                        "properties": {"login": ID, "event_id": ID},
                    }
                ),
                "responses": {**ok(200, OBJ), **errors_of(400, 404, 413, 415, 429)},
            }
        },
        "/v1/events/{event_id}": {
            "get": {
                "parameters": [path("event_id")],
                "responses": {**ok(200, OBJ), **errors_of(400, 404, 503)},
            }
        },
        "/v1/events/{event_id}/seats": {
            "get": {
                "parameters": [path("event_id"), query("limit")],
                "responses": {**ok(200, OBJ), **errors_of(400, 404, 503)},
            }
        },
        "/v1/events/{event_id}/stock": {"get": STOCK_TABLE_OP},
        "/v1/events/{event_id}/sections": {
            "get": {
                "description": "Seats and free seats per section of a seat map, in rank order "
                "(one count per section over its rank range, no scan); 409 "
                "sections_interleaved when the map's sections share rank ranges.",
                "parameters": [path("event_id")],
                "responses": {**ok(200, OBJ), **errors_of(400, 404, 409, 503)},
            }
        },
        "/v1/events/{event_id}/holds": {
            "post": {
                "security": BEARER,
                "parameters": [
                    path("event_id"),
                    {"name": "Idempotency-Key", "in": "header", "schema": ID},
                ],
                "description": "The hold id is derived from the login and its Idempotency-Key: "
                "a retry by the same login within the idempotency window answers 200 with the "
                "same hold; another login's same key is another hold. `replaced_hold_id`: the "
                "login's previous hold, released by this claim (another tab's). 429 "
                "rate_limited (with Retry-After) past the login's claim rate; 409 "
                "limit_exceeded past the units a login may hold and buy. What the event sells "
                "is the claim's to match: seats of a stock event, or lines of a seat event, "
                "are 400 wrong_event_kind.",
                "requestBody": json_body(
                    {
                        "type": "object",
                        "description": "One of: seat_id (that seat), seat_ids (those seats, all "
                        "or nothing), quantity (that many best seats: the best block of "
                        "adjacent ones, consecutive ranks in one section, when one is free, "
                        "else the best single seats), lines (stock events: a cart); none: the "
                        "best seat. A party or a cart is one hold, one charge (price x seats, "
                        "or the cart's amount fixed at the claim), one deadline.",
                        "properties": {
                            "seat_id": ID,
                            "seat_ids": {
                                "type": "array",
                                "items": ID,
                                "minItems": 1,
                                "maxItems": int(LIMITS["quantity"].high),
                                "uniqueItems": True,
                            },
                            "quantity": limit("quantity"),
                            "lines": CLAIM_LINES,
                        },
                    },
                    required=False,
                ),
                "responses": {
                    **ok(201, CLAIMED),
                    **ok(200, CLAIMED),
                    **errors_of(
                        400, 401, 403, 404, 409, 413, 415, 422, 429, 503, codes=CLAIM_CODES
                    ),
                },
            }
        },
        "/v1/events/{event_id}/holds/{hold_id}": {
            "get": {
                "security": BEARER,
                "description": "The hold, its charges, and what it owns: seat_id and seat_ids, "
                "or a stock hold's lines and amount (seat_id null). A CONFIRMED hold, once the "
                "sale is told, has its `order` (seat_ids or lines, amount, currency, the "
                "charge_id that paid); null otherwise.",
                "parameters": [path("event_id"), path("hold_id")],
                "responses": {**ok(200, OBJ), **errors_of(400, 401, 403, 404, 503)},
            },
            "delete": {
                "security": BEARER,
                "description": "200: RELEASED (by this call or an earlier one). 202: the hold "
                "is QUARANTINED (its deadline passed with a charge in flight): it is given up "
                "(given_up, a late capture is refunded, the login may claim again) and ends "
                "when the charge resolves or at quarantine_until_ms. 409: it ended otherwise "
                "(already_confirmed, hold_expired, hold_revoked; `state` in the error).",
                "parameters": [path("event_id"), path("hold_id")],
                "responses": {
                    **ok(200, OBJ),
                    **ok(202, OBJ),
                    **errors_of(400, 401, 403, 404, 409, 503),
                },
            },
        },
        "/v1/events/{event_id}/holds/{hold_id}/charges": {
            "post": {
                "security": BEARER,
                "parameters": [
                    path("event_id"),
                    path("hold_id"),
                    {"name": "Idempotency-Key", "in": "header", "schema": ID},
                ],
                "requestBody": json_body(
                    {"type": "object", "description": "an object (no field is read yet)"},
                    required=False,
                ),
                "responses": {
                    **ok(202, OBJ),
                    **errors_of(400, 401, 403, 404, 409, 413, 415, 422, 429, 502, 503),
                },
            }
        },
        "/v1/events/{event_id}/holds/{hold_id}/charges/{charge_id}/abandon": {
            "post": {
                "security": BEARER,
                "parameters": [
                    path("event_id"),
                    path("hold_id"),
                    {"name": "charge_id", "in": "path", "required": True, "schema": CHARGE_ID},
                ],
                "description": "409 charge_captured or charge_not_in_flight (with "
                "`charge_state`) when the charge is not in flight; a repeat answers like the "
                "first abandon.",
                "responses": {**ok(200, OBJ), **errors_of(400, 401, 403, 404, 409, 503)},
            }
        },
        "/v1/provider/callbacks": {
            "post": {
                "description": "Signed with Onsale-Signature: t=<unix s>,v1=<hex HMAC-SHA256>, "
                f"t within {ApiSettings.webhook_tolerance_s} s of now by default; with "
                "ONSALE_PROVIDER=stripe, Stripe's events signed with Stripe-Signature (ADR "
                "0023), an event the engine does not follow answered 200 `IGNORED`. A duplicate "
                "(same provider event id) answers the recorded decision with the charge's and "
                "the hold's states now beside the recorded ones (`recorded`).",
                "requestBody": json_body(OBJ),
                "responses": {**ok(200, OBJ), **errors_of(400, 401, 404, 409, 413, 503)},
            }
        },
        "/v1/admin/events": {
            "get": EVENTS_LIST_OP,
            "post": {
                "security": BEARER,
                "description": "kind seats (default): `seats` (and optionally price_minor, "
                "max_party); kind stock: `locations` and `skus` instead (no seats, max_party or "
                "price_minor). A field of the other kind is 400 invalid_request; a refused "
                "create writes nothing.",
                "requestBody": json_body(
                    {
                        "type": "object",
                        "required": ["event_id"],
                        "additionalProperties": False,
                        "properties": {
                            "event_id": ID,
                            **KIND_FIELDS,
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
                                        "rank": limit("rank"),
                                        "section": {
                                            "type": "string",
                                            "maxLength": SECTION_CHARS_MAX,
                                        },
                                    },
                                },
                            },
                            "hold_ttl_ms": limit("hold_ttl_ms"),
                            "quarantine_ms": limit("quarantine_ms"),
                            "policy": {"type": "string", "enum": ["quarantine", "release_refund"]},
                            "price_minor": limit("price_minor"),
                            "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
                            "reversal_policy": {"type": "string", "enum": ["manual", "revoke"]},
                            "opens_at_ms": {**limit("opens_at_ms"), "nullable": True},
                        },
                    },
                    max_bytes=ApiSettings.admin_body_max_bytes,
                ),
                "responses": {
                    **ok(201, OBJ),
                    **errors_of(400, 401, 409, 413, 415, 429, 503, codes=CREATE_CODES),
                },
            },
        },
        "/v1/admin/events/{event_id}/stock/corrections": {"post": CORRECTION_OP},
        "/v1/admin/events/{event_id}/open": {
            "post": {
                "security": BEARER,
                "parameters": [path("event_id")],
                "requestBody": json_body(
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "opens_at_ms": limit("opens_at_ms"),
                            "reschedule": {"type": "boolean"},
                        },
                    },
                    required=False,
                ),
                "operationId": "admin_open_sale",
                "description": "Open the sale at opens_at_ms (0 or absent: now). An open event "
                "answers 409 already_open with its opens_at_ms, unless reschedule is true and "
                "its T0 is still to come (after it: 409 sale_started); a closed or cancelled "
                "sale never opens again (409 sale_closed).",
                "responses": {
                    **ok(200, OBJ),
                    **errors_of(400, 401, 404, 409, 413, 415, 429, 503, codes=OPEN_CODES),
                },
            }
        },
        "/v1/admin/events/{event_id}/holds/{hold_id}/revoke": {
            "post": {
                "security": BEARER,
                "parameters": [path("event_id"), path("hold_id")],
                "responses": {**ok(200, OBJ), **errors_of(400, 401, 404, 409, 429, 503)},
            }
        },
        "/v1/admin/events/{event_id}/exceptions": {
            "get": {
                "security": BEARER,
                "parameters": [path("event_id"), query("charging_older_than_ms")],
                "responses": {**ok(200, OBJ), **errors_of(400, 401, 404, 429, 503)},
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
                "responses": {**ok(200, OBJ), **errors_of(400, 401, 404, 429, 503)},
            }
        },
        **LISTING_PATHS,  # listings, exports, close and cancel (api/openapi_listings.py)
        **WEBHOOK_PATHS,  # merchant webhooks (api/openapi_webhooks.py, ADR 0024)
    },
}
