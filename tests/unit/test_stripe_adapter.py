"""The Stripe adapter through the official library against the simulator speaking Stripe's API,
in process (httpx's mock transport over the ASGI app; its webhooks point nowhere): one intent
per key, Idempotency-Key semantics, refunds once, lookups by key, attempt and intent, money
movements, Stripe's errors in the engine's words, and the simulator's Stripe-signed events read
by the adapter."""

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from starlette.applications import Starlette

from engine.config.settings import StripeSettings
from engine.model import keys
from engine.model.holds import ProviderOutcome, ProviderReversal
from engine.providers.base import Callback, ProviderCharge, ProviderRefused, ProviderTimeout
from engine.providers.stripe_client import StripeProvider
from loadtest.provider_sim.charges import Simulator
from loadtest.provider_sim.server import SimConfig, create_app

API_KEY, SECRET = "sk_test_adapter_4f8e2a9c", "whsec_adapter_Kd7pQ2xV9mB4nL6t"
PRICE = 4500


def sim_app(**config: Any) -> Starlette:
    base = {"webhook_url": "http://127.0.0.1:9/none", "webhook_secret": SECRET, "retries_max": 1,
            "decline_rate": 0.0, "fail_rate": 0.0, "delay_min_ms": 1, "delay_max_ms": 2,
            "duplicate_rate": 0.0}  # fmt: skip
    return create_app(SimConfig(**{**base, **config}), wire="stripe", stripe_api_key=API_KEY)


def adapter(app: Starlette, api_key: str = API_KEY, retries: int = 1) -> StripeProvider:
    settings = StripeSettings(api_key, SECRET, api_base="http://sim", max_network_retries=retries)
    return StripeProvider(settings, transport=httpx.ASGITransport(app=app))


@pytest.fixture
async def app() -> AsyncIterator[Starlette]:
    a = sim_app()
    async with a.router.lifespan_context(a):
        yield a


@pytest.fixture
async def provider(app: Starlette) -> AsyncIterator[StripeProvider]:
    p = adapter(app)
    yield p
    await p.aclose()


def key(hold: str = "h1") -> str:
    return keys.charge_key("ev-a", hold, "alice", "k")


def meta(k: str) -> dict[str, str]:
    return {"event_id": "ev-a", "hold_id": "h1", "charge_id": k}


async def paid(provider: StripeProvider, k: str) -> ProviderCharge:
    created = await provider.create_charge(k, PRICE, "EUR", meta(k))
    assert (created.status, created.idempotency_key, created.amount) == ("processing", k, PRICE)
    for _ in range(200):
        found = await provider.find_charge(k)
        if found is not None and found.status == "captured":
            return found
        await asyncio.sleep(0.005)
    raise AssertionError("never captured")


async def test_one_intent_per_key_and_lookups_agree(provider: StripeProvider) -> None:
    k = key()
    found = await paid(provider, k)
    again = await provider.create_charge(k, PRICE, "EUR", meta(k))
    assert again.intent_id == found.intent_id  # the same key: the same intent
    assert found.attempt_id.startswith("ch_") and found.intent_id.startswith("pi_")
    assert await provider.get_attempt(found.attempt_id) == found
    assert await provider.get_intent(found.intent_id) == [found]
    assert found.metadata == {"event_id": "ev-a", "charge_id": k, "hold_id": "h1",
                              "amount": str(PRICE), "currency": "EUR"}  # fmt: skip
    assert await provider.find_charge(key("never")) is None
    assert await provider.get_attempt("ch_nope") is None
    assert await provider.get_intent("pi_nope") == []


async def test_a_key_reused_with_other_parameters_is_refused(provider: StripeProvider) -> None:
    k = key()
    await provider.create_charge(k, PRICE, "EUR", meta(k))
    with pytest.raises(ProviderRefused):
        await provider.create_charge(k, PRICE + 1, "EUR", meta(k))


async def test_refund_once_by_attempt_or_by_key(provider: StripeProvider) -> None:
    k1, k2 = key("h1"), key("h2")
    first, second = await paid(provider, k1), await paid(provider, k2)
    refund_id = await provider.refund(k1, first.attempt_id)
    assert await provider.refund(k1, first.attempt_id) == refund_id  # the same refund
    assert await provider.refund(k2, "") != refund_id  # found by its key
    record = await provider.get_attempt(first.attempt_id)
    assert record is not None and record.refunded
    moved = [(m["kind"], m["attempt_id"], m["amount"]) for m in await provider.money_movements()]
    assert sorted(moved) == sorted(
        [("capture", first.attempt_id, PRICE), ("refund", first.attempt_id, PRICE),
         ("capture", second.attempt_id, PRICE), ("refund", second.attempt_id, PRICE)]
    )  # fmt: skip


async def test_a_refund_stripe_already_made_answers_with_it(
    app: Starlette, provider: StripeProvider
) -> None:
    k = key()
    found = await paid(provider, k)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://s") as c:
        r = await c.post(f"/v1/test/attempts/{found.attempt_id}/refund")  # from the dashboard
    assert r.status_code == 201
    assert await provider.refund(k, found.attempt_id) == r.json()["refund_id"]


async def test_errors_in_the_engines_words() -> None:
    app = sim_app(refund_fail_rate=1.0)
    async with app.router.lifespan_context(app):
        good, bad = adapter(app), adapter(app, api_key="sk_test_someone_else")
        try:
            with pytest.raises(ProviderRefused):  # 401: a refusal, never retried
                await bad.find_charge(key())
            found = await paid(good, key())
            with pytest.raises(ProviderTimeout):  # 500 after the library's retries: unknown
                await good.refund(key(), found.attempt_id)
            with pytest.raises(ProviderRefused):  # nothing captured to refund
                await good.refund(key("other"), "ch_nope")
        finally:
            await good.aclose()
            await bad.aclose()


async def test_the_simulators_stripe_events_are_what_the_adapter_reads(
    app: Starlette, provider: StripeProvider
) -> None:
    k = key()
    found = await paid(provider, k)
    sim: Simulator = app.state.sim
    a = sim.by_attempt[found.attempt_id]
    for kind, want in (
        ("charge.captured", ProviderOutcome),
        ("refund.succeeded", ProviderReversal),
    ):
        event = sim.wire.event(sim, kind, a, {}, {})
        body = orjson.dumps(event)
        name, value = sim.wire.signature(SECRET, body, int(event["created"]))
        parsed = await provider.parse_callback(body, {name: value})
        assert isinstance(parsed, Callback) and isinstance(parsed.message, want)
        assert (parsed.event_id, parsed.message.charge_id) == ("ev-a", k)
        assert parsed.message.attempt_id == found.attempt_id
