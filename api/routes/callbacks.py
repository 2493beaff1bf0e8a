"""Provider callback ingestion: signature first, raw body kept, then one script decides.

At-least-once in, process-once effect: a duplicate is answered 200 with the recorded decision,
beside the charge's and the hold's states now; we answer 5xx only when we could not record the
callback (so the provider retries).

The deployment's provider adapter verifies the signature over the exact bytes received and reads
the message (`Provider.parse_callback`, ADR 0023); authenticated is not believed: it only reads
the message's fields and routes it by the charge key we minted; the deciding script checks every
field against the charge we created (ADR 0014). An authentic message about nothing the engine
follows (a dispute inquiry, a pending refund) is answered 200 `IGNORED` and applied never."""

import contextlib

from starlette.requests import Request
from starlette.responses import Response

from api.context import ctx, endpoint
from api.contract import holds as answers
from api.durable import wait_durable
from api.errors import ApiError
from api.refund_now import decided_refund, refund_after
from api.responses import json_response, read_body
from engine.model.errors import HoldNotFound
from engine.model.holds import OutcomeResult, ProviderOutcome
from engine.model.signing import BadSignature
from engine.providers import BadCallback, Ignored, ProviderTimeout
from engine.store import Store

RAW_CALLBACKS_MAX = 1_000_000  # approximate cap of the raw callback stream per event


@endpoint("provider_callback")
async def provider_callback(request: Request) -> Response:
    c = ctx(request)
    raw = await read_body(request, c.settings.body_max_bytes)
    try:
        parsed = await c.provider.parse_callback(raw, request.headers)
    except BadSignature as exc:
        raise ApiError(401, "bad_signature", str(exc)) from None
    except BadCallback as exc:
        raise ApiError(400, "invalid_request", str(exc)) from None
    except ProviderTimeout:  # the provider could not say whose money moved: it retries
        raise ApiError(503, "provider_not_answering", "the provider did not answer") from None
    if isinstance(parsed, Ignored):
        c.metrics.decisions.labels("callback_ignored").inc()
        ignored: answers.CallbackAnswer = {
            "decision": "IGNORED", "duplicate": False, "reason": parsed.reason
        }  # fmt: skip
        return json_response(ignored)
    message = parsed.message
    # Keep the raw callback for replay and audit before acting on it.
    await c.store.notes.keep_raw_callback(
        parsed.event_id, message.provider_event_id, raw, RAW_CALLBACKS_MAX
    )
    result: OutcomeResult
    if isinstance(message, ProviderOutcome):
        result = await c.store.apply_outcome(parsed.event_id, message)
        c.metrics.outcomes.labels(result.decision, str(result.first_seen).lower()).inc()
        # A sale is acknowledged only once it is durable: until then the provider retries,
        # and its retry is a duplicate answered from the same record (ADR 0016).
        told = result.decision == "CONFIRMED" and c.settings.confirm_after == "ledger"
        if told and not await wait_durable(
            c.store, parsed.event_id, result.hold_id, c.settings.durable_wait_ms
        ):
            raise ApiError(503, "not_yet_durable", "the sale is not in the ledger yet")
    else:
        result = await c.store.apply_reversal(parsed.event_id, message)
        c.metrics.decisions.labels(f"reversal_{result.decision.lower()}").inc()
    now = await states_now(c.store, parsed.event_id, result)
    body: answers.CallbackAnswer = {
        "decision": result.decision,
        "duplicate": not result.first_seen,
        "charge_state": now["charge_state"],
        "hold_state": now["hold_state"],
        "recorded": {"charge_state": result.charge_state, "hold_state": result.hold_state},
        "problems": result.problems or None,
    }
    answer = json_response(body)
    if decided_refund(result):
        return refund_after(answer, c, parsed.event_id, result.charge_id)
    return answer


async def states_now(store: Store, event_id: str, result: OutcomeResult) -> answers.StatesRecorded:
    """The charge's and the hold's states now. A duplicate is answered with the decision
    recorded the first time, and its `recorded` states are that moment's: money or the seat
    may have moved since (a refund, a dispute), which these say."""
    if result.first_seen:
        return {"charge_state": result.charge_state, "hold_state": result.hold_state}
    charges = await store.read.charges(event_id, [result.charge_id]) if result.charge_id else []
    hold_state = None
    if result.hold_id:
        with contextlib.suppress(HoldNotFound):
            hold_state = (await store.read.hold(event_id, result.hold_id)).state
    return {"charge_state": charges[0].state if charges else None, "hold_state": hold_state}
