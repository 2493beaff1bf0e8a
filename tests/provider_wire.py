"""Provider messages in each provider's own format, for the tests that deliver them: the
simulator's protocol (loadtest/provider_sim/server.py) and Stripe's events (the recorded fixtures of
tests/fixtures/stripe/, carrying one of our charges instead of the recorded one), signed as each
provider signs them, and read back exactly as the API reads them (`Provider.parse_callback`:
the signature over the exact bytes, then the adapter's mapping, engine/providers/). A scenario
run with either proves the same invariants for both mappings (ADR 0023)."""

import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import stripe

from engine.config.settings import StripeSettings
from engine.model.holds import OutcomeResult, ProviderOutcome
from engine.model.signing import HEADER as SIMULATOR_HEADER
from engine.model.signing import sign
from engine.providers import Callback, Provider, SimulatorProvider
from engine.providers.stripe_client import SIGNATURE_HEADER as STRIPE_HEADER
from engine.providers.stripe_client import StripeProvider
from engine.store import Store

PROVIDERS = ("simulator", "stripe")
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "stripe"
# An outcome as the simulator's fact, and as the recorded Stripe event that says it.
SIMULATOR_TYPES = {
    "CAPTURED": "charge.captured",
    "DECLINED": "charge.declined",
    "FAILED": "charge.failed",
}
STRIPE_EVENTS = {
    "CAPTURED": "event.payment_intent.succeeded.json",
    "DECLINED": "event.payment_intent.payment_failed.declined.json",
    "FAILED": "event.payment_intent.payment_failed.error.json",
    "REFUND": "event.charge.refunded.json",
}
AMOUNTS = ("amount", "amount_received", "amount_captured", "amount_refunded")
WIRE_SECRET = "whsec_provider_wire_Qm7Rt2Vx9Kc4Np1L"  # the webhook secret of a Wire's adapter
NOT_FOUND = {"error": {"type": "invalid_request_error", "code": "resource_missing"}}


@dataclass(frozen=True, slots=True)
class Payment:
    """One charge of ours as the provider knows it: its attempt and intent, the money asked
    for, and the metadata we created it with."""

    charge_id: str
    attempt_id: str
    intent_id: str
    amount: int
    currency: str
    metadata: dict[str, str]

    @classmethod
    def of(
        cls, provider: str, event_id: str, hold_id: str, charge_id: str, amount: int
    ) -> "Payment":
        """Our charge with an attempt and an intent named as the provider names them."""
        ids = ("ch_", "pi_") if provider == "stripe" else ("att-", "pi-")
        metadata = {"event_id": event_id, "hold_id": hold_id, "charge_id": charge_id,
                    "amount": str(amount), "currency": "EUR"}  # fmt: skip
        return cls(
            charge_id, f"{ids[0]}{charge_id}", f"{ids[1]}{charge_id}", amount, "EUR", metadata
        )

    @classmethod
    def of_record(cls, record: dict[str, Any]) -> "Payment":
        """From the simulator's record of the attempt it made (GET /v1/test/keys/{key})."""
        return cls(
            str(record["idempotency_key"]),
            str(record["attempt_id"]),
            str(record["intent_id"]),
            int(record["amount"]),
            str(record["currency"]),
            {str(k): str(v) for k, v in record["metadata"].items()},
        )


