"""The simulated payment provider's books and the API a merchant calls
(loadtest/provider_sim/server.py describes its behaviour): authorization attempts decided at random
from one seeded generator, refunds, every money movement with its time, and the signed callbacks it
sends about them, at least once. The endpoints that make it contradict itself are in
loadtest/provider_sim/plant.py.

How its messages look on the wire is a `Wire`: the simulator's own protocol (`NativeWire`,
loadtest/provider_sim/native.py) or Stripe's (loadtest/provider_sim/stripe.py); the books are the
same."""

import asyncio
import itertools
import logging
import random
import secrets
import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

import httpx
import orjson
from starlette.requests import Request
from starlette.responses import Response

from loadtest.provider_sim.attempt import Attempt

log = logging.getLogger("onsale.provider_sim")


@dataclass(frozen=True)
class SimConfig:
    webhook_url: str = "http://127.0.0.1:8000/v1/provider/callbacks"
    # No default: the deployment's callback secret, or none (then nothing is sent signed).
    webhook_secret: str = ""
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
    refund_updated_rate: float = 0.0  # Stripe wire: refunds also announced by refund.updated
    # Stripe wire: an intent waits for the buyer's page to confirm it through Stripe.js (the
    # stand-in, loadtest/provider_sim/stripe_js.py) instead of being confirmed at once.
    buyer_confirms: bool = False
    seed: int = 7


SENDS_MAX = 64  # callbacks in flight at once (and the HTTP client's connections)


