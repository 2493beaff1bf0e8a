"""Provider callback ingestion: signature first, raw body kept, then one script decides.

At-least-once in, process-once effect: a duplicate is answered 200 with the recorded decision;
we answer 5xx only when we could not record the callback (so the provider retries).

Authenticated is not believed: this module only reads the message's fields (never coercing a
wrong type into a right one); the deciding script checks every one of them against the charge
we created (ADR 0014). A message is routed by the charge key we minted (it names its event), so
metadata that names another event cannot make one event act on another event's money."""

import time
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from api.context import ctx, endpoint
from api.errors import ApiError
from api.responses import json_response, read_body
from engine import keys
from engine.holds import OutcomeResult, ProviderOutcome, ProviderReversal
from engine.signing import HEADER, BadSignature, verify

# Message type -> what the charge_outcome_v2 script is told the type says.
OUTCOMES = {"charge.captured": "CAPTURED", "charge.declined": "DECLINED", "charge.failed": "FAILED"}
# Money the provider moved after a capture -> charge_reversal kind. A closed dispute's kind
# comes from its status (won or lost).
REVERSALS = {"refund.succeeded": "REFUND", "charge.dispute.created": "DISPUTE_OPENED"}
DISPUTE_CLOSED = {"won": "DISPUTE_WON", "lost": "DISPUTE_LOST"}
RAW_CALLBACKS_MAX = 1_000_000  # approximate cap of the raw callback stream per event


def _field(data: dict[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not keys.valid_id(value):
        raise ApiError(400, "invalid_request", f"callback field {name} missing or malformed")
    return value


def _key(data: dict[str, Any]) -> str:
    value = data.get("idempotency_key")
    if not isinstance(value, str) or not keys.valid_charge_id(value):
        raise ApiError(400, "invalid_request", "callback idempotency_key missing or malformed")
    return value


def _text(data: dict[str, Any], name: str) -> str:
    """An optional short string as the provider sent it ("" when absent or not a string)."""
    value = data.get(name)
    return value[:64] if isinstance(value, str) else ""


def _amount(data: dict[str, Any]) -> int | None:
    value = data.get("amount")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53:
        return None  # "1000", 1000.0, -5, missing: never coerced; the script calls it a mismatch
    return value


def _meta(metadata: dict[str, Any], name: str) -> str:
    value = metadata.get(name)
    return value if isinstance(value, str) and keys.valid_charge_id(value) else ""


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
    if kind not in OUTCOMES and kind not in REVERSALS and kind != "charge.dispute.closed":
        raise ApiError(400, "invalid_request", f"unknown callback type {kind!r}")
    key = _key(data)
    meta_event = _meta(metadata, "event_id")
    # Our key names its event; only a key we did not mint falls back to the metadata.
    event_id = keys.event_of_charge_key(key) or meta_event
    if not event_id:
        raise ApiError(400, "invalid_request", "callback names no event (key or metadata)")
    attempt_id = _field(data, "attempt_id")
    # Keep the raw callback for replay and audit before acting on it.
    await c.store.keep_raw_callback(event_id, provider_event_id, raw, RAW_CALLBACKS_MAX)
    result: OutcomeResult
    if kind in OUTCOMES:
        result = await c.store.apply_outcome(
            event_id,
            ProviderOutcome(
                provider_event_id,
                key,
                attempt_id,
                _field(data, "intent_id"),
                OUTCOMES[kind],
                status=_text(data, "status"),
                amount=_amount(data),
                currency=_text(data, "currency"),
                meta_event=meta_event or "-",  # "-": the metadata named no event at all
                meta_hold=_meta(metadata, "hold_id"),
                meta_charge=_meta(metadata, "charge_id"),
            ),
        )
        c.metrics.outcomes.labels(result.decision, str(result.first_seen).lower()).inc()
    else:
        if kind == "charge.dispute.closed":
            reversal_kind = DISPUTE_CLOSED.get(_text(data, "status"))
            if reversal_kind is None:
                raise ApiError(400, "invalid_request", "a closed dispute's status is won or lost")
        else:
            reversal_kind = REVERSALS[kind]
        result = await c.store.apply_reversal(
            event_id,
            ProviderReversal(
                provider_event_id,
                key,
                attempt_id,
                reversal_kind,
                _amount(data),
                _text(data, "currency"),
                meta_event or "-",
            ),
        )
        c.metrics.decisions.labels(f"reversal_{result.decision.lower()}").inc()
    return json_response(
        {
            "decision": result.decision,
            "duplicate": not result.first_seen,
            "charge_state": result.charge_state,
            "problems": result.problems or None,
        }
    )
