"""The merchant webhook operations of the OpenAPI document (api/routes/webhooks.py, ADR 0024),
with their request and answer schemas; api/openapi.py adds them to its paths and components.
Limits come from api/validate.py LIMITS."""

from typing import Any

from api.contract.derive import nullable
from api.openapi_parts import (
    ADMIN,
    AT_MS,
    BODY,
    BOOL,
    INT,
    STR,
    answer,
    array,
    json_body,
    limit,
    operation,
    path,
    record,
    ref,
)
from engine.model.webhooks import EVENT_TYPES

UNAVAILABLE = "503 webhooks_unavailable: the ledger database is not configured or not reachable."
ENDPOINT = [path("endpoint_id")]
NUMBER = {"type": "string", "pattern": "^[0-9]{1,16}$"}
COMMON_CODES = (*ADMIN, "webhooks_unavailable")
FOUND_CODES = (*COMMON_CODES, "invalid_request", "not_found", "webhook_endpoint_not_found")
EVENT_TYPE = ref("WebhookEventType")
STATUS = {"type": "string", "enum": ["pending", "delivered", "failed"]}
ENDPOINT_ID = "ep_5b1e0c7d9a3f2e4c6b8d0a1f"
SECRET = "whsec_rjsbbn1HK2QLbBIYFYn0u0/+jael5YNQyXgFLZAQ6cg="