def reply(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


class Wire(Protocol):
    """How the simulator's messages look to the merchant: ids, events and their signature."""

    name: str
    attempt_prefix: str
    intent_prefix: str

    def event(
        self,
        sim: "Simulator",
        kind: str,
        a: Attempt,
        data: dict[str, Any],
        overrides: dict[str, Any],
    ) -> dict[str, Any]:
        """The event body for one of the simulator's facts (`kind` in its own words)."""
        ...

    def signature(self, secret: str, body: bytes, timestamp: int) -> tuple[str, str]: ...


class Simulator:
    def __init__(self, config: SimConfig, wire: Wire) -> None:
        self.config = config
        self.wire = wire
        self.rng = random.Random(config.seed)
        self.ids = itertools.count(1)
        # Provider ids are unique forever, across restarts of the simulator too.
        self.run = secrets.token_hex(4)
        self.by_key: dict[str, Attempt] = {}
        self.by_attempt: dict[str, Attempt] = {}
        self.by_intent: dict[str, list[Attempt]] = {}  # oldest first
        self.refunds: dict[str, dict[str, Any]] = {}  # refund idempotency key -> refund
        self.refund_log: dict[str, dict[str, Any]] = {}  # refund id -> refund, whoever asked
        self.ledger: list[dict[str, Any]] = []
        self.deliveries = 0
        # Callbacks: events emitted, extra copies of them sent (duplicates), events never sent.
        self.callbacks = {"events": 0, "duplicates": 0, "lost": 0}
        self.tasks: set[asyncio.Task[None]] = set()
        self.http: httpx.AsyncClient | None = None
        # Unbounded, a burst answered slowly (durable waits, 503s) queued in httpx's pool, whose
        # scheduling of waiters grows with the queue: /healthz went unanswered for seconds.
        self.sending = asyncio.Semaphore(SENDS_MAX)

    # -- the books and the callbacks (the test endpoints use them too) ---------------------

    def spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{self.run}_{next(self.ids)}"

    def delay_s(self) -> float:
        c = self.config
        return self.rng.uniform(c.delay_min_ms, c.delay_max_ms) / 1000

    def new_attempt(
        self, key: str, amount: int, currency: str, metadata: dict[str, Any], intent_id: str = ""
    ) -> Attempt:
        """A new authorization attempt, on a new intent unless `intent_id` is given; from now on
        it answers for its key."""
        n = next(self.ids)
        a = Attempt(
            f"{self.wire.attempt_prefix}{self.run}_{n}",
            intent_id or f"{self.wire.intent_prefix}{self.run}_{n}",
            key,
            amount,
            currency,
            metadata,
        )
        self.by_key[key] = a
        self.by_attempt[a.attempt_id] = a
        self.by_intent.setdefault(a.intent_id, []).append(a)
        return a

    async def _send(
        self, event: dict[str, Any], delay_s: float, answered: dict[str, Any] | None = None
    ) -> None:
        """Deliver one event at least once: retry with backoff until a 2xx answer; the first
        2xx answer of a capture's copies is noted on its ledger entry (`answered`)."""
        await asyncio.sleep(delay_s)
        body = orjson.dumps(event)
        assert self.http is not None
        if not self.config.webhook_secret:
            log.error("no webhook secret: event %s not sent", event["id"])
            return
        for attempt in range(self.config.retries_max):
            name, value = self.wire.signature(self.config.webhook_secret, body, int(time.time()))
            headers = {name: value, "Content-Type": "application/json"}
            try:
                async with self.sending:
                    r = await self.http.post(self.config.webhook_url, content=body, headers=headers)
                self.deliveries += 1
                if r.status_code < 300:
                    if answered is not None:
                        answered.setdefault("answered_at_s", time.time())
                    return
            except httpx.HTTPError:
                pass
            backoff = self.config.retry_base_ms * 2**attempt / 1000
            await asyncio.sleep(min(backoff, 10) * self.rng.uniform(0.5, 1.0))
        log.warning("gave up delivering %s", event["id"])

    def emit(
        self,
        kind: str,
        a: Attempt,
        data: dict[str, Any],
        delay_s: float,
        overrides: dict[str, Any] | None = None,
        answered: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Announce one fact about `a` (at least once, maybe lost); returns the event sent.
        `answered`: the ledger entry on which the first 2xx answer's time is noted."""
        event = self.wire.event(self, kind, a, data, overrides or {})
        self.callbacks["events"] += 1
        if self.rng.random() < self.config.loss_rate:
            self.callbacks["lost"] += 1
            return event
        copies = 1
        if self.rng.random() < self.config.duplicate_rate:
            copies += self.rng.choice((1, 2))
        self.callbacks["duplicates"] += copies - 1
        for n in range(copies):
            self.spawn(self._send(event, delay_s + n * self.delay_s(), answered))
        return event

    def charge_data(self, a: Attempt) -> dict[str, Any]:
        return {
            "attempt_id": a.attempt_id,
            "intent_id": a.intent_id,
            "idempotency_key": a.idempotency_key,
            "amount": a.captured_amount if a.status == "captured" else a.amount,
            "currency": a.currency,
            "status": a.status,
            "metadata": a.metadata,
            "refunded": a.refunded,
            "amount_refunded": a.refunded_amount,
            "disputed": a.disputed,
        }

    def money(self, kind: str, a: Attempt, amount: int) -> None:
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

    def capture(self, a: Attempt, amount: int) -> None:
        contradicted = a.status in ("declined", "failed")
        a.status = "captured"
        a.captured_amount = amount
        self.money("capture", a, amount)
        entry = self.ledger[-1]
        entry["contradicted"] = contradicted  # it said declined or failed before
        self.emit("charge.captured", a, self.charge_data(a), 0.0, answered=entry)

    async def decide(self, a: Attempt, outcome: str, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        if outcome == "captured":
            self.capture(a, a.amount)
            return
        a.status = outcome
        self.emit(f"charge.{outcome}", a, self.charge_data(a), 0.0)
        if outcome == "declined" and self.rng.random() < self.config.contradict_rate:
            # The provider changes its mind: it captures the attempt it said it declined.
            await asyncio.sleep(self.config.late_delay_ms / 1000)
            self.capture(a, a.amount)

    # -- endpoints -------------------------------------------------------------------------

    async def create_charge(self, request: Request) -> Response:
        key = request.headers.get("Idempotency-Key", "")
        if not key:
            return reply({"error": "idempotency_key_required"}, 400)
        # The body is read before the key is looked up: from the lookup to the registration
        # nothing awaits, so two concurrent requests with one key make one attempt (as the
        # provider's idempotency promises), never two.
        body = orjson.loads(await request.body())
        if key in self.by_key:
            existing = self.by_key[key]
            if time.time() < existing.late_until_s:
                return reply({"error": "timeout"}, 504)
            return reply(self.charge_data(existing))
        amount, currency = int(body["amount"]), str(body.get("currency", "EUR"))
        a = self.open_attempt(key, amount, currency, dict(body.get("metadata", {})))
        if a.late_until_s:
            return reply({"error": "timeout"}, 504)  # the client is told "timed out"
        return reply(self.charge_data(a), 201)

    def open_attempt(
        self, key: str, amount: int, currency: str, metadata: dict[str, Any]
    ) -> Attempt:
        """A new attempt under `key`, its outcome rolled now and announced later; a late one
        (`late_until_s` set) captures after `late_delay_ms`, its caller told "timed out"."""
        a = self.new_attempt(key, amount, currency, metadata)
        c = self.config
        if c.buyer_confirms:  # decided when the page confirms (provider_sim_stripe_js.py)
            a.stage = "requires_payment_method"
            return a
        roll = self.rng.random()
        if roll < c.decline_rate:
            outcome = "declined"
        elif roll < c.decline_rate + c.fail_rate:
            outcome = "failed"
        else:
            outcome = "captured"
        if outcome == "captured" and self.rng.random() < c.late_rate:
            a.late_until_s = time.time() + c.late_delay_ms / 1000
            self.spawn(self.decide(a, "captured", c.late_delay_ms / 1000))
        else:
            self.spawn(self.decide(a, outcome, self.delay_s()))
        return a

    async def get_charge(self, request: Request) -> Response:
        a = self.by_attempt.get(request.path_params["attempt_id"])
        return reply(self.charge_data(a)) if a else reply({"error": "not_found"}, 404)

    async def find_charge(self, request: Request) -> Response:
        a = self.by_key.get(request.query_params.get("idempotency_key", ""))
        return reply(self.charge_data(a)) if a else reply({"error": "not_found"}, 404)

    async def get_intent(self, request: Request) -> Response:
        intent = request.path_params["intent_id"]
        found = [self.charge_data(a) for a in self.by_attempt.values() if a.intent_id == intent]
        return (
            reply({"intent_id": intent, "attempts": found})
            if found
            else reply({"error": "not_found"}, 404)
        )

    async def create_refund(self, request: Request) -> Response:
        key = request.headers.get("Idempotency-Key", "")
        if not key:
            return reply({"error": "idempotency_key_required"}, 400)
        if key in self.refunds:
            return reply(self.refunds[key])
        body = orjson.loads(await request.body())
        a = self.by_attempt.get(body.get("attempt_id", "")) or self.by_key.get(
            body.get("idempotency_key", "")
        )
        amount = body.get("amount")
        refusal = self.refusal(a, amount)
        if refusal is not None:
            return reply(refusal, 503 if refusal["error"] == "processor_unavailable" else 409)
        assert a is not None
        refund = self.refund(a, requested_by="merchant", amount=amount)
        self.refunds[key] = refund
        return reply(refund, 201)

    def refusal(self, a: Attempt | None, amount: Any = None) -> dict[str, Any] | None:
        """Why the attempt cannot be refunded now, all it holds or `amount` of it (None: it
        can)."""
        if a is None or a.status != "captured":
            return {"error": "not_captured"}
        if a.refunded:  # never refunds more than it captured
            return {"error": "already_refunded", "refund_id": a.refunds[0]}
        if amount is not None and (
            not isinstance(amount, int) or isinstance(amount, bool) or amount < 1
        ):
            return {"error": "invalid_amount"}
        if amount is not None and amount > a.unrefunded:
            return {"error": "amount_too_large", "unrefunded": a.unrefunded}
        if a.disputed in ("open", "lost"):
            return {"error": "charge_disputed"}
        if self.rng.random() < self.config.refund_fail_rate:
            return {"error": "processor_unavailable"}
        return None

    def refund(self, a: Attempt, *, requested_by: str, amount: int | None = None) -> dict[str, Any]:
        """Give back `amount` of the attempt (default: all it still holds)."""
        amount = a.unrefunded if amount is None else amount
        refund_id = f"re_{self.run}_{next(self.ids)}"
        refund = {
            "refund_id": refund_id,
            "attempt_id": a.attempt_id,
            "idempotency_key": a.idempotency_key,
            "amount": amount,
            "amount_refunded": a.refunded_amount + amount,  # the attempt's total, this one in
            "currency": a.currency,
            "status": "succeeded",
            "requested_by": requested_by,  # merchant (our API) | provider (its dashboard)
            "metadata": a.metadata,
            "created": int(time.time()),
        }
        a.refunds.append(refund_id)
        a.refunded_amount += amount
        self.refund_log[refund_id] = refund
        self.money("refund", a, amount)
        self.ledger[-1]["requested_by"] = requested_by
        self.emit("refund.succeeded", a, refund, self.delay_s())
        if self.wire.name == "stripe" and self.rng.random() < self.config.refund_updated_rate:
            self.emit("refund.updated", a, refund, 2 * self.delay_s())
        return refund

    async def get_ledger(self, request: Request) -> Response:
        captured = sum(e["amount"] for e in self.ledger if e["kind"] == "capture")
        refunded = sum(e["amount"] for e in self.ledger if e["kind"] == "refund")
        disputed = sum(e["amount"] for e in self.ledger if e["kind"] == "dispute_withdrawal")
        reinstated = sum(e["amount"] for e in self.ledger if e["kind"] == "dispute_reinstatement")
        return reply(
            {
                "entries": self.ledger,
                "captured": captured,
                "refunded": refunded,
                "disputed": disputed,
                "reinstated": reinstated,
                "net": captured - refunded - disputed + reinstated,
                "deliveries": self.deliveries,
                "callbacks": self.callbacks,
                "pending_deliveries": len(self.tasks),
            }
        )

    async def put_config(self, request: Request) -> Response:
        changes = orjson.loads(await request.body())
        self.config = replace(self.config, **changes)
        return reply(asdict(self.config))

    async def health(self, request: Request) -> Response:
        return reply({"ok": True})