@functools.cache
def recorded(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def stripe_object(fixture: str, p: Payment, *, inner: bool = True) -> dict[str, Any]:
    """A recorded Stripe object (an event's `data.object`, or a whole file) carrying our charge:
    its ids, amounts, currency and metadata replaced by ours."""
    o: dict[str, Any] = orjson.loads(recorded(fixture))
    if inner:
        o = o["data"]["object"]
    o["id"] = {"payment_intent": p.intent_id, "charge": p.attempt_id}.get(o["object"], o["id"])
    if "payment_intent" in o:
        o["payment_intent"] = p.intent_id
    for name in ("latest_charge", "charge"):
        if o.get(name):
            o[name] = p.attempt_id
    error = o.get("last_payment_error")
    if isinstance(error, dict) and error.get("charge"):  # none: failed before any charge
        error["charge"] = p.attempt_id
    for amount in AMOUNTS:
        if o.get(amount):  # a zero stays zero (nothing received on a failed intent)
            o[amount] = p.amount
    if o.get("client_secret"):
        o["client_secret"] = f"{p.intent_id}_secret_{p.charge_id[-8:]}"
    if o.get("metadata"):
        o["metadata"] = dict(p.metadata)
    o["currency"] = p.currency.lower()
    return o


def stripe_event(name: str, p: Payment, event_id: str) -> dict[str, Any]:
    """A recorded Stripe event (`tests/fixtures/stripe/<name>`) about our charge."""
    event: dict[str, Any] = orjson.loads(recorded(name))
    event.update(id=event_id, created=int(time.time()), data={"object": stripe_object(name, p)})
    return event


def simulator_event(kind: str, p: Payment, event_id: str, **data: Any) -> dict[str, Any]:
    """A message of the simulator's own protocol about our charge (its `charge_data`)."""
    fields = {"attempt_id": p.attempt_id, "intent_id": p.intent_id,
              "idempotency_key": p.charge_id, "amount": p.amount, "currency": p.currency,
              "metadata": dict(p.metadata), "refunded": False, "disputed": ""}  # fmt: skip
    return {"id": event_id, "type": kind, "created": int(time.time()), "data": fields | data}


def outcome_message(provider: str, p: Payment, outcome: str, event_id: str) -> dict[str, Any]:
    """The message saying our charge's attempt was CAPTURED, DECLINED or FAILED."""
    if provider == "stripe":
        return stripe_event(STRIPE_EVENTS[outcome], p, event_id)
    return simulator_event(SIMULATOR_TYPES[outcome], p, event_id, status=outcome.lower())


def refund_message(provider: str, p: Payment, event_id: str) -> dict[str, Any]:
    """The message saying the provider refunded our charge's attempt in full."""
    if provider == "stripe":
        return stripe_event(STRIPE_EVENTS["REFUND"], p, event_id)
    refund = {"refund_id": f"re-{p.attempt_id}", "status": "succeeded", "requested_by": "provider"}
    return simulator_event("refund.succeeded", p, event_id, **refund)


def signed_headers(provider: str, secret: str, body: bytes, at: int = 0) -> dict[str, str]:
    """The headers the provider sends `body` with, signed with `secret` at time `at` (now)."""
    at = at or int(time.time())
    if provider == "stripe":  # the official library's own signer
        header = stripe.WebhookSignature.generate_signature_header(body.decode(), secret, at)
        return {STRIPE_HEADER: header, "Content-Type": "application/json"}
    return {SIMULATOR_HEADER: sign(secret, body, at), "Content-Type": "application/json"}


class Wire:
    """One provider's messages delivered to a store as the API delivers them: signed, read by
    the provider's adapter (the reading of a Stripe refund asks Stripe for its intent; here that
    answer is the recorded intent carrying our charge), then applied by the deciding script."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.intents: dict[str, Payment] = {}
        self.adapter: Provider
        if provider == "stripe":
            settings = StripeSettings("sk_test_wire", WIRE_SECRET, api_base="http://stripe.test")
            self.adapter = StripeProvider(settings, transport=httpx.MockTransport(self._stripe))
        else:
            self.adapter = SimulatorProvider(
                "http://simulator.test", callback_secrets=[WIRE_SECRET]
            )

    def payment(self, event_id: str, hold_id: str, charge_id: str, amount: int) -> Payment:
        p = Payment.of(self.provider, event_id, hold_id, charge_id, amount)
        self.intents[p.intent_id] = p
        return p

    async def read(self, event_id: str, message: dict[str, Any]) -> Callback:
        """Sign one message and read it as the API does; the adapter must route it to
        `event_id`."""
        body = orjson.dumps(message)
        headers = signed_headers(self.provider, WIRE_SECRET, body)
        parsed = await self.adapter.parse_callback(body, headers)
        assert isinstance(parsed, Callback) and parsed.event_id == event_id, parsed
        return parsed

    @staticmethod
    async def apply(store: Store, parsed: Callback) -> OutcomeResult:
        """What the API does with a message it read: the deciding script applies it."""
        if isinstance(parsed.message, ProviderOutcome):
            return await store.apply_outcome(parsed.event_id, parsed.message)
        return await store.apply_reversal(parsed.event_id, parsed.message)

    async def outcome(
        self, store: Store, event_id: str, hold_id: str, charge_id: str, outcome: str, pev: str
    ) -> str:
        """Deliver: our charge of 100 EUR was CAPTURED, DECLINED or FAILED (provider event
        `pev`); returns the decision."""
        p = self.payment(event_id, hold_id, charge_id, 100)
        parsed = await self.read(event_id, outcome_message(self.provider, p, outcome, pev))
        return (await self.apply(store, parsed)).decision

    async def refund(self, event_id: str, hold_id: str, charge_id: str, pev: str) -> Callback:
        """Read: the provider refunded our charge of 100 on its own (provider event `pev`)."""
        p = self.payment(event_id, hold_id, charge_id, 100)
        return await self.read(event_id, refund_message(self.provider, p, pev))

    def _stripe(self, request: httpx.Request) -> httpx.Response:
        """Stripe's answer to the lookup the adapter makes: an intent of ours."""
        intent_id = request.url.path.removeprefix("/v1/payment_intents/")
        p = self.intents.get(intent_id)
        if request.method != "GET" or p is None:
            return httpx.Response(404, json=NOT_FOUND)
        return httpx.Response(200, json=stripe_object("payment_intent.json", p, inner=False))

    async def aclose(self) -> None:
        await self.adapter.aclose()
