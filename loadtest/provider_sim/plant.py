"""A provider that contradicts itself, on request: the simulator's POST
/v1/test/attempts/{attempt_id}/... endpoints, for tests, the demo and the load tools. Each does
to an attempt what a real provider sometimes does unasked (capture after its own decline, retry
on the same intent, refund from its dashboard, open and close a dispute) or sends a signed
message that disagrees with the attempt, so that reconciliation and the money checks have
something to find."""

import time

import orjson
from starlette.requests import Request
from starlette.responses import Response

from loadtest.provider_sim.attempt import Attempt
from loadtest.provider_sim.charges import Simulator, reply


class Contradictions:
    """The test endpoints, acting on one simulator's attempts."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim

    def _planted(self, request: Request) -> Attempt | None:
        return self.sim.by_attempt.get(request.path_params["attempt_id"])

    async def capture(self, request: Request) -> Response:
        """Capture now, whatever was said before (a capture after a decline), optionally of
        another amount than the one asked for."""
        a = self._planted(request)
        if a is None:
            return reply({"error": "not_found"}, 404)
        body = orjson.loads(await request.body() or b"{}")
        if a.status == "captured":
            return reply({"error": "already_captured"}, 409)
        a.currency = str(body.get("currency", a.currency))
        self.sim.capture(a, int(body.get("amount", a.amount)))
        return reply(self.sim.charge_data(a))

    async def retry(self, request: Request) -> Response:
        """A new authorization attempt on the same intent and key (after a decline, say), decided
        at once: `{"outcome": "captured"}` by default."""
        a = self._planted(request)
        if a is None:
            return reply({"error": "not_found"}, 404)
        body = orjson.loads(await request.body() or b"{}")
        outcome = str(body.get("outcome", "captured"))
        b = self.sim.new_attempt(a.idempotency_key, a.amount, a.currency, a.metadata, a.intent_id)
        self.sim.spawn(self.sim.decide(b, outcome, 0.0))
        return reply(self.sim.charge_data(b), 201)

    async def refund(self, request: Request) -> Response:
        """A refund made from the provider's dashboard: nobody asked us. All the attempt still
        holds, or `amount` of it."""
        a = self._planted(request)
        amount = orjson.loads(await request.body() or b"{}").get("amount")
        if a is None or self.sim.refusal(a, amount) is not None:
            return reply({"error": "not_refundable"}, 409)
        return reply(self.sim.refund(a, requested_by="provider", amount=amount), 201)

    async def dispute(self, request: Request) -> Response:
        """A dispute (chargeback): `open` withdraws the money, `won` gives it back, `lost`
        keeps it withdrawn for good."""
        a = self._planted(request)
        body = orjson.loads(await request.body() or b"{}")
        status = body.get("status", "open")
        if a is None or a.status != "captured" or status not in ("open", "won", "lost"):
            return reply({"error": "not_disputable"}, 409)
        if a.disputed != ("" if status == "open" else "open"):  # open once, then close once
            return reply({"error": "dispute_state", "disputed": a.disputed}, 409)
        if status == "open":
            self.sim.money("dispute_withdrawal", a, a.captured_amount)
        elif status == "won":
            self.sim.money("dispute_reinstatement", a, a.captured_amount)
        a.disputed = status
        a.disputed_s = a.disputed_s or time.time()
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
        self.sim.emit(kind, a, data, 0.0)
        return reply(data, 201)

    async def callback(self, request: Request) -> Response:
        """A signed message about the attempt with fields overridden (no money moves):
        `{"type": ..., "data": {...}, "metadata": {...}}` (on Stripe's wire, `data` overrides
        fields of the event's object and `metadata` its intent's metadata)."""
        a = self._planted(request)
        if a is None:
            return reply({"error": "not_found"}, 404)
        body = orjson.loads(await request.body() or b"{}")
        overrides = {"data": body.get("data", {}), "metadata": body.get("metadata", {})}
        kind = str(body.get("type", f"charge.{a.status}"))
        event = self.sim.emit(kind, a, self.sim.charge_data(a), 0.0, overrides)
        return reply(event["data"], 202)

    async def by_key(self, request: Request) -> Response:
        """The simulator's own record of the latest attempt under an idempotency key (on
        either wire: tests find the attempt a charge of ours made)."""
        a = self.sim.by_key.get(request.path_params["key"])
        return reply(self.sim.charge_data(a)) if a else reply({"error": "not_found"}, 404)
