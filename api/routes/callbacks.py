"""Provider callback ingestion: signature first, raw body kept, then one script decides.

At-least-once in, process-once effect: a duplicate is answered 200 with the recorded decision;
we answer 5xx only when we could not record the callback (so the provider retries)."""

import time
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from api.context import ctx, endpoint
from api.errors import ApiError
from api.responses import json_response, read_body
from engine import keys
from engine.holds import ProviderOutcome
from engine.signing import HEADER, BadSignature, verify

OUTCOMES = {"charge.captured": "CAPTURED", "charge.declined": "DECLINED", "charge.failed": "FAILED"}
RAW_CALLBACKS_MAX = 1_000_000  # approximate cap of the raw callback stream per event


def _field(data: dict[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not keys.valid_id(value):
        raise ApiError(400, "invalid_request", f"callback field {name} missing or malformed")
    return value


@endpoint("provider_callback")
async def provider_callback(request: Request) -> Response:
    c = ctx(request)
    raw = await read_body(request, c.settings.body_max_bytes)
    try:
        verify(
            c.settings.webhook_secret,
            raw,
            request.headers.get(HEADER),
            time.time(),
            c.settings.webhook_tolerance_s,
        )
    except BadSignature as exc:
        raise ApiError(401, "bad_signature", str(exc)) from None
    try:
        event = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ApiError(400, "invalid_request", "callback is not JSON") from None
    if not isinstance(event, dict) or not isinstance(event.get("data"), dict):
        raise ApiError(400, "invalid_request", "callback must be an object with data")
    data: dict[str, Any] = event["data"]
    metadata = data.get("metadata")
    if not isinstance(metadata, dict):
        raise ApiError(400, "invalid_request", "callback data.metadata must be an object")
    provider_event_id = _field(event, "id")
    kind = event.get("type")
    event_id = _field(metadata, "event_id")
    charge_id = _field(data, "idempotency_key")
    # Keep the raw callback for replay and audit before acting on it.
    await c.store.keep_raw_callback(event_id, provider_event_id, raw, RAW_CALLBACKS_MAX)
    if kind in OUTCOMES:
        result = await c.store.apply_outcome(
            event_id,
            ProviderOutcome(
                provider_event_id,
                charge_id,
                _field(data, "attempt_id"),
                _field(data, "intent_id"),
                OUTCOMES[kind],
            ),
        )
        c.metrics.outcomes.labels(result.decision, str(result.first_seen).lower()).inc()
        return json_response(
            {
                "decision": result.decision,
                "duplicate": not result.first_seen,
                "charge_state": result.charge_state,
            }
        )
    if kind == "refund.succeeded":
        code = await c.store.refund_result(event_id, charge_id, refunded=True)
        c.metrics.decisions.labels(f"refund_{code.lower()}").inc()
        return json_response({"decision": code})
    raise ApiError(400, "invalid_request", f"unknown callback type {kind!r}")
