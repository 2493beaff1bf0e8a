"""The subset of Stripe's HTTP API the onsale Stripe adapter uses, over the simulator's books:
form-encoded requests (`metadata[event_id]=...`), Stripe's JSON objects and error format
(`{"error": {"type", "code", "message", "param"}}`), a bearer secret key, Idempotency-Key
semantics (the same key and parameters replay the first answer with `Idempotent-Replayed`;
other parameters under it are an `idempotency_error`), list pagination (`starting_after`,
`has_more`), `created[gte]` filters, `expand[]` and the intent search by metadata. The official
library pointed at it (`api_base`) runs end to end. The objects: loadtest/provider_sim/stripe.py."""

import hashlib
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from loadtest.provider_sim import stripe as wire
from loadtest.provider_sim.attempt import Attempt
from loadtest.provider_sim.charges import Simulator

_KEY_PART = re.compile(r"\[([^\]]*)\]")
_SEARCH = re.compile(r"""^\s*metadata\[['"]([^'"]+)['"]\]\s*:\s*['"]([^'"]*)['"]\s*$""")
LIST_MAX = 100


def decode(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Stripe's form encoding (`a[b][c]=v`, `a[0]=v`) as nested dicts and lists."""
    out: dict[str, Any] = {}
    for raw_key, value in pairs:
        head = raw_key.split("[", 1)[0]
        path = [head, *_KEY_PART.findall(raw_key[len(head) :])]
        node: dict[str, Any] = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return {k: _lists(v) for k, v in out.items()}


def _lists(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    value = {k: _lists(v) for k, v in value.items()}
    if value and all(k.isdigit() for k in value):
        return [value[k] for k in sorted(value, key=int)]
    return value


def error(status: int, kind: str, message: str, code: str = "", **headers: str) -> Response:
    body = {"error": {"type": kind, "message": message, **({"code": code} if code else {})}}
    return Response(orjson.dumps(body), status, headers, media_type="application/json")


def ok(data: dict[str, Any], **headers: str) -> Response:
    return Response(orjson.dumps(data), 200, headers, media_type="application/json")


def missing(kind: str, object_id: str) -> Response:
    return error(404, "invalid_request_error", f"No such {kind}: '{object_id}'", "resource_missing")


class StripeApi:
    """Stripe's endpoints over one simulator. `api_key`: the only secret key accepted."""

    def __init__(self, sim: Simulator, api_key: str) -> None:
        self.sim, self.api_key = sim, api_key
        self.answers: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}  # idempotency

    def routes(self) -> list[Route]:
        guard = self._authenticated
        return [
            Route("/v1/payment_intents", guard(self.create_intent), methods=["POST"]),
            Route("/v1/payment_intents/search", guard(self.search_intents), methods=["GET"]),
            Route("/v1/payment_intents/{id}", guard(self.get_intent), methods=["GET"]),
            Route("/v1/charges", guard(self.list_charges), methods=["GET"]),
            Route("/v1/charges/{id}", guard(self.get_charge), methods=["GET"]),
            Route("/v1/refunds", guard(self.create_refund), methods=["POST"]),
            Route("/v1/refunds", guard(self.list_refunds), methods=["GET"]),
            Route("/v1/disputes", guard(self.list_disputes), methods=["GET"]),
        ]

    def _authenticated(self, handler: Callable[..., Any]) -> Callable[[Request], Any]:
        async def guarded(request: Request) -> Response:
            if request.headers.get("authorization", "") != f"Bearer {self.api_key}":
                return error(401, "invalid_request_error", "Invalid API Key provided")
            response: Response = await handler(request)
            return response

        return guarded

    # -- objects, expanded as asked ----------------------------------------------------------

    def _resolve(self, object_id: str) -> dict[str, Any] | None:
        if object_id in self.sim.by_intent:
            return wire.intent(wire.focus(self.sim, object_id))
        a = self.sim.by_attempt.get(object_id)
        return wire.charge(a) if a else None

    def _expand(self, o: dict[str, Any], paths: list[str]) -> dict[str, Any]:
        for path in paths:
            head, _, rest = path.partition(".")
            value = o.get(head)
            if isinstance(value, str):
                value = self._resolve(value) or value
            if isinstance(value, dict):
                o[head] = self._expand(value, [rest] if rest else [])
        return o

    def _page(self, request: Request, url: str, items: list[dict[str, Any]]) -> Response:
        """A list object: newest first, `starting_after`, `limit`, `created[...]`, `expand`."""
        q = decode(request.query_params.multi_items())
        created = q.get("created")
        if isinstance(created, dict):
            bounds = {"gte": int.__ge__, "gt": int.__gt__, "lte": int.__le__, "lt": int.__lt__}
            for op, test in bounds.items():
                if op in created:
                    items = [o for o in items if test(int(o["created"]), int(created[op]))]
        items = sorted(items, key=lambda o: int(o["created"]), reverse=True)
        after = q.get("starting_after")
        if after:
            ids = [o["id"] for o in items]
            items = items[ids.index(after) + 1 :] if after in ids else []
        limit = min(int(q.get("limit", 10)), LIST_MAX)
        expand = [p.removeprefix("data.") for p in q.get("expand", [])]
        data = [self._expand(o, expand) for o in items[:limit]]
        return ok({"object": "list", "data": data, "has_more": len(items) > limit, "url": url})

    # -- payment intents ---------------------------------------------------------------------

    async def create_intent(self, request: Request) -> Response:
        key = request.headers.get("idempotency-key", "")
        params = decode(parse_qsl((await request.body()).decode(), keep_blank_values=True))
        replay = self._replay("intent", key, params)
        if replay is not None:
            return replay
        existing = self.sim.by_key.get(key) if key else None
        if existing is None:
            try:
                amount, currency = int(params["amount"]), str(params["currency"]).upper()
            except (KeyError, ValueError):
                return error(400, "invalid_request_error", "amount and currency are required",
                             "parameter_missing")  # fmt: skip
            existing = self.sim.open_attempt(key, amount, currency, params.get("metadata", {}))
        if time.time() < existing.late_until_s:  # the simulator's timeout: not an answer
            return error(504, "api_error", "Request timed out", **{"Stripe-Should-Retry": "true"})
        return self._answer("intent", key, params, wire.intent(existing))

    def _replay(self, kind: str, key: str, params: dict[str, Any]) -> Response | None:
        found = self.answers.get((kind, key)) if key else None
        if found is None:
            return None
        fingerprint, body = found
        if fingerprint != _fingerprint(params):
            why = f"Keys for idempotent requests can only be used with the same parameters ({key})"
            return error(400, "idempotency_error", why)
        return ok(body, **{"Idempotent-Replayed": "true"})

    def _answer(
        self, kind: str, key: str, params: dict[str, Any], body: dict[str, Any]
    ) -> Response:
        if key:
            self.answers[(kind, key)] = (_fingerprint(params), body)
        return ok(body)

    async def get_intent(self, request: Request) -> Response:
        intent_id = request.path_params["id"]
        if intent_id not in self.sim.by_intent:
            return missing("payment_intent", intent_id)
        o = wire.intent(wire.focus(self.sim, intent_id))
        return ok(self._expand(o, decode(request.query_params.multi_items()).get("expand", [])))

    async def search_intents(self, request: Request) -> Response:
        q = decode(request.query_params.multi_items())
        m = _SEARCH.match(str(q.get("query", "")))
        if m is None:
            return error(400, "invalid_request_error", "query must be metadata['k']:'v'",
                         "parameter_invalid")  # fmt: skip
        name, value = m.groups()
        found = [
            self._expand(wire.intent(wire.focus(self.sim, pi)), [
                p.removeprefix("data.") for p in q.get("expand", [])])
            for pi, attempts in self.sim.by_intent.items()
            if str(attempts[0].metadata.get(name)) == value
        ]  # fmt: skip
        body = {"object": "search_result", "data": found, "has_more": False, "next_page": None,
                "url": "/v1/payment_intents/search"}  # fmt: skip
        return ok(body)

    # -- charges, refunds, disputes ------------------------------------------------------------

    async def get_charge(self, request: Request) -> Response:
        a = self.sim.by_attempt.get(request.path_params["id"])
        if a is None:
            return missing("charge", request.path_params["id"])
        expand = decode(request.query_params.multi_items()).get("expand", [])
        return ok(self._expand(wire.charge(a), expand))

    async def list_charges(self, request: Request) -> Response:
        intent = request.query_params.get("payment_intent")
        attempts = self.sim.by_intent.get(intent, []) if intent else self.sim.by_attempt.values()
        return self._page(request, "/v1/charges", [wire.charge(a) for a in attempts])

    async def create_refund(self, request: Request) -> Response:
        key = request.headers.get("idempotency-key", "")
        params = decode(parse_qsl((await request.body()).decode(), keep_blank_values=True))
        replay = self._replay("refund", key, params)
        if replay is not None:
            return replay
        a = self._refunded_attempt(params)
        amount = int(params["amount"]) if str(params.get("amount", "")).isdigit() else None
        refusal = self.sim.refusal(a, amount)
        if refusal is not None:
            return _refusal(refusal, a)
        assert a is not None
        r = self.sim.refund(a, requested_by="merchant", amount=amount)
        r["request_metadata"] = params.get("metadata", {})
        return self._answer("refund", key, params, wire.refund(self.sim, r))

    def _refunded_attempt(self, params: dict[str, Any]) -> Attempt | None:
        if "charge" in params:
            return self.sim.by_attempt.get(str(params["charge"]))
        attempts = self.sim.by_intent.get(str(params.get("payment_intent", "")))
        return wire.focus(self.sim, attempts[0].intent_id) if attempts else None

    async def list_refunds(self, request: Request) -> Response:
        charge_id = request.query_params.get("charge")
        refunds = [
            wire.refund(self.sim, r)
            for r in self.sim.refund_log.values()
            if not charge_id or r["attempt_id"] == charge_id
        ]
        return self._page(request, "/v1/refunds", refunds)

    async def list_disputes(self, request: Request) -> Response:
        charge_id = request.query_params.get("charge")
        disputes = [
            wire.dispute(a)
            for a in self.sim.by_attempt.values()
            if a.disputed and (not charge_id or a.attempt_id == charge_id)
        ]
        return self._page(request, "/v1/disputes", disputes)


def _fingerprint(params: dict[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(params, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _refusal(refusal: dict[str, Any], a: Attempt | None) -> Response:
    """The simulator's refusal of a refund, as Stripe words it."""
    why = refusal["error"]
    if why == "processor_unavailable":
        return error(500, "api_error", "An error occurred with our connection to the bank")
    if why == "already_refunded":
        assert a is not None
        return error(400, "invalid_request_error",
                     f"Charge {a.attempt_id} has already been refunded.",
                     "charge_already_refunded")  # fmt: skip
    if why == "amount_too_large":
        return error(400, "invalid_request_error",
                     f"Refund amount is greater than unrefunded amount on charge "
                     f"({refusal['unrefunded']}).", "amount_too_large")  # fmt: skip
    if why == "charge_disputed":
        return error(400, "invalid_request_error", "This charge is disputed.", "charge_disputed")
    return error(400, "invalid_request_error", "This charge has no captured money to refund.",
                 "charge_not_refundable")  # fmt: skip
