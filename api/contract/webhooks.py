"""Merchant webhooks (api/routes/webhooks.py, ADR 0024): what an admin sends to register, rotate
and replay an endpoint (each field bounded by api/validate.py LIMITS; the handler accepts exactly
the fields declared), and what the API answers: an endpoint, its deliveries and their health."""

from typing import Annotated, Any, Literal, NotRequired, TypedDict

from msgspec import Meta

from api.contract.atoms import EVENT_ID, AtMs, limited, named
from engine.model.webhooks import EVENT_TYPES

EventType = Annotated[str, named("WebhookEventType")]
ENDPOINT_ID = "ep_5b1e0c7d9a3f2e4c6b8d0a1f"
URL = "https://shop.example.com/hooks/onsale"
TYPES = ["order.confirmed", "order.refunded"]


class WebhookEndpointCreate(TypedDict):
    url: Annotated[str, limited("url", description="https (http only where allowed)")]
    description: NotRequired[Annotated[str, limited("description")]]
    event_types: NotRequired[
        Annotated[
            list[EventType],
            limited(
                "event_types",
                unique=True,
                description="the notification types sent to it (absent: all of them)",
            ),
        ]
    ]


class WebhookSecretRotation(TypedDict):
    keep_previous_s: NotRequired[Annotated[int, limited("keep_previous_s")]]


class WebhookReplayRequest(TypedDict):
    since_ms: Annotated[int, limited("since_ms")]


class WebhookEndpoint(TypedDict):
    endpoint_id: str
    url: str
    description: str
    event_types: list[EventType]
    enabled: bool
    disabled_reason: str | None
    created_at_ms: AtMs
    updated_at_ms: AtMs
    previous_secret_until_ms: Annotated[
        int | None, Meta(description="while a rotated-out secret still signs beside the new one")
    ]


class WebhookEndpointWithSecret(WebhookEndpoint):
    secret: Annotated[str, Meta(description="shown in this answer only")]


class WebhookEndpointHealth(TypedDict):
    """An endpoint's deliveries as the ops dashboard shows them: failing when any failed, or
    when the oldest pending one has waited long."""

    failed: Annotated[int, Meta(description="deliveries that gave up (replay them)")]
    pending: Annotated[int, Meta(description="deliveries still being tried")]
    oldest_pending_ms: Annotated[int, Meta(description="how long the oldest pending has waited")]
    last_error: Annotated[str | None, Meta(description="the last failed attempt's error")]
    last_status: Annotated[int | None, Meta(description="its HTTP status (null: no answer)")]


class WebhookEndpointListed(WebhookEndpoint):
    deliveries: WebhookEndpointHealth


class WebhookEndpointList(TypedDict):
    endpoints: list[WebhookEndpointListed]


class WebhookEndpointDeleted(TypedDict):
    endpoint_id: str
    deleted: bool


class WebhookDelivery(TypedDict):
    delivery_id: int
    webhook_id: Annotated[str, Meta(description="the webhook-id header it is sent with")]
    event_type: EventType
    event_id: str
    decision_id: str
    status: Literal["pending", "delivered", "failed"]
    attempts: int
    created_at_ms: AtMs
    last_attempt_at_ms: AtMs | None
    next_attempt_at_ms: AtMs | None
    last_status: Annotated[int | None, Meta(description="the endpoint's last HTTP status")]
    last_error: str | None
    delivered_at_ms: AtMs | None


class WebhookDeliveryPage(TypedDict):
    endpoint_id: str
    deliveries: list[WebhookDelivery]
    next_cursor: Annotated[
        Annotated[str, Meta(pattern="^[0-9]{1,16}$")] | None,
        Meta(description="older ones; null: no more"),
    ]


class WebhookReplayed(TypedDict):
    endpoint_id: str
    replayed: Annotated[int, Meta(description="deliveries to send again")]


ENDPOINT: WebhookEndpoint = {
    "endpoint_id": ENDPOINT_ID,
    "url": URL,
    "description": "order desk",
    "event_types": TYPES,
    "enabled": True,
    "disabled_reason": None,
    "created_at_ms": 1767261000000,
    "updated_at_ms": 1767261000000,
    "previous_secret_until_ms": None,
}
DELIVERY: WebhookDelivery = {
    "delivery_id": 42,
    "webhook_id": "msg_2iv4ppqekbmxcrcqy7irpaxfeugoghkg",
    "event_type": "order.confirmed",
    "event_id": EVENT_ID,
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
HEALTH: WebhookEndpointHealth = {
    "failed": 2,
    "pending": 1,
    "oldest_pending_ms": 95000,
    "last_error": "connect timeout",
    "last_status": None,
}
LISTED: WebhookEndpointListed = {**ENDPOINT, "deliveries": HEALTH}
SECRET = "whsec_rjsbbn1HK2QLbBIYFYn0u0/+jael5YNQyXgFLZAQ6cg="
EVENT_TYPE_SCHEMA = {"type": "string", "enum": list(EVENT_TYPES), "example": EVENT_TYPES[0]}
# Requests whose unknown fields the handler refuses (400): additionalProperties false.
CLOSED = (WebhookEndpointCreate, WebhookSecretRotation, WebhookReplayRequest)

# Each request and answer and its example (api/contract/document.py).
EXAMPLES: dict[type, Any] = {
    WebhookEndpointCreate: WebhookEndpointCreate(
        url=URL, description="order desk", event_types=TYPES
    ),
    WebhookSecretRotation: WebhookSecretRotation(keep_previous_s=3600),
    WebhookReplayRequest: WebhookReplayRequest(since_ms=1767261000000),
    WebhookEndpoint: ENDPOINT,
    WebhookEndpointWithSecret: WebhookEndpointWithSecret(**ENDPOINT, secret=SECRET),
    WebhookEndpointHealth: HEALTH,
    WebhookEndpointListed: LISTED,
    WebhookEndpointList: WebhookEndpointList(endpoints=[LISTED]),
    WebhookEndpointDeleted: WebhookEndpointDeleted(endpoint_id=ENDPOINT_ID, deleted=True),
    WebhookDelivery: DELIVERY,
    WebhookDeliveryPage: WebhookDeliveryPage(
        endpoint_id=ENDPOINT_ID, deliveries=[DELIVERY], next_cursor=None
    ),
    WebhookReplayed: WebhookReplayed(endpoint_id=ENDPOINT_ID, replayed=3),
}
