"""Merchant webhooks, admin side (ADR 0024): register endpoints (the signing secret is shown
once), list, disable, enable, delete, rotate a secret; read an endpoint's delivery log (newest
first, by cursor); replay one delivery or every failed one since a time. Admin token required,
as every admin route. Deliveries are written by the ledger writer and sent by the sender
(persistence/notify.py, persistence/webhook_sender.py)."""

import secrets
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from api.context import ctx, endpoint, path_id
from api.contract import webhooks as hooks
from api.contract.atoms import fields_of
from api.errors import ApiError
from api.responses import json_response, read_json
from api.validate import LIMITS, items, obj, only, query_integer, text, whole
from api.webhooks_db import WebhookDb
from engine.model.webhooks import EVENT_TYPES, new_secret

ENDPOINTS_MAX = 100  # live endpoints per deployment
ROTATION_KEEP_S = 86_400  # a replaced secret signs beside the new one this long by default
CREATE_FIELDS = fields_of(hooks.WebhookEndpointCreate)
ROTATE_FIELDS = fields_of(hooks.WebhookSecretRotation)
REPLAY_FIELDS = fields_of(hooks.WebhookReplayRequest)
STATUSES = ("pending", "delivered", "failed")  # a delivery's, as the status= filter names them
PAGE_DEFAULT = 50
assert LIMITS["limit"].high >= PAGE_DEFAULT


def db(request: Request) -> WebhookDb:
    """The webhook store; also checks the caller is an admin (first: a stranger learns nothing
    about the store, not even that it is down)."""
    c = ctx(request)
    c.require_admin(request)
    found: WebhookDb | None = getattr(request.app.state, "webhooks", None)
    if found is None:
        raise ApiError(503, "webhooks_unavailable", "webhooks are not configured here")
    return found


def ms(at: datetime | None) -> int | None:
    return None if at is None else at_ms(at)


def at_ms(at: datetime) -> int:
    """A time the ledger always has (a NOT NULL column), in ms since the epoch."""
    return int(at.timestamp() * 1000)


def endpoint_view(row: Any) -> hooks.WebhookEndpoint:
    rotating = row["previous_until"] is not None and row["previous_until"] > row["now"]
    return {
        "endpoint_id": row["endpoint_id"],
        "url": row["url"],
        "description": row["description"],
        "event_types": list(row["event_types"]),
        "enabled": row["enabled"],
        "disabled_reason": row["disabled_reason"] or None,
        "created_at_ms": at_ms(row["created_at"]),
        "updated_at_ms": at_ms(row["updated_at"]),
        "previous_secret_until_ms": ms(row["previous_until"]) if rotating else None,
    }


def delivery_view(row: Any) -> hooks.WebhookDelivery:
    pending = row["status"] == "pending"
    return {
        "delivery_id": row["delivery_id"],
        "webhook_id": row["message_id"],
        "event_type": row["event_type"],
        "event_id": row["event_id"],
        "decision_id": row["decision_id"],
        "status": row["status"],
        "attempts": row["attempts"],
        "created_at_ms": at_ms(row["created_at"]),
        "last_attempt_at_ms": ms(row["last_attempt_at"]),
        "next_attempt_at_ms": ms(row["next_attempt_at"]) if pending else None,
        "last_status": row["last_status"],
        "last_error": row["last_error"] or None,
        "delivered_at_ms": ms(row["delivered_at"]),
    }


def endpoint_url(body: dict[str, Any], allow_http: bool) -> str:
    url = text(body, "url")
    parts = urlsplit(url)
    schemes = ("https", "http") if allow_http else ("https",)
    problem = ""
    if parts.scheme not in schemes or not parts.hostname:
        problem = f"url must be an absolute {' or '.join(schemes)} URL"
    elif parts.username or parts.password or parts.fragment:
        problem = "url must carry no credentials and no fragment"
    if problem:
        raise ApiError(400, "invalid_webhook_url", problem)
    return url


def event_types(body: dict[str, Any]) -> list[str]:
    """The types the endpoint wants, in the order EVENT_TYPES lists them (absent: all)."""
    if "event_types" not in body:
        return list(EVENT_TYPES)
    wanted = items(body, "event_types")
    unknown = [t for t in wanted if t not in EVENT_TYPES]
    if unknown:
        raise ApiError(
            400,
            "unknown_event_type",
            f"event_types: {str(unknown[0])[:64]!r} is not one of {', '.join(EVENT_TYPES)}",
        )
    if len(set(wanted)) != len(wanted):
        raise ApiError(400, "invalid_request", "event_types must not repeat a type")
    return [t for t in EVENT_TYPES if t in wanted]


