"""A payment provider simulator, run as its own HTTP process (`onsale provider-sim`).

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
- GET /v1/ledger: what it captured and refunded, to check money against.
- PUT /v1/config: tests change behaviour (rates, delays, lost callbacks) between scenarios.
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
    seed: int = 7


@dataclass
class Attempt:
    attempt_id: str
    intent_id: str
    idempotency_key: str
    amount: int
    metadata: dict[str, Any]
    status: str = "processing"  # processing | captured | declined | failed
    created_s: float = field(default_factory=time.time)
    late_until_s: float = 0.0  # a late success answers every call for its key 504 until then
    refunds: list[str] = field(default_factory=list)


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
            "amount": a.amount,
            "status": a.status,
            "metadata": a.metadata,
        }

    async def _decide(self, a: Attempt, outcome: str, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        a.status = outcome
        if outcome == "captured":
            self.ledger.append(
                {
                    "kind": "capture",
                    "attempt_id": a.attempt_id,
                    "idempotency_key": a.idempotency_key,
                    "amount": a.amount,
                    "event_id": a.metadata.get("event_id", ""),
                }
            )
        self._emit(f"charge.{outcome}", self._charge_data(a), 0.0)

    # -- endpoints -------------------------------------------------------------------------

    async def create_charge(self, request: Request) -> Response:
        key = request.headers.get("Idempotency-Key", "")
        if not key:
            return _json({"error": "idempotency_key_required"}, 400)
        if key in self.by_key:
            existing = self.by_key[key]
            if time.time() < existing.late_until_s:
                return _json({"error": "timeout"}, 504)
            return _json(self._charge_data(existing))
        body = orjson.loads(await request.body())
        n = next(self.ids)
        a = Attempt(
            f"att_{self.run}_{n}",
            f"pi_{self.run}_{n}",
            key,
            int(body["amount"]),
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
        if self.rng.random() < self.config.refund_fail_rate:
            return _json({"error": "processor_unavailable"}, 503)
        refund_id = f"re_{self.run}_{next(self.ids)}"
        refund = {
            "refund_id": refund_id,
            "attempt_id": a.attempt_id,
            "idempotency_key": a.idempotency_key,
            "amount": a.amount,
            "status": "succeeded",
            "metadata": a.metadata,
        }
        self.refunds[key] = refund
        a.refunds.append(refund_id)
        self.ledger.append(
            {
                "kind": "refund",
                "attempt_id": a.attempt_id,
                "idempotency_key": a.idempotency_key,
                "amount": a.amount,
                "event_id": a.metadata.get("event_id", ""),
            }
        )
        self._emit("refund.succeeded", refund, self._delay_s())
        return _json(refund, 201)

    async def get_ledger(self, request: Request) -> Response:
        captured = sum(e["amount"] for e in self.ledger if e["kind"] == "capture")
        refunded = sum(e["amount"] for e in self.ledger if e["kind"] == "refund")
        return _json(
            {
                "entries": self.ledger,
                "captured": captured,
                "refunded": refunded,
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
            Route("/healthz", sim.health, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.state.sim = sim
    return app
