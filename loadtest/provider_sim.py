"""A payment provider simulator, run as its own HTTP process (`python -m loadtest.provider_sim`).

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
Everything random comes from one seeded generator, so a run can be repeated."""

import asyncio
import contextlib
import itertools
import logging
import random
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import httpx
import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from engine.signing import HEADER, sign

log = logging.getLogger("onsale.provider_sim")


@dataclass(frozen=True)
class SimConfig:
    webhook_url: str = "http://127.0.0.1:8000/v1/provider/callbacks"
    webhook_secret: str = "whsec-dev"
    decline_rate: float = 0.05
    fail_rate: float = 0.02
    late_rate: float = 0.0  # answer the create call 504, capture anyway after late_delay_ms
    late_delay_ms: int = 3_000
    delay_min_ms: int = 50
    delay_max_ms: int = 400
    duplicate_rate: float = 0.2  # share of callbacks sent twice (or three times)
    loss_rate: float = 0.0  # share of callbacks never delivered (reconciliation must find them)
    retry_base_ms: int = 100
    retries_max: int = 12
    refund_fail_rate: float = 0.0
    contradict_rate: float = 0.0  # share of declines that capture anyway after late_delay_ms
    seed: int = 7


@dataclass
class Attempt:
    attempt_id: str
    intent_id: str
    idempotency_key: str
    amount: int
    currency: str
    metadata: dict[str, Any]
    status: str = "processing"  # processing | captured | declined | failed
    created_s: float = field(default_factory=time.time)
    late_until_s: float = 0.0  # a late success answers every call for its key 504 until then
    refunds: list[str] = field(default_factory=list)
    disputed: str = ""  # "" | open | won | lost
    captured_amount: int = 0  # what was actually captured (a planted capture may differ)


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