ENDPOINT_PROPERTIES: dict[str, Any] = {
    "endpoint_id": STR,
    "url": STR,
    "description": STR,
    "event_types": array(EVENT_TYPE),
    "enabled": BOOL,
    "disabled_reason": nullable(STR),
    "created_at_ms": AT_MS,
    "updated_at_ms": AT_MS,
    "previous_secret_until_ms": nullable(
        {**AT_MS, "description": "while a rotated-out secret still signs beside the new one"}
    ),
}
ENDPOINT_EXAMPLE = {
    "endpoint_id": ENDPOINT_ID,
    "url": "https://shop.example.com/hooks/onsale",
    "description": "order desk",
    "event_types": ["order.confirmed", "order.refunded"],
    "enabled": True,
    "disabled_reason": None,
    "created_at_ms": 1767261000000,
    "updated_at_ms": 1767261000000,
    "previous_secret_until_ms": None,
}
DELIVERY_EXAMPLE = {
    "delivery_id": 42,
    "webhook_id": "msg_2iv4ppqekbmxcrcqy7irpaxfeugoghkg",
    "event_type": "order.confirmed",
    "event_id": "spring-gala",
    "decision_id": "hold:9f2c4e1ab7d35f60c8e21d4b6a9f0e73:1748:CONFIRMED",
    "status": "delivered",
    "attempts": 1,
    "created_at_ms": 1767261621000,
    "last_attempt_at_ms": 1767261621040,
    "next_attempt_at_ms": None,
    "last_status": 200,
    "last_error": None,
    "delivered_at_ms": 1767261621050,
}
HEALTH_EXAMPLE = {
    "failed": 2,
    "pending": 1,
    "oldest_pending_ms": 95000,
    "last_error": "connect timeout",
    "last_status": None,
}
WEBHOOK_SCHEMAS: dict[str, dict[str, Any]] = {
    "WebhookEventType": {"type": "string", "enum": list(EVENT_TYPES), "example": EVENT_TYPES[0]},
    "WebhookEndpointCreate": record(
        {
            "url": limit("url", description="https (http only where allowed)"),
            "description": limit("description"),
            "event_types": limit(
                "event_types",
                uniqueItems=True,
                items=EVENT_TYPE,
                description="the notification types sent to it (absent: all of them)",
            ),
        },
        {
            "url": "https://shop.example.com/hooks/onsale",
            "description": "order desk",
            "event_types": ["order.confirmed", "order.refunded"],
        },
        optional=("description", "event_types"),
        closed=True,
    ),
    "WebhookSecretRotation": record(
        {"keep_previous_s": limit("keep_previous_s")},
        {"keep_previous_s": 3600},
        optional=("keep_previous_s",),
        closed=True,
    ),
    "WebhookReplayRequest": record(
        {"since_ms": limit("since_ms")}, {"since_ms": 1767261000000}, closed=True
    ),
    "WebhookEndpoint": record(ENDPOINT_PROPERTIES, ENDPOINT_EXAMPLE),
    "WebhookEndpointWithSecret": record(
        {**ENDPOINT_PROPERTIES, "secret": {**STR, "description": "shown in this answer only"}},
        {**ENDPOINT_EXAMPLE, "secret": SECRET},
    ),
    "WebhookEndpointHealth": record(
        {
            "failed": {**INT, "description": "deliveries that gave up (replay them)"},
            "pending": {**INT, "description": "deliveries still being tried"},
            "oldest_pending_ms": {**INT, "description": "how long the oldest pending has waited"},
            "last_error": nullable({**STR, "description": "the last failed attempt's error"}),
            "last_status": nullable({**INT, "description": "its HTTP status (null: no answer)"}),
        },
        HEALTH_EXAMPLE,
        description="An endpoint's deliveries as the ops dashboard shows them: failing when any "
        "failed, or when the oldest pending one has waited long.",
    ),
    "WebhookEndpointListed": record(
        {**ENDPOINT_PROPERTIES, "deliveries": ref("WebhookEndpointHealth")},
        {**ENDPOINT_EXAMPLE, "deliveries": HEALTH_EXAMPLE},
    ),
    "WebhookEndpointList": record(
        {"endpoints": array(ref("WebhookEndpointListed"))},
        {"endpoints": [{**ENDPOINT_EXAMPLE, "deliveries": HEALTH_EXAMPLE}]},
    ),
    "WebhookEndpointDeleted": record(
        {"endpoint_id": STR, "deleted": BOOL}, {"endpoint_id": ENDPOINT_ID, "deleted": True}
    ),
    "WebhookDelivery": record(
        {
            "delivery_id": INT,
            "webhook_id": {**STR, "description": "the webhook-id header it is sent with"},
            "event_type": EVENT_TYPE,
            "event_id": STR,
            "decision_id": STR,
            "status": STATUS,
            "attempts": INT,
            "created_at_ms": AT_MS,
            "last_attempt_at_ms": nullable(AT_MS),
            "next_attempt_at_ms": nullable(AT_MS),
            "last_status": nullable({**INT, "description": "the endpoint's last HTTP status"}),
            "last_error": nullable(STR),
            "delivered_at_ms": nullable(AT_MS),
        },
        DELIVERY_EXAMPLE,
    ),
    "WebhookDeliveryPage": record(
        {
            "endpoint_id": STR,
            "deliveries": array(ref("WebhookDelivery")),
            "next_cursor": nullable({**NUMBER, "description": "older ones; null: no more"}),
        },
        {"endpoint_id": ENDPOINT_ID, "deliveries": [DELIVERY_EXAMPLE], "next_cursor": None},
    ),
    "WebhookReplayed": record(
        {"endpoint_id": STR, "replayed": {**INT, "description": "deliveries to send again"}},
        {"endpoint_id": ENDPOINT_ID, "replayed": 3},
    ),
}


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
            parameters=ENDPOINT,
        ),
        "delete": _op(
            "deleteWebhookEndpoint",
            "Delete a webhook endpoint",
            "Nothing more is written or sent for it; its delivery log is kept.",
            answer(200, "WebhookEndpointDeleted", "deleted"),
            FOUND_CODES,
            parameters=ENDPOINT,
        ),
    },
    "/v1/admin/webhooks/endpoints/{endpoint_id}/disable": {
        "post": _op(
            "disableWebhookEndpoint",
            "Disable a webhook endpoint",
            "No delivery is written or sent for it until it is enabled; pending ones wait.",
            ENDPOINT_OK,
            FOUND_CODES,
            parameters=ENDPOINT,
        ),
    },
    "/v1/admin/webhooks/endpoints/{endpoint_id}/enable": {
        "post": _op(
            "enableWebhookEndpoint",
            "Enable a webhook endpoint",
            "Deliveries resume.",
            ENDPOINT_OK,
            FOUND_CODES,
            parameters=ENDPOINT,
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
            parameters=ENDPOINT,
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
                *ENDPOINT,
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
            parameters=[*ENDPOINT, path("delivery_id", NUMBER)],
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
            parameters=ENDPOINT,
            body=json_body("WebhookReplayRequest"),
        ),
    },
}
