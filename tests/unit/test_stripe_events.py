"""The Stripe adapter reads Stripe's events as Stripe sends them (recorded fixtures shaped from
Stripe's published API description, tests/fixtures/stripe/), signed by the official library's
own signer: each maps to the engine's outcome or reversal, or is ignored; a forged, altered,
stale or unsigned one is refused before it is read."""

import copy
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import stripe

from engine.config.settings import StripeSettings
from engine.model.holds import ProviderOutcome, ProviderReversal
from engine.model.signing import BadSignature
from engine.providers import stripe_events as ev
from engine.providers.base import BadCallback, Callback, Ignored
from engine.providers.stripe_client import StripeProvider

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "stripe"
KEY = "ev-a~649148e68fda1d3e60be9cbe"
PI, CH, CH2 = (
    "pi_3QkRvB2eZvKYlo2C1a8bGx7Q",
    "ch_3QkRvB2eZvKYlo2C1uG2kLmN",
    "ch_3QkRvB2eZvKYlo2C0dC1nEqP",
)
SECRET = "whsec_test_Hq3vN8kZ2mX7rT4yB1cW6pL9"


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads((FIXTURES / name).read_bytes())
    return data


def stripe_api(request: httpx.Request) -> httpx.Response:
    """What Stripe answers the adapter's lookups: the intent and the charge of the fixtures."""
    objects = {
        f"/v1/payment_intents/{PI}": "payment_intent.json",
        f"/v1/charges/{CH}": "charge.json",
    }
    name = objects.get(request.url.path)
    if name is None:
        body = {"error": {"type": "invalid_request_error", "code": "resource_missing"}}
        return httpx.Response(404, json=body)
    return httpx.Response(200, content=(FIXTURES / name).read_bytes())


@pytest.fixture
async def provider() -> AsyncIterator[StripeProvider]:
    settings = StripeSettings("sk_test_fixture", SECRET, api_base="http://stripe.test")
    p = StripeProvider(settings, transport=httpx.MockTransport(stripe_api))
    yield p
    await p.aclose()


def signed(body: bytes, secret: str = SECRET, at: int | None = None) -> dict[str, str]:
    header = stripe.WebhookSignature.generate_signature_header(body.decode(), secret, at)
    return {"Stripe-Signature": header}


async def parse(provider: StripeProvider, event: dict[str, Any]) -> Callback | Ignored:
    body = orjson.dumps(event)
    return await provider.parse_callback(body, signed(body))


def outcome(name: str, kind: str, attempt: str, status: str, amount: int = 4500) -> ProviderOutcome:
    return ProviderOutcome(
        fixture(name)["id"], KEY, attempt, PI, kind, status, amount, "EUR", "ev-a", "h1", KEY
    )


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("event.payment_intent.succeeded.json", ("CAPTURED", CH, "captured")),
        ("event.payment_intent.payment_failed.declined.json", ("DECLINED", CH2, "declined")),
        ("event.payment_intent.payment_failed.error.json", ("FAILED", CH2, "failed")),
    ],
)
async def test_an_intents_outcome_is_read_field_by_field(
    provider: StripeProvider, name: str, want: tuple[str, str, str]
) -> None:
    parsed = await parse(provider, fixture(name))
    assert parsed == Callback("ev-a", outcome(name, *want))


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("event.charge.refunded.json", "REFUND"),
        ("event.charge.refund.updated.json", "REFUND"),
        ("event.charge.dispute.created.json", "DISPUTE_OPENED"),
        ("event.charge.dispute.closed.won.json", "DISPUTE_WON"),
        ("event.charge.dispute.closed.lost.json", "DISPUTE_LOST"),
    ],
)
async def test_money_moved_after_a_capture_is_a_reversal_of_our_charge(
    provider: StripeProvider, name: str, kind: str
) -> None:
    parsed = await parse(provider, fixture(name))
    want = ProviderReversal(fixture(name)["id"], KEY, CH, kind, 4500, "EUR", "ev-a")
    assert parsed == Callback("ev-a", want)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("event.payment_intent.payment_failed.no_charge.json", "no_attempt"),
        ("event.charge.refund.updated.pending.json", "refund_pending"),
        ("event.charge.dispute.created.inquiry.json", "dispute_warning_needs_response"),
    ],
)
async def test_what_moved_no_money_is_ignored(
    provider: StripeProvider, name: str, reason: str
) -> None:
    assert await parse(provider, fixture(name)) == Ignored(fixture(name)["id"], reason)


