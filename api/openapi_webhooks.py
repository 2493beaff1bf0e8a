"""The merchant webhook operations of the OpenAPI document (api/routes/webhooks.py, ADR 0024);
api/openapi.py adds them to its paths. Limits come from api/validate.py LIMITS."""

from typing import Any

from api.openapi_parts import BEARER, OBJ, errors_of, json_body, limit, ok, path
from engine.webhooks import EVENT_TYPES

UNAVAILABLE = "503 webhooks_unavailable: the ledger database is not configured or not reachable."
ENDPOINT = [path("endpoint_id")]
NUMBER = {"type": "string", "pattern": "^[0-9]{1,16}$"}
COMMON_CODES = ("unauthorized", "rate_limited", "webhooks_unavailable")
FOUND_CODES = (*COMMON_CODES, "invalid_request", "webhook_endpoint_not_found")
EVENT_TYPE_LIST = limit(
    "event_types",
    uniqueItems=True,
    items={"type": "string", "enum": list(EVENT_TYPES)},
    description="the notification types sent to it (absent: all of them)",
)


def _op(description: str, codes: tuple[str, ...], *statuses: int, **more: Any) -> dict[str, Any]:
    """An admin operation answering 200 (or `ok_status`) with an object."""
    status = more.pop("ok_status", 200)
    return {
        "security": BEARER,
        "description": f"{description} {UNAVAILABLE}",
        **more,
        "responses": {**ok(status, OBJ), **errors_of(401, 429, 503, *statuses, codes=codes)},
    }


def _body(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
    }
    if required:
        schema["required"] = list(required)
    return json_body(schema, required=bool(required))


WEBHOOK_PATHS: dict[str, Any] = {
    "/v1/admin/webhooks/endpoints": {
        "post": _op(
            "Register an endpoint: its signing secret (whsec_...) is in this answer only. "
            "Deliveries are signed as Standard Webhooks (webhook-id, webhook-timestamp, "
            "webhook-signature) and sent at least once, for the decisions the ledger mirrors "
            "from now on.",
            (
                *COMMON_CODES,
                "invalid_request",
                "invalid_webhook_url",
                "unknown_event_type",
                "too_many_webhook_endpoints",
                "body_too_large",
                "unsupported_media_type",
            ),
            400,
            409,
            413,
            415,
            ok_status=201,
            requestBody=_body(
                {
                    "url": limit("url", description="https (http only where allowed)"),
                    "description": limit("description"),
                    "event_types": EVENT_TYPE_LIST,
                },
                ("url",),
            ),
        ),
        "get": _op("The live endpoints (never their secrets).", COMMON_CODES),
    },
    "/v1/admin/webhooks/endpoints/{endpoint_id}": {
        "get": _op("One endpoint.", FOUND_CODES, 400, 404, parameters=ENDPOINT),
        "delete": _op(
            "Nothing more is written or sent for it; its delivery log is kept.",
            FOUND_CODES,
            400,
            404,
            parameters=ENDPOINT,
        ),
    },
    "/v1/admin/webhooks/endpoints/{endpoint_id}/disable": {
        "post": _op(
            "No delivery is written or sent for it until it is enabled; pending ones wait.",
            FOUND_CODES,
            400,
            404,
            parameters=ENDPOINT,
        ),
    },
    "/v1/admin/webhooks/endpoints/{endpoint_id}/enable": {
        "post": _op("Deliveries resume.", FOUND_CODES, 400, 404, parameters=ENDPOINT),
    },
    "/v1/admin/webhooks/endpoints/{endpoint_id}/rotate-secret": {
        "post": _op(
            "A new secret, in this answer only; the replaced one signs beside it (a second "
            "v1 signature) for keep_previous_s (default one day).",
            (*FOUND_CODES, "body_too_large", "unsupported_media_type"),
            400,
            404,
            413,
            415,
            parameters=ENDPOINT,
            requestBody=_body({"keep_previous_s": limit("keep_previous_s")}),
        ),
    },
    "/v1/admin/webhooks/endpoints/{endpoint_id}/deliveries": {
        "get": _op(
            "The endpoint's deliveries, newest first, with their status (pending, delivered, "
            "failed), attempts and last answer; `next_cursor` (null on the last page) asks "
            "for older ones.",
            FOUND_CODES,
            400,
            404,
            parameters=[
                *ENDPOINT,
                {
                    "name": "status",
                    "in": "query",
                    "schema": {"type": "string", "enum": ["pending", "delivered", "failed"]},
                },
                {"name": "limit", "in": "query", "schema": limit("limit")},
                {"name": "cursor", "in": "query", "schema": NUMBER},
            ],
        ),
    },
    "/v1/admin/webhooks/endpoints/{endpoint_id}/deliveries/{delivery_id}/replay": {
        "post": _op(
            "Send the delivery again, whatever its status, with the same webhook-id; its "
            "maximum age counts from now. 409 webhook_endpoint_disabled while disabled.",
            (*FOUND_CODES, "webhook_delivery_not_found", "webhook_endpoint_disabled"),
            400,
            404,
            409,
            ok_status=202,
            parameters=[
                *ENDPOINT,
                {"name": "delivery_id", "in": "path", "required": True, "schema": NUMBER},
            ],
        ),
    },
    "/v1/admin/webhooks/endpoints/{endpoint_id}/replay": {
        "post": _op(
            "Send again every failed delivery of the endpoint created at or after since_ms "
            "(epoch ms); answers how many.",
            (*FOUND_CODES, "webhook_endpoint_disabled", "body_too_large", "unsupported_media_type"),
            400,
            404,
            409,
            413,
            415,
            ok_status=202,
            parameters=ENDPOINT,
            requestBody=_body({"since_ms": limit("since_ms")}, ("since_ms",)),
        ),
    },
}
