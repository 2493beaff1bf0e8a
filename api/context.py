"""What every handler needs, built once per process: store, provider client, token signer,
metrics. Handlers are wrapped by `endpoint`, which maps every failure to a JSON error with a
stable code and records latency; nothing escapes as a bare 500."""

import hmac
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from starlette.requests import Request
from starlette.responses import Response

from api.errors import ApiError, error_response, from_engine
from api.identity import Identity, bearer_bytes
from api.limits import AddressLimiter
from api.settings import ApiSettings
from engine import errors, keys
from engine.providers import Provider
from engine.store import Store

log = logging.getLogger("onsale.api")

Handler = Callable[[Request], Awaitable[Response]]


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Histogram(
            "onsale_http_request_seconds",
            "HTTP request latency",
            ["route", "status"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
        )
        self.claims = Counter(
            "onsale_claims_total", "Claims by result", ["result"], registry=self.registry
        )
        self.outcomes = Counter(
            "onsale_provider_outcomes_total",
            "Callbacks by decision",
            ["decision", "first_seen"],
            registry=self.registry,
        )
        self.decisions = Counter(
            "onsale_decisions_total", "API-made decisions by kind", ["kind"], registry=self.registry
        )
        # Read from Redis at each scrape, not reported by the writer: a dead writer shows.
        self.ledger_behind = Gauge(
            "onsale_ledger_behind_entries",
            "Outbox entries not yet in the ledger",
            ["event"],
            registry=self.registry,
        )
        self.ledger_oldest = Gauge(
            "onsale_ledger_oldest_unmirrored_seconds",
            "Age of the oldest decision not yet in the ledger",
            ["event"],
            registry=self.registry,
        )
        # Labelled children looked up once: labels() takes a lock and builds a key each call.
        self._latency: dict[tuple[str, int], Any] = {}
        self._claims: dict[str, Any] = {}

    def observe(self, route: str, status: int, seconds: float) -> None:
        child = self._latency.get((route, status))
        if child is None:
            child = self._latency[(route, status)] = self.requests.labels(route, str(status))
        child.observe(seconds)

    def claimed(self, result: str) -> None:
        child = self._claims.get(result)
        if child is None:
            child = self._claims[result] = self.claims.labels(result)
        child.inc()


class StoreCollector:
    """The store's own counters (auto-pipelining, sold-out memory), read at scrape time."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        counter, gauge = CounterMetricFamily, GaugeMetricFamily
        rows: list[tuple[type[Metric], str, str, float]] = []
        if (p := self.store.pipeline) is not None:
            rows += [
                (counter, "onsale_pipeline_calls", "Script calls sent pipelined", p.stats.calls),
                (counter, "onsale_pipeline_batches", "Pipelined round trips", p.stats.batches),
                (
                    counter,
                    "onsale_pipeline_expired",
                    "Calls failed unsent (waited too long)",
                    p.stats.expired,
                ),
                (gauge, "onsale_pipeline_largest_batch", "Largest batch so far", p.stats.largest),
            ]
        if (m := self.store.sold_out) is not None:
            rows += [
                (
                    counter,
                    "onsale_sold_out_answered",
                    "Claims refused from memory",
                    m.stats.answered,
                ),
                (counter, "onsale_sold_out_snapshots", "Hold-id snapshots read", m.stats.snapshots),
                (
                    counter,
                    "onsale_sold_out_dropped",
                    "Memories dropped by a restock",
                    m.stats.dropped,
                ),
                (
                    gauge,
                    "onsale_sold_out_listening",
                    "1 while the restock subscription is confirmed",
                    1 if m.listening else 0,
                ),
            ]
        for kind, name, doc, value in rows:
            yield kind(name, doc, value=value)  # type: ignore[call-arg]


@dataclass
class Context:
    settings: ApiSettings
    store: Store
    provider: Provider
    identity: Identity
    metrics: Metrics
    addresses: AddressLimiter

    def login_of(self, request: Request, event_id: str | None = None) -> str:
        """The buyer's login; with `event_id`, refused unless the token is good for it."""
        return self.identity.caller(request, event_id).login

    def require_admin(self, request: Request) -> str:
        """The acting admin (recorded with what they do); 429 past the address's limit."""
        self.addresses.take(request)
        return self.identity.admin(request)

    def require_ops(self, request: Request) -> None:
        """/metrics and /openapi.json: the metrics token, or an admin credential."""
        token, raw = self.settings.metrics_token.encode(), bearer_bytes(request)
        if token and raw is not None and hmac.compare_digest(raw, token):
            return
        self.identity.admin(request)


def ctx(request: Request) -> Context:
    context: Context = request.app.state.ctx
    return context


def path_id(request: Request, name: str) -> str:
    value = str(request.path_params[name])
    if not keys.valid_id(value):
        raise ApiError(400, "invalid_request", f"{name} must match [A-Za-z0-9_.:-]{{1,64}}")
    return value


def endpoint(route: str) -> Callable[[Handler], Handler]:
    def wrap(handler: Handler) -> Handler:
        async def run(request: Request) -> Response:
            started = time.perf_counter()
            try:
                response = await handler(request)
            except ApiError as exc:
                extra = {"retry_after_s": exc.retry_after_s} if exc.retry_after_s else {}
                response = error_response(request, exc.code, exc.message, exc.status, **extra)
            except errors.EngineError as exc:
                response = from_engine(request, exc)
            except errors.InvariantViolation:
                log.exception("invariant violation on %s", route)
                response = error_response(request, "internal", "invariant violation", 500)
            except Exception:
                log.exception("unexpected error on %s", route)
                response = error_response(request, "internal", "unexpected error", 500)
            metrics = ctx(request).metrics
            metrics.observe(route, response.status_code, time.perf_counter() - started)
            return response

        return run

    return wrap
