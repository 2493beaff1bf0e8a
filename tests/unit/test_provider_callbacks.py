"""engine.providers.parse_callback: reads a callback as sent, routes it by the key we minted, and
coerces nothing (the deciding script judges the values)."""

import time
from typing import Any

import orjson
import pytest

from engine.model import keys
from engine.model.holds import ProviderOutcome, ProviderReversal
from engine.model.signing import HEADER, BadSignature, sign
from engine.providers import BadCallback, Callback, SimulatorProvider, parse_callback

KEY = keys.charge_key("ev-a", "h1", "alice", "k1")


def message(kind: str = "charge.captured", **data: Any) -> dict[str, Any]:
    body = {
        "attempt_id": "att_1",
        "intent_id": "pi_1",
        "idempotency_key": KEY,
        "amount": 4500,
        "currency": "EUR",
        "status": "captured",
        "metadata": {"event_id": "ev-a", "hold_id": "h1", "charge_id": KEY},
    }
    body.update(data)
    return {"id": "evt_1", "type": kind, "data": body}


def test_a_capture_is_read_field_by_field() -> None:
    parsed = parse_callback(message())
    assert parsed.event_id == "ev-a"
    assert parsed.message == ProviderOutcome(
        "evt_1", KEY, "att_1", "pi_1", "CAPTURED", "captured", 4500, "EUR", "ev-a", "h1", KEY
    )


def test_our_key_routes_the_message_whatever_its_metadata_says() -> None:
    parsed = parse_callback(message(metadata={"event_id": "ev-b"}))
    assert parsed.event_id == "ev-a"  # the script then sees meta_event ev-b: a mismatch
    assert isinstance(parsed.message, ProviderOutcome) and parsed.message.meta_event == "ev-b"
    foreign = parse_callback(message(idempotency_key="their-key", metadata={"event_id": "ev-b"}))
    assert foreign.event_id == "ev-b"  # a key we did not mint: only then the metadata routes


@pytest.mark.parametrize("amount", ["4500", 4500.0, -5, True, None])
def test_an_amount_that_is_not_an_integer_is_never_coerced(amount: object) -> None:
    parsed = parse_callback(message(amount=amount))
    assert isinstance(parsed.message, ProviderOutcome) and parsed.message.amount is None


@pytest.mark.parametrize(
    ("kind", "status", "want"),
    [
        ("refund.succeeded", "succeeded", "REFUND"),
        ("charge.dispute.created", "needs_response", "DISPUTE_OPENED"),
        ("charge.dispute.closed", "won", "DISPUTE_WON"),
        ("charge.dispute.closed", "lost", "DISPUTE_LOST"),
    ],
)
def test_money_moved_after_a_capture_is_a_reversal(kind: str, status: str, want: str) -> None:
    parsed = parse_callback(message(kind, status=status))
    assert isinstance(parsed.message, ProviderReversal) and parsed.message.kind == want


@pytest.mark.parametrize(
    "event",
    [
        [],
        {"id": "evt_1", "type": "charge.captured"},
        message(metadata="nope"),
        message("charge.exploded"),
        message("charge.dispute.closed", status="pending"),
        message(idempotency_key=7),
        message(idempotency_key="their-key", metadata={}),
        message(attempt_id="bad attempt id"),
    ],
)
def test_an_unreadable_callback_is_refused(event: Any) -> None:
    with pytest.raises(BadCallback):
        parse_callback(event)


async def test_the_simulator_adapter_verifies_before_it_reads() -> None:
    """Signature first (either secret of a rollover), over the exact bytes; then JSON."""
    provider = SimulatorProvider("http://sim", callback_secrets=("s" * 32, "p" * 32))
    body = orjson.dumps(message())
    now = int(time.time())
    try:
        for secret in ("s" * 32, "p" * 32):
            parsed = await provider.parse_callback(body, {HEADER: sign(secret, body, now)})
            assert isinstance(parsed, Callback) and parsed.event_id == "ev-a"
        refused = [
            {HEADER: sign("x" * 32, body, now)},
            {HEADER: sign("s" * 32, body, now - 3600)},
            {},
        ]
        for headers in refused:
            with pytest.raises(BadSignature):
                await provider.parse_callback(body, headers)
        with pytest.raises(BadCallback):
            await provider.parse_callback(b"{nope", {HEADER: sign("s" * 32, b"{nope", now)})
    finally:
        await provider.aclose()