async def test_other_events_and_other_payments_are_ignored(provider: StripeProvider) -> None:
    other = {**fixture("event.charge.refunded.json"), "type": "customer.created"}
    assert await parse(provider, other) == Ignored(other["id"], "type:customer.created")
    foreign = fixture("event.payment_intent.succeeded.json")
    foreign["data"]["object"]["metadata"] = {"order": "42"}  # someone else's payment
    assert await parse(provider, foreign) == Ignored(foreign["id"], "not_ours")


async def test_values_are_passed_on_as_sent_never_coerced(provider: StripeProvider) -> None:
    """Another currency, an amount that is not an integer, a status that disagrees with the
    type: the deciding script sees each as it was sent (and refuses it)."""
    event = fixture("event.payment_intent.succeeded.json")
    pi = event["data"]["object"]
    pi.update(currency="usd", amount_received="4500", status="requires_payment_method")
    parsed = await parse(provider, event)
    assert isinstance(parsed, Callback) and isinstance(parsed.message, ProviderOutcome)
    m = parsed.message
    assert (m.currency, m.amount, m.status) == ("USD", None, "requires_payment_method")
    pi["metadata"]["event_id"] = "ev-b"  # our key still routes it; the script sees ev-b
    parsed = await parse(provider, event)
    assert parsed.event_id == "ev-a" and parsed.message.meta_event == "ev-b"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "change",
    [
        lambda e: e["data"].update(object=[]),
        lambda e: e["data"]["object"].update(object="charge"),
        lambda e: e["data"]["object"]["metadata"].update(charge_id="bad key!"),
        lambda e: e["data"]["object"].update(latest_charge=None),
        lambda e: e.pop("id"),
    ],
)
async def test_an_unreadable_event_is_refused(provider: StripeProvider, change: Any) -> None:
    event = fixture("event.payment_intent.succeeded.json")
    change(event)
    with pytest.raises(BadCallback):
        await parse(provider, event)


async def test_a_forged_altered_stale_or_unsigned_event_is_refused(
    provider: StripeProvider,
) -> None:
    body = orjson.dumps(fixture("event.payment_intent.succeeded.json"))
    attempts = [
        (body, signed(body, secret="whsec_not_the_endpoints_secret_x")),
        (body.replace(b"4500", b"9999"), signed(body)),
        (body, signed(body, at=int(time.time()) - 3600)),
        (body, {}),
        (b"\xff\xfe" + body, signed(body)),
    ]
    for raw, headers in attempts:
        with pytest.raises(BadSignature):
            await provider.parse_callback(raw, headers)
    assert isinstance(await provider.parse_callback(body, signed(body)), Callback)


def test_the_records_reconciliation_and_refunds_trust() -> None:
    pi, charge = fixture("payment_intent.json"), fixture("charge.json")
    record = ev.record_of(pi, charge)
    assert (record.attempt_id, record.intent_id, record.idempotency_key) == (CH, PI, KEY)
    assert (record.status, record.amount, record.currency) == ("captured", 4500, "EUR")
    assert (record.refunded, record.disputed) == (False, "")
    declined = copy.deepcopy(charge)
    declined.update(status="failed", captured=False, amount_captured=0)
    declined["outcome"]["type"] = "issuer_declined"
    assert ev.record_of(pi, declined).status == "declined"
    assert ev.record_of(pi, charge, "under_review").disputed == "open"
    assert ev.record_of(pi, charge, "warning_needs_response").disputed == ""
    assert ev.record_of({**pi, "status": "requires_payment_method"}, None).status == "processing"


def test_money_movements_of_a_refunded_and_a_disputed_charge() -> None:
    pi = fixture("payment_intent.json")
    refunded = fixture("event.charge.refunded.json")["data"]["object"]
    assert [(m["kind"], m["amount"], m["event_id"]) for m in ev.charge_movements(refunded, pi)] == [
        ("capture", 4500, "ev-a"),
        ("refund", 4500, "ev-a"),
    ]
    won = fixture("event.charge.dispute.closed.won.json")["data"]["object"]
    kinds = [m["kind"] for m in ev.dispute_movements(won, pi)]
    assert kinds == ["dispute_withdrawal", "dispute_reinstatement"]
    inquiry = fixture("event.charge.dispute.created.inquiry.json")["data"]["object"]
    assert ev.dispute_movements(inquiry, pi) == []