async def _body(request: Request, allowed: frozenset[str], where: str) -> dict[str, Any]:
    body = obj(await read_json(request, ctx(request).settings.body_max_bytes, allow_empty=True))
    only(body, allowed, where)
    return body


@endpoint("admin_webhook_create")
async def create_endpoint(request: Request) -> Response:
    store = db(request)
    body = await _body(request, CREATE_FIELDS, "endpoint")
    url = endpoint_url(body, store.settings.merchant_webhook_http)
    description, types = text(body, "description", ""), event_types(body)
    endpoint_id, secret = f"ep_{secrets.token_hex(12)}", new_secret()
    row = await store.fetchrow(
        "create_endpoint", endpoint_id, url, description, types, secret, ENDPOINTS_MAX
    )
    if row is None:
        raise ApiError(
            409, "too_many_webhook_endpoints", f"at most {ENDPOINTS_MAX} endpoints; delete one"
        )
    created: hooks.WebhookEndpointWithSecret = {**endpoint_view(row), "secret": secret}
    return json_response(created, 201)


@endpoint("admin_webhook_list")
async def list_endpoints(request: Request) -> Response:
    """Every live endpoint, each with its delivery health (`deliveries`): what the ops
    dashboard shows as failing."""
    store = db(request)
    rows = await store.fetch("endpoints")
    health = {r["endpoint_id"]: health_view(r) for r in await store.fetch("endpoint_health")}
    quiet: hooks.WebhookEndpointHealth = {
        "failed": 0,
        "pending": 0,
        "oldest_pending_ms": 0,
        "last_error": None,
        "last_status": None,
    }  # fmt: skip  (an endpoint made between the two reads)
    answer: hooks.WebhookEndpointList = {
        "endpoints": [
            {**endpoint_view(r), "deliveries": health.get(r["endpoint_id"], quiet)} for r in rows
        ]
    }
    return json_response(answer)


def health_view(row: Any) -> hooks.WebhookEndpointHealth:
    return {
        "failed": row["failed"],
        "pending": row["pending"],
        "oldest_pending_ms": row["oldest_pending_ms"],
        "last_error": row["last_error"] or None,
        "last_status": row["last_status"],
    }


async def _live(store: WebhookDb, request: Request) -> Any:
    row = await store.fetchrow("endpoint", path_id(request, "endpoint_id"))
    if row is None:
        raise ApiError(404, "webhook_endpoint_not_found", "no such endpoint")
    return row


@endpoint("admin_webhook_get")
async def get_endpoint(request: Request) -> Response:
    return json_response(endpoint_view(await _live(db(request), request)))


async def _set_enabled(request: Request, enabled: bool) -> Response:
    row = await db(request).fetchrow("set_enabled", path_id(request, "endpoint_id"), enabled)
    if row is None:
        raise ApiError(404, "webhook_endpoint_not_found", "no such endpoint")
    return json_response(endpoint_view(row))


@endpoint("admin_webhook_disable")
async def disable_endpoint(request: Request) -> Response:
    """Nothing new is written for it and nothing is sent; its pending deliveries wait."""
    return await _set_enabled(request, False)


@endpoint("admin_webhook_enable")
async def enable_endpoint(request: Request) -> Response:
    return await _set_enabled(request, True)


@endpoint("admin_webhook_delete")
async def delete_endpoint(request: Request) -> Response:
    """Deleted: nothing more is written or sent; its delivery log is kept in the ledger."""
    gone = await db(request).fetchval("delete_endpoint", path_id(request, "endpoint_id"))
    if gone is None:
        raise ApiError(404, "webhook_endpoint_not_found", "no such endpoint")
    deleted: hooks.WebhookEndpointDeleted = {"endpoint_id": gone, "deleted": True}
    return json_response(deleted)