class Simulator:
    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.ids = itertools.count(1)
        # Provider ids are unique forever, across restarts of the simulator too.
        self.run = secrets.token_hex(4)
        self.by_key: dict[str, Attempt] = {}
        self.by_attempt: dict[str, Attempt] = {}
        self.refunds: dict[str, dict[str, Any]] = {}  # refund idempotency key -> refund
        self.ledger: list[dict[str, Any]] = []
        self.deliveries = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.http: httpx.AsyncClient | None = None

    # -- helpers ---------------------------------------------------------------------------

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _delay_s(self) -> float:
        c = self.config
        return self.rng.uniform(c.delay_min_ms, c.delay_max_ms) / 1000

    async def _send(self, event: dict[str, Any], delay_s: float) -> None:
        """Deliver one event at least once: retry with backoff until a 2xx answer."""
        await asyncio.sleep(delay_s)
        body = orjson.dumps(event)
        assert self.http is not None
        for attempt in range(self.config.retries_max):
            headers = {
                HEADER: sign(self.config.webhook_secret, body, int(time.time())),
                "Content-Type": "application/json",
            }
            try:
                r = await self.http.post(self.config.webhook_url, content=body, headers=headers)
                self.deliveries += 1
                if r.status_code < 300:
                    return
            except httpx.HTTPError:
                pass
            backoff = self.config.retry_base_ms * 2**attempt / 1000
            await asyncio.sleep(min(backoff, 10) * self.rng.uniform(0.5, 1.0))
        log.warning("gave up delivering %s", event["id"])

    def _emit(self, kind: str, data: dict[str, Any], delay_s: float) -> None:
        event = {
            "id": f"evt_{self.run}_{next(self.ids)}",
            "type": kind,
            "created": int(time.time()),
            "data": data,
        }
        if self.rng.random() < self.config.loss_rate:
            return
        copies = 1
        if self.rng.random() < self.config.duplicate_rate:
            copies += self.rng.choice((1, 2))
        for n in range(copies):
            self._spawn(self._send(event, delay_s + n * self._delay_s()))

    def _charge_data(self, a: Attempt) -> dict[str, Any]:
        return {
            "attempt_id": a.attempt_id,
            "intent_id": a.intent_id,
            "idempotency_key": a.idempotency_key,
            "amount": a.captured_amount if a.status == "captured" else a.amount,
            "currency": a.currency,
            "status": a.status,
            "metadata": a.metadata,
            "refunded": bool(a.refunds),
            "disputed": a.disputed,
        }

    def _money(self, kind: str, a: Attempt, amount: int) -> None:
        """One money movement at the provider, with its time (for the money invariant and the
        contradiction-to-refund bound)."""
        self.ledger.append(
            {
                "kind": kind,
                "attempt_id": a.attempt_id,
                "idempotency_key": a.idempotency_key,
                "amount": amount,
                "event_id": a.metadata.get("event_id", ""),
                "at_s": time.time(),
            }
        )

    def _capture(self, a: Attempt, amount: int) -> None:
        contradicted = a.status in ("declined", "failed")
        a.status = "captured"
        a.captured_amount = amount
        self._money("capture", a, amount)
        self.ledger[-1]["contradicted"] = contradicted  # it said declined or failed before
        self._emit("charge.captured", self._charge_data(a), 0.0)

    async def _decide(self, a: Attempt, outcome: str, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        if outcome == "captured":
            self._capture(a, a.amount)
            return
        a.status = outcome
        self._emit(f"charge.{outcome}", self._charge_data(a), 0.0)
        if outcome == "declined" and self.rng.random() < self.config.contradict_rate:
            # The provider changes its mind: it captures the attempt it said it declined.
            await asyncio.sleep(self.config.late_delay_ms / 1000)
            self._capture(a, a.amount)

    # -- endpoints -------------------------------------------------------------------------

    async def create_charge(self, request: Request) -> Response:
        key = request.headers.get("Idempotency-Key", "")
        if not key:
            return _json({"error": "idempotency_key_required"}, 400)
        # The body is read before the key is looked up: from the lookup to the registration
        # nothing awaits, so two concurrent requests with one key make one attempt (as the
        # provider's idempotency promises), never two.
        body = orjson.loads(await request.body())
        if key in self.by_key:
            existing = self.by_key[key]
            if time.time() < existing.late_until_s:
                return _json({"error": "timeout"}, 504)
            return _json(self._charge_data(existing))
        n = next(self.ids)
        a = Attempt(
            f"att_{self.run}_{n}",
            f"pi_{self.run}_{n}",
            key,
            int(body["amount"]),
            str(body.get("currency", "EUR")),
            dict(body.get("metadata", {})),
        )
        self.by_key[key] = a
        self.by_attempt[a.attempt_id] = a
        roll = self.rng.random()
        c = self.config
        if roll < c.decline_rate:
            outcome = "declined"
        elif roll < c.decline_rate + c.fail_rate:
            outcome = "failed"
        else:
            outcome = "captured"
        if outcome == "captured" and self.rng.random() < c.late_rate:
            a.late_until_s = time.time() + c.late_delay_ms / 1000
            self._spawn(self._decide(a, "captured", c.late_delay_ms / 1000))
            return _json({"error": "timeout"}, 504)  # the client is told "timed out"
        self._spawn(self._decide(a, outcome, self._delay_s()))
        return _json(self._charge_data(a), 201)

    async def get_charge(self, request: Request) -> Response:
        a = self.by_attempt.get(request.path_params["attempt_id"])
        return _json(self._charge_data(a)) if a else _json({"error": "not_found"}, 404)

    async def find_charge(self, request: Request) -> Response:
        a = self.by_key.get(request.query_params.get("idempotency_key", ""))
        return _json(self._charge_data(a)) if a else _json({"error": "not_found"}, 404)

    async def get_intent(self, request: Request) -> Response:
        intent = request.path_params["intent_id"]
        found = [self._charge_data(a) for a in self.by_attempt.values() if a.intent_id == intent]
        return (
            _json({"intent_id": intent, "attempts": found})
            if found
            else _json({"error": "not_found"}, 404)
        )

    async def create_refund(self, request: Request) -> Response:
        key = request.headers.get("Idempotency-Key", "")
        if not key:
            return _json({"error": "idempotency_key_required"}, 400)
        if key in self.refunds:
            return _json(self.refunds[key])
        body = orjson.loads(await request.body())
        a = self.by_attempt.get(body.get("attempt_id", "")) or self.by_key.get(
            body.get("idempotency_key", "")
        )
        if a is None or a.status != "captured":
            return _json({"error": "not_captured"}, 409)
        if a.refunds:  # never refunds more than it captured
            return _json({"error": "already_refunded", "refund_id": a.refunds[0]}, 409)
        if a.disputed in ("open", "lost"):
            return _json({"error": "charge_disputed"}, 409)
        if self.rng.random() < self.config.refund_fail_rate:
            return _json({"error": "processor_unavailable"}, 503)
        refund = self._refund(a, requested_by="merchant")
        self.refunds[key] = refund
        return _json(refund, 201)

    def _refund(self, a: Attempt, *, requested_by: str) -> dict[str, Any]:
        refund_id = f"re_{self.run}_{next(self.ids)}"
        refund = {
            "refund_id": refund_id,
            "attempt_id": a.attempt_id,
            "idempotency_key": a.idempotency_key,
            "amount": a.captured_amount,
            "currency": a.currency,
            "status": "succeeded",
            "requested_by": requested_by,  # merchant (our API) | provider (its dashboard)
            "metadata": a.metadata,
        }
        a.refunds.append(refund_id)
        self._money("refund", a, a.captured_amount)
        self.ledger[-1]["requested_by"] = requested_by
        self._emit("refund.succeeded", refund, self._delay_s())
        return refund

    # -- a provider that contradicts itself, on request ------------------------------------

    def _planted(self, request: Request) -> Attempt | None:
        return self.by_attempt.get(request.path_params["attempt_id"])

    async def plant_capture(self, request: Request) -> Response:
        """Capture now, whatever was said before (a capture after a decline), optionally of
        another amount than the one asked for."""
        a = self._planted(request)
        if a is None:
            return _json({"error": "not_found"}, 404)
        body = orjson.loads(await request.body() or b"{}")
        if a.status == "captured":
            return _json({"error": "already_captured"}, 409)
        a.currency = str(body.get("currency", a.currency))
        self._capture(a, int(body.get("amount", a.amount)))
        return _json(self._charge_data(a))

    async def plant_retry(self, request: Request) -> Response:
        """A new authorization attempt on the same intent and key (after a decline, say), decided
        at once: `{"outcome": "captured"}` by default."""
        a = self._planted(request)
        if a is None:
            return _json({"error": "not_found"}, 404)
        body = orjson.loads(await request.body() or b"{}")
        outcome = str(body.get("outcome", "captured"))
        n = next(self.ids)
        b = Attempt(
            f"att_{self.run}_{n}", a.intent_id, a.idempotency_key, a.amount, a.currency, a.metadata
        )
        self.by_key[b.idempotency_key] = b
        self.by_attempt[b.attempt_id] = b
        self._spawn(self._decide(b, outcome, 0.0))
        return _json(self._charge_data(b), 201)

    async def plant_refund(self, request: Request) -> Response:
        """A refund made from the provider's dashboard: nobody asked us."""
        a = self._planted(request)
        if a is None or a.status != "captured" or a.refunds:
            return _json({"error": "not_refundable"}, 409)
        return _json(self._refund(a, requested_by="provider"), 201)

    async def plant_dispute(self, request: Request) -> Response:
        """A dispute (chargeback): `open` withdraws the money, `won` gives it back, `lost`
        keeps it withdrawn for good."""
        a = self._planted(request)
        body = orjson.loads(await request.body() or b"{}")
        status = body.get("status", "open")
        if a is None or a.status != "captured" or status not in ("open", "won", "lost"):
            return _json({"error": "not_disputable"}, 409)
        if a.disputed != ("" if status == "open" else "open"):  # open once, then close once
            return _json({"error": "dispute_state", "disputed": a.disputed}, 409)
        if status == "open":
            self._money("dispute_withdrawal", a, a.captured_amount)
        elif status == "won":
            self._money("dispute_reinstatement", a, a.captured_amount)
        a.disputed = status
        data = {
            "dispute_id": f"dp_{a.attempt_id}",
            "attempt_id": a.attempt_id,
            "idempotency_key": a.idempotency_key,
            "amount": a.captured_amount,
            "currency": a.currency,
            "status": "needs_response" if status == "open" else status,
            "metadata": a.metadata,
        }
        kind = "charge.dispute.created" if status == "open" else "charge.dispute.closed"
        self._emit(kind, data, 0.0)
        return _json(data, 201)

    async def plant_callback(self, request: Request) -> Response:
        """A signed message about the attempt with fields overridden (no money moves):
        `{"type": ..., "data": {...}, "metadata": {...}}`."""
        a = self._planted(request)
        if a is None:
            return _json({"error": "not_found"}, 404)
        body = orjson.loads(await request.body() or b"{}")
        data = self._charge_data(a)
        data.update(body.get("data", {}))
        data["metadata"] = {**a.metadata, **body.get("metadata", {})}
        self._emit(str(body.get("type", f"charge.{a.status}")), data, 0.0)
        return _json(data, 202)

    async def get_ledger(self, request: Request) -> Response:
        captured = sum(e["amount"] for e in self.ledger if e["kind"] == "capture")
        refunded = sum(e["amount"] for e in self.ledger if e["kind"] == "refund")
        disputed = sum(e["amount"] for e in self.ledger if e["kind"] == "dispute_withdrawal")
        reinstated = sum(e["amount"] for e in self.ledger if e["kind"] == "dispute_reinstatement")
        return _json(
            {
                "entries": self.ledger,
                "captured": captured,
                "refunded": refunded,
                "disputed": disputed,
                "reinstated": reinstated,
                "net": captured - refunded - disputed + reinstated,
                "deliveries": self.deliveries,
                "pending_deliveries": len(self.tasks),
            }
        )

    async def put_config(self, request: Request) -> Response:
        changes = orjson.loads(await request.body())
        self.config = replace(self.config, **changes)
        return _json(asdict(self.config))

    async def health(self, request: Request) -> Response:
        return _json({"ok": True})


def create_app(config: SimConfig | None = None) -> Starlette:
    sim = Simulator(config or SimConfig())

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sim.http = httpx.AsyncClient(timeout=httpx.Timeout(5.0))
        yield
        for task in list(sim.tasks):
            task.cancel()
        await sim.http.aclose()

    app = Starlette(
        routes=[
            Route("/v1/charges", sim.create_charge, methods=["POST"]),
            Route("/v1/charges", sim.find_charge, methods=["GET"]),
            Route("/v1/charges/{attempt_id}", sim.get_charge, methods=["GET"]),
            Route("/v1/intents/{intent_id}", sim.get_intent, methods=["GET"]),
            Route("/v1/refunds", sim.create_refund, methods=["POST"]),
            Route("/v1/ledger", sim.get_ledger, methods=["GET"]),
            Route("/v1/config", sim.put_config, methods=["PUT"]),
            Route("/v1/test/attempts/{attempt_id}/capture", sim.plant_capture, methods=["POST"]),
            Route("/v1/test/attempts/{attempt_id}/refund", sim.plant_refund, methods=["POST"]),
            Route("/v1/test/attempts/{attempt_id}/retry", sim.plant_retry, methods=["POST"]),
            Route("/v1/test/attempts/{attempt_id}/dispute", sim.plant_dispute, methods=["POST"]),
            Route("/v1/test/attempts/{attempt_id}/callback", sim.plant_callback, methods=["POST"]),
            Route("/healthz", sim.health, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.state.sim = sim
    return app


def main(argv: list[str] | None = None) -> int:
    """`python -m loadtest.provider_sim`: the simulator as its own HTTP process."""
    import argparse
    import os

    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m loadtest.provider_sim", description=__doc__)
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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    config = SimConfig(
        webhook_url=args.webhook_url,
        webhook_secret=os.environ.get("ONSALE_WEBHOOK_SECRET", SimConfig.webhook_secret),
        decline_rate=args.decline_rate,
        fail_rate=args.fail_rate,
        late_rate=args.late_rate,
        late_delay_ms=args.late_delay_ms,
        duplicate_rate=args.duplicate_rate,
        loss_rate=args.loss_rate,
        contradict_rate=args.contradict_rate,
        seed=args.seed,
    )
    uvicorn.run(
        create_app(config),
        host=args.host,
        port=args.port,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
