"""The provider is chosen per deployment (ONSALE_PROVIDER) and boot refuses an incomplete
configuration, naming the variable; secrets never show in a repr."""

from typing import Any

import pytest

from api.routes.ui import csp
from engine.config.settings import Settings
from engine.config.variables import MissingSetting
from engine.providers import SimulatorProvider, build_provider
from engine.providers.stripe_client import StripeProvider
from tests.conftest import API_TEST_ENV

STRIPE = {
    "ONSALE_REDIS_URL": "redis://x",
    "ONSALE_PROVIDER": "stripe",
    "ONSALE_STRIPE_API_KEY": "sk_test_Zr4mQ8vN2xK7pL1w",
    "ONSALE_STRIPE_WEBHOOK_SECRET": "whsec_Bf6tY3nH9cJ2qW5e8rU1",
}


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"ONSALE_PROVIDER": "paypal"}, "ONSALE_PROVIDER"),
        ({"ONSALE_STRIPE_API_KEY": ""}, "ONSALE_STRIPE_API_KEY"),
        ({"ONSALE_STRIPE_API_KEY": "pk_test_publishable"}, "ONSALE_STRIPE_API_KEY"),
        ({"ONSALE_STRIPE_WEBHOOK_SECRET": ""}, "ONSALE_STRIPE_WEBHOOK_SECRET"),
        ({"ONSALE_STRIPE_WEBHOOK_SECRET": "whsec_short"}, "ONSALE_STRIPE_WEBHOOK_SECRET"),
        ({"ONSALE_STRIPE_API_BASE": "ftp://x"}, "ONSALE_STRIPE_API_BASE"),
        ({"ONSALE_STRIPE_MAX_NETWORK_RETRIES": "many"}, "ONSALE_STRIPE_MAX_NETWORK_RETRIES"),
        ({"ONSALE_STRIPE_PUBLISHABLE_KEY": "sk_test_secret"}, "ONSALE_STRIPE_PUBLISHABLE_KEY"),
        ({"ONSALE_STRIPE_JS_URL": "js.stripe.com/v3"}, "ONSALE_STRIPE_JS_URL"),
    ],
)
def test_an_incomplete_stripe_configuration_stops_boot(change: dict[str, str], named: str) -> None:
    with pytest.raises(MissingSetting, match=named):
        Settings.from_env({**STRIPE, **change})


async def test_each_deployment_gets_its_provider() -> None:
    stripe = Settings.from_env({**STRIPE, "ONSALE_STRIPE_API_BASE": "http://127.0.0.1:1/"})
    assert stripe.stripe is not None and stripe.stripe.api_base == "http://127.0.0.1:1"
    assert "sk_test" not in repr(stripe) and "whsec" not in repr(stripe)
    p = build_provider(stripe)
    assert isinstance(p, StripeProvider) and p.name == "stripe"
    await p.aclose()
    sim = Settings.from_env({"ONSALE_REDIS_URL": "redis://x", "ONSALE_PROVIDER_URL": "http://s"})
    assert (sim.provider, sim.stripe) == ("simulator", None)
    q = build_provider(sim, callback_secrets=("a" * 32,))
    assert isinstance(q, SimulatorProvider) and q.callback_secrets == ("a" * 32,)
    await q.aclose()
    with pytest.raises(MissingSetting, match="ONSALE_PROVIDER_URL"):
        build_provider(Settings.from_env({"ONSALE_REDIS_URL": "redis://x"}))


def test_a_stripe_api_needs_neither_the_simulators_secret_nor_its_url() -> None:
    from api.settings import ApiSettings

    env: dict[str, Any] = {**STRIPE, **API_TEST_ENV}
    api = ApiSettings.from_env(env)
    assert (api.webhook_secret, api.provider_url, api.engine.provider) == ("", "", "stripe")
    with pytest.raises(MissingSetting, match="ONSALE_WEBHOOK_SECRET"):
        ApiSettings.from_env({**env, "ONSALE_PROVIDER": "simulator", "ONSALE_PROVIDER_URL": "x"})


def test_the_pages_may_load_stripe_js_only_where_the_deployment_says() -> None:
    # ADR 0039: no publishable key, no third party; Stripe's own origins for Stripe.js; one
    # origin for a stand-in (the simulator serves the script, its API and its dialog).
    def policy(**env: str) -> dict[str, str]:
        stripe = Settings.from_env({**STRIPE, **env}).stripe
        parts = (p.strip().split(" ", 1) for p in csp(stripe).split(";"))
        return {name: rest for name, rest in parts}

    alone = policy()
    assert (alone["script-src"], alone["connect-src"], alone["frame-src"]) == (
        "'self'",
        "'self'",
        "'none'",
    )
    real = policy(ONSALE_STRIPE_PUBLISHABLE_KEY="pk_test_x")
    assert real["script-src"] == "'self' https://js.stripe.com"
    assert real["connect-src"] == "'self' https://api.stripe.com"
    assert real["frame-src"] == "https://js.stripe.com https://hooks.stripe.com"
    local = policy(ONSALE_STRIPE_PUBLISHABLE_KEY="pk_test_x",
                   ONSALE_STRIPE_JS_URL="http://127.0.0.1:8100/v3/")  # fmt: skip
    assert {local[k] for k in ("script-src", "connect-src")} == {"'self' http://127.0.0.1:8100"}
    assert local["frame-src"] == "http://127.0.0.1:8100"


def test_the_pages_may_call_the_identity_provider_they_sign_in_through() -> None:
    # ADR 0050: its discovery document and token endpoint, on the issuer's origin; nothing else.
    def connect(stripe: Any, issuer: str) -> str:
        parts = (p.strip().split(" ", 1) for p in csp(stripe, issuer).split(";"))
        return {name: rest for name, rest in parts}["connect-src"]

    assert connect(None, "") == "'self'"
    assert connect(None, "https://id.example.com/realms/x/") == "'self' https://id.example.com"
    stripe = Settings.from_env({**STRIPE, "ONSALE_STRIPE_PUBLISHABLE_KEY": "pk_test_x"}).stripe
    assert connect(stripe, "https://id.example.com") == (
        "'self' https://api.stripe.com https://id.example.com"
    )
