"""The merchant webhook operations of the OpenAPI document (api/routes/webhooks.py, ADR 0024),
with their request and answer schemas; api/openapi.py adds them to its paths and components.
Limits come from api/validate.py LIMITS."""

from typing import Any

from api.openapi_parts import (
    ADMIN,
    BODY,
    answer,
    json_body,
    limit,
    operation,
    path,
    ref,
)

UNAVAILABLE = "503 webhooks_unavailable: the ledger database is not configured or not reachable."
NUMBER = {"type": "string", "pattern": "^[0-9]{1,16}$"}
COMMON_CODES = (*ADMIN, "webhooks_unavailable")
FOUND_CODES = (*COMMON_CODES, "invalid_request", "not_found", "webhook_endpoint_not_found")
EVENT_TYPE = ref("WebhookEventType")
STATUS = {"type": "string", "enum": ["pending", "delivered", "failed"]}
ENDPOINT_ID = "ep_5b1e0c7d9a3f2e4c6b8d0a1f"
SECRET = "whsec_rjsbbn1HK2QLbBIYFYn0u0/+jael5YNQyXgFLZAQ6cg="


def _op(op_id: str, summary: str, description: str, ok: dict[str, Any], codes: tuple[str, ...],
        **more: Any) -> dict[str, Any]:  # fmt: skip
    return operation(op_id, summary, ok, codes, description=f"{description} {UNAVAILABLE}", **more)


ENDPOINT_OK = answer(200, "WebhookEndpoint", "the endpoint")

WEBHOOK_PATHS: dict[str, Any] = {
    "/v1/admin/webhooks/endpoints": {
        "post": _op(
            "createWebhookEndpoint",
            "Register a webhook endpoint",
            "Register an endpoint: its signing secret (whsec_...) is in this answer only. "
            "Deliveries are signed as Standard Webhooks (webhook-id, webhook-timestamp, "
            "webhook-signature) and sent at least once, for the decisions the ledger mirrors "
            "from now on.",
            answer(201, "WebhookEndpointWithSecret", "registered"),
            (
                *COMMON_CODES,
                *BODY,
                "invalid_webhook_url",
                "unknown_event_type",
                "too_many_webhook_endpoints",
            ),
            body=json_body("WebhookEndpointCreate"),
        ),
        "get": _op(
            "listWebhookEndpoints",
            "List the webhook endpoints",
            "The live endpoints (never their secrets).",
            answer(200, "WebhookEndpointList", "the endpoints"),
            COMMON_CODES,
        ),
    },
    "/v1/admin/webhooks/endpoints/{endpoint_id}": {
        "get": _op(
            "getWebhookEndpoint",
            "Read a webhook endpoint",
            "One endpoint.",
            ENDPOINT_OK,
            FOUND_CODES,
        ),
        "delete": _op(
            "deleteWebhookEndpoint",
            "Delete a webhook endpoint",
            "Nothing more is written or sent for it; its delivery log is kept.",
            answer(200, "WebhookEndpointDeleted", "deleted"),
            FOUND_CODES,
        ),
    },
    "/v1/admin/webhooks/endpoints/{endpoint_id}/disable": {
        "post": _op(
            "disableWebhookEndpoint",
            "Disable a webhook endpoint",
            "No delivery is written or sent for it until it is enabled; pending ones wait.",
            ENDPOINT_OK,
            FOUND_CODES,
        ),
    },
    "/v1/admin/webhooks/endpoints/{endpoint_id}/enable": {
        "post": _op(
            "enableWebhookEndpoint",
            "Enable a webhook endpoint",
            "Deliveries resume.",
            ENDPOINT_OK,
            FOUND_CODES,
        ),
    },
    "/v1/admin/webhooks/endpoints/{endpoint_id}/rotate-secret": {
        "post": _op(
            "rotateWebhookSecret",
            "Rotate an endpoint's signing secret",
            "A new secret, in this answer only; the replaced one signs beside it (a second "
            "v1 signature) for keep_previous_s (default one day).",
            answer(200, "WebhookEndpointWithSecret", "the endpoint and its new secret"),
            (*FOUND_CODES, *BODY),
            body=json_body("WebhookSecretRotation", required=False),
        ),
    },
    "/v1/admin/webhooks/endpoints/{endpoint_id}/deliveries": {
        "get": _op(
            "listWebhookDeliveries",
            "List an endpoint's deliveries",
            "The endpoint's deliveries, newest first, with their status (pending, delivered, "
            "failed), attempts and last answer; `next_cursor` (null on the last page) asks "
            "for older ones.",
            answer(200, "WebhookDeliveryPage", "a page of deliveries"),
            FOUND_CODES,
            parameters=[
                {"name": "status", "in": "query", "schema": STATUS, "example": "failed"},
                {"name": "limit", "in": "query", "schema": limit("limit"), "example": 50},
                {"name": "cursor", "in": "query", "schema": NUMBER, "example": "42"},
            ],
        ),
    },
    "/v1/admin/webhooks/endpoints/{endpoint_id}/deliveries/{delivery_id}/replay": {
        "post": _op(
            "replayWebhookDelivery",
            "Send a delivery again",
            "Send the delivery again, whatever its status, with the same webhook-id; its "
            "maximum age counts from now. 409 webhook_endpoint_disabled while disabled.",
            answer(202, "WebhookDelivery", "queued to be sent again"),
            (*FOUND_CODES, "webhook_delivery_not_found", "webhook_endpoint_disabled"),
            parameters=[path("delivery_id", NUMBER)],
        ),
    },
    "/v1/admin/webhooks/endpoints/{endpoint_id}/replay": {
        "post": _op(
            "replayFailedWebhookDeliveries",
            "Send failed deliveries again",
            "Send again every failed delivery of the endpoint created at or after since_ms "
            "(epoch ms); answers how many.",
            answer(202, "WebhookReplayed", "queued to be sent again"),
            (*FOUND_CODES, *BODY, "webhook_endpoint_disabled"),
            body=json_body("WebhookReplayRequest"),
        ),
    },
}
