"""The OpenAPI document served at /openapi.json. tests/integration/test_openapi.py checks that
it names exactly the routes the app serves and fuzzes the app against it."""

from typing import Any

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


def _json_body(schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    return {"required": required, "content": {"application/json": {"schema": schema}}}


BEARER: list[dict[str, list[str]]] = [{"bearer": []}]
OBJ: dict[str, Any] = {"type": "object"}

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
                            "code": {"type": "string"},
                            "message": {"type": "string"},
                            "request_id": {"type": "string"},
                        },
                    }
                },
            },
        },
    },
    "paths": {
        "/healthz": {"get": {"responses": _ok(200, OBJ)}},
        "/readyz": {"get": {"responses": {**_ok(200, OBJ), **_errors(503)}}},
        "/metrics": {"get": {"responses": {"200": {"description": "Prometheus text"}}}},
        "/openapi.json": {"get": {"responses": _ok(200, OBJ)}},
        "/v1/login": {
            "post": {
                "requestBody": _json_body(
                    {"type": "object", "required": ["login"], "properties": {"login": ID}}
                ),
                "responses": {**_ok(200, OBJ), **_errors(400, 413, 415)},
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
                "parameters": [
                    _path("event_id"),
                    {
                        "name": "limit",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 500},
                    },
                ],
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
                "requestBody": _json_body(
                    {"type": "object", "properties": {"seat_id": ID}}, required=False
                ),
                "responses": {
                    **_ok(201, OBJ),
                    **_ok(200, OBJ),
                    **_errors(400, 401, 404, 409, 413, 415, 422, 503),
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
                "parameters": [_path("event_id"), _path("hold_id")],
                "responses": {**_ok(200, OBJ), **_errors(400, 401, 403, 404, 503)},
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
                "requestBody": _json_body(OBJ, required=False),
                "responses": {
                    **_ok(202, OBJ),
                    **_errors(400, 401, 403, 404, 409, 413, 415, 422, 502, 503),
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
                "responses": {**_ok(200, OBJ), **_errors(400, 401, 403, 404, 503)},
            }
        },
        "/v1/provider/callbacks": {
            "post": {
                "description": "Signed with Onsale-Signature: t=<unix s>,v1=<hex HMAC-SHA256>",
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
                        "properties": {
                            "event_id": ID,
                            "seats": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["seat_id"],
                                    "properties": {
                                        "seat_id": ID,
                                        "rank": {"type": "number"},
                                        "section": {"type": "string"},
                                    },
                                },
                            },
                            "hold_ttl_ms": {"type": "integer"},
                            "quarantine_ms": {"type": "integer"},
                            "policy": {"type": "string", "enum": ["quarantine", "release_refund"]},
                            "price_minor": {"type": "integer"},
                            "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
                            "reversal_policy": {"type": "string", "enum": ["manual", "revoke"]},
                            "opens_at_ms": {"type": "integer"},
                        },
                    }
                ),
                "responses": {**_ok(201, OBJ), **_errors(400, 401, 409, 413, 415, 503)},
            }
        },
        "/v1/admin/events/{event_id}/open": {
            "post": {
                "security": BEARER,
                "parameters": [_path("event_id")],
                "requestBody": _json_body(
                    {"type": "object", "properties": {"opens_at_ms": {"type": "integer"}}},
                    required=False,
                ),
                "responses": {**_ok(200, OBJ), **_errors(400, 401, 404, 413, 415, 503)},
            }
        },
        "/v1/admin/events/{event_id}/holds/{hold_id}/revoke": {
            "post": {
                "security": BEARER,
                "parameters": [_path("event_id"), _path("hold_id")],
                "responses": {**_ok(200, OBJ), **_errors(400, 401, 404, 409, 503)},
            }
        },
        "/v1/admin/events/{event_id}/exceptions": {
            "get": {
                "security": BEARER,
                "parameters": [
                    _path("event_id"),
                    {
                        "name": "charging_older_than_ms",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 0},
                    },
                ],
                "responses": {**_ok(200, OBJ), **_errors(400, 401, 404, 503)},
            }
        },
    },
}
