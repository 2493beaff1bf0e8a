"""A payment provider simulator, run as its own HTTP process (`python -m
loadtest.provider_sim.server`).

It behaves like a card processor that is honest about money and careless about messages:
- POST /v1/charges (Idempotency-Key): one authorization attempt per key (same key, same attempt).
  The outcome (captured / declined / failed) comes later, by signed callback.
- Callbacks are delivered at least once: retried with backoff until answered 2xx, sometimes
  duplicated, reordered by random delays; a "late success" answers the create call with a 504
  and still captures, later.
- GET /v1/charges/{attempt_id}, GET /v1/charges?idempotency_key=K, GET /v1/intents/{intent_id}:
  status queries for reconciliation.
- POST /v1/refunds (Idempotency-Key): refunds, idempotent by key; answered synchronously and
  confirmed by a `refund.succeeded` callback.
- GET /v1/ledger: every money movement (capture, refund, dispute withdrawal and reinstatement)
  per attempt, with its time, to check money against.
- PUT /v1/config: tests change behaviour (rates, delays, lost callbacks) between scenarios.
- POST /v1/test/attempts/{attempt_id}/...: a provider that contradicts itself, on request (for
  tests, the demo and the load tools): `capture` (a capture after its own decline, or of another
  amount or currency), `retry` (a new attempt on the same intent), `refund` (a refund from its
  dashboard), `dispute` (opened, won, lost) and `callback` (a signed message about the attempt
  with any field overridden: foreign metadata, a status that disagrees with the type, a wrong
  amount). `contradict_rate` makes some declines capture later.
- GET /v1/test/keys/{key}: the simulator's own record of the latest attempt under a key.
Everything random comes from one seeded generator, so a run can be repeated.

`--wire stripe` speaks Stripe's API instead (loadtest/provider_sim/stripe_api.py: PaymentIntents,
Charges, Refunds, Disputes, form-encoded, a bearer secret key) and sends Stripe events signed
with Stripe-Signature; the books, the plants, /v1/ledger and /v1/config are the same. It also
serves a stand-in for Stripe.js at /v3/ (loadtest/provider_sim/stripe_js.py) for the buyer's
page; with `buyer_confirms` (PUT /v1/config) an intent waits for that page to confirm it."""

import contextlib
import logging
from collections.abc import AsyncIterator

import httpx
from starlette.applications import Starlette
from starlette.routing import Route

from loadtest.provider_sim.charges import SENDS_MAX, SimConfig, Simulator
from loadtest.provider_sim.native import NativeWire
from loadtest.provider_sim.plant import Contradictions
from loadtest.provider_sim.stripe import StripeWire
from loadtest.provider_sim.stripe_api import StripeApi
from loadtest.provider_sim.stripe_js import StripeJs


def create_app(
    config: SimConfig | None = None,
    *,
    wire: str = "native",
    stripe_api_key: str = "",
    stripe_publishable_key: str = "",
) -> Starlette:
    """The simulator on its own wire, or on Stripe's (`wire="stripe"`, accepting only the
    secret key `stripe_api_key`, and serving the Stripe.js stand-in for pages that hold
    `stripe_publishable_key`)."""
    sim = Simulator(config or SimConfig(), StripeWire() if wire == "stripe" else NativeWire())
    planted = Contradictions(sim)
    native = [
        Route("/v1/charges", sim.create_charge, methods=["POST"]),
        Route("/v1/charges", sim.find_charge, methods=["GET"]),
        Route("/v1/charges/{attempt_id}", sim.get_charge, methods=["GET"]),
        Route("/v1/intents/{intent_id}", sim.get_intent, methods=["GET"]),
        Route("/v1/refunds", sim.create_refund, methods=["POST"]),
    ]
    api = native
    if wire == "stripe":
        api = StripeApi(sim, stripe_api_key).routes()
        api += StripeJs(sim, stripe_publishable_key).routes()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        limits = httpx.Limits(max_connections=SENDS_MAX, max_keepalive_connections=SENDS_MAX)
        sim.http = httpx.AsyncClient(timeout=httpx.Timeout(5.0), limits=limits)
        yield
        for task in list(sim.tasks):
            task.cancel()
        await sim.http.aclose()

    app = Starlette(
        routes=[
            *api,
            Route("/v1/ledger", sim.get_ledger, methods=["GET"]),
            Route("/v1/config", sim.put_config, methods=["PUT"]),
            Route("/v1/test/attempts/{attempt_id}/capture", planted.capture, methods=["POST"]),
            Route("/v1/test/attempts/{attempt_id}/refund", planted.refund, methods=["POST"]),
            Route("/v1/test/attempts/{attempt_id}/retry", planted.retry, methods=["POST"]),
            Route("/v1/test/attempts/{attempt_id}/dispute", planted.dispute, methods=["POST"]),
            Route("/v1/test/attempts/{attempt_id}/callback", planted.callback, methods=["POST"]),
            Route("/v1/test/keys/{key}", planted.by_key, methods=["GET"]),
            Route("/healthz", sim.health, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.state.sim = sim
    return app


def main(argv: list[str] | None = None) -> int:
    """`python -m loadtest.provider_sim.server`: the simulator as its own HTTP process."""
    import argparse
    import os

    import uvicorn

    parser = argparse.ArgumentParser(
        prog="python -m loadtest.provider_sim.server", description=__doc__
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8100)
    parser.add_argument("--webhook-url", default="http://127.0.0.1:8000/v1/provider/callbacks")
    parser.add_argument("--decline-rate", type=float, default=0.05)
    parser.add_argument("--fail-rate", type=float, default=0.02)
    parser.add_argument("--late-rate", type=float, default=0.0)
    parser.add_argument("--late-delay-ms", type=int, default=3_000)
    parser.add_argument("--duplicate-rate", type=float, default=0.2)
    parser.add_argument("--loss-rate", type=float, default=0.0)
    parser.add_argument(
        "--contradict-rate", type=float, default=0.0, help="share of declines captured later"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--wire",
        choices=("native", "stripe"),
        default="native",
        help="stripe: Stripe's API and events (ONSALE_STRIPE_API_KEY, _WEBHOOK_SECRET)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    stripe = args.wire == "stripe"
    secret_name = "ONSALE_STRIPE_WEBHOOK_SECRET" if stripe else "ONSALE_WEBHOOK_SECRET"
    secret = os.environ.get(secret_name, "")
    if not secret:
        parser.error(f"{secret_name} is not set: the secret callbacks are signed with")
    api_key = os.environ.get("ONSALE_STRIPE_API_KEY", "")
    if stripe and not api_key:
        parser.error("ONSALE_STRIPE_API_KEY is not set: the only secret key the API accepts")
    config = SimConfig(
        webhook_url=args.webhook_url,
        webhook_secret=secret,
        decline_rate=args.decline_rate,
        fail_rate=args.fail_rate,
        late_rate=args.late_rate,
        late_delay_ms=args.late_delay_ms,
        duplicate_rate=args.duplicate_rate,
        loss_rate=args.loss_rate,
        contradict_rate=args.contradict_rate,
        seed=args.seed,
    )
    publishable = os.environ.get("ONSALE_STRIPE_PUBLISHABLE_KEY", "")
    app = create_app(config, wire=args.wire, stripe_api_key=api_key,
                     stripe_publishable_key=publishable)  # fmt: skip
    uvicorn.run(app, host=args.host, port=args.port, loop="uvloop", http="httptools",
                log_level="warning", access_log=False)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