@endpoint("admin_webhook_rotate")
async def rotate_secret(request: Request) -> Response:
    """A new secret, shown once; the replaced one signs beside it for `keep_previous_s`."""
    store = db(request)
    body = await _body(request, ROTATE_FIELDS, "rotation")
    keep_s = whole(body, "keep_previous_s", ROTATION_KEEP_S)
    secret = new_secret()
    row = await store.fetchrow("rotate_secret", path_id(request, "endpoint_id"), secret, keep_s)
    if row is None:
        raise ApiError(404, "webhook_endpoint_not_found", "no such endpoint")
    rotated: hooks.WebhookEndpointWithSecret = {**endpoint_view(row), "secret": secret}
    return json_response(rotated)


def _cursor(raw: str | None) -> int:
    if raw is None:
        return 0
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 16) or int(raw) == 0:
        raise ApiError(400, "invalid_request", "cursor must be a next_cursor this API returned")
    return int(raw)


@endpoint("admin_webhook_deliveries")
async def list_deliveries(request: Request) -> Response:
    """The endpoint's deliveries, newest first: `next_cursor` asks for the older ones."""
    store = db(request)
    params = request.query_params
    status = params.get("status", "")
    if status not in ("", *STATUSES):
        raise ApiError(400, "invalid_request", f"status must be one of {', '.join(STATUSES)}")
    page = query_integer(params, "limit", PAGE_DEFAULT)
    cursor = _cursor(params.get("cursor"))
    live = await _live(store, request)
    rows = await store.fetch("deliveries", live["endpoint_id"], status, cursor, page + 1)
    more = len(rows) > page
    rows = rows[:page]
    answer: hooks.WebhookDeliveryPage = {
        "endpoint_id": live["endpoint_id"],
        "deliveries": [delivery_view(r) for r in rows],
        "next_cursor": str(rows[-1]["delivery_id"]) if more else None,
    }
    return json_response(answer)


async def _replayable(store: WebhookDb, request: Request) -> Any:
    live = await _live(store, request)
    if not live["enabled"]:
        raise ApiError(409, "webhook_endpoint_disabled", "enable the endpoint to replay to it")
    return live


@endpoint("admin_webhook_replay_one")
async def replay_delivery(request: Request) -> Response:
    """Send one delivery again (whatever its status), with the same webhook-id, as soon as the
    sender gets to it; its maximum age counts from now."""
    store = db(request)
    raw = str(request.path_params["delivery_id"])
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 16):
        raise ApiError(400, "invalid_request", "delivery_id must be a delivery's number")
    live = await _replayable(store, request)
    row = await store.fetchrow("replay_delivery", live["endpoint_id"], int(raw))
    if row is None:
        raise ApiError(404, "webhook_delivery_not_found", "no such delivery of this endpoint")
    return json_response(delivery_view(row), 202)


@endpoint("admin_webhook_replay_failed")
async def replay_failed(request: Request) -> Response:
    """Every failed delivery of the endpoint created at or after `since_ms` is sent again."""
    store = db(request)
    body = await _body(request, REPLAY_FIELDS, "replay")
    if "since_ms" not in body:
        raise ApiError(400, "invalid_request", "since_ms is required")
    since_ms = whole(body, "since_ms")
    live = await _replayable(store, request)
    count = await store.fetchval("replay_failed", live["endpoint_id"], since_ms)
    replayed: hooks.WebhookReplayed = {"endpoint_id": live["endpoint_id"], "replayed": count}
    return json_response(replayed, 202)


_EP = "/v1/admin/webhooks/endpoints"
ROUTES = [
    Route(_EP, create_endpoint, methods=["POST"]),
    Route(_EP, list_endpoints, methods=["GET"]),
    Route(_EP + "/{endpoint_id}", get_endpoint, methods=["GET"]),
    Route(_EP + "/{endpoint_id}", delete_endpoint, methods=["DELETE"]),
    Route(_EP + "/{endpoint_id}/disable", disable_endpoint, methods=["POST"]),
    Route(_EP + "/{endpoint_id}/enable", enable_endpoint, methods=["POST"]),
    Route(_EP + "/{endpoint_id}/rotate-secret", rotate_secret, methods=["POST"]),
    Route(_EP + "/{endpoint_id}/deliveries", list_deliveries, methods=["GET"]),
    Route(
        _EP + "/{endpoint_id}/deliveries/{delivery_id}/replay", replay_delivery, methods=["POST"]
    ),
    Route(_EP + "/{endpoint_id}/replay", replay_failed, methods=["POST"]),
]
