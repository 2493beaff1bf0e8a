"""The ledger writer's Prometheus series (served by `onsale ledger` on its metrics port):
throughput, refusals, failed passes, the lag per event, and the process's own series.

The lag is read from Redis on its own clock (`follow_lag`), not after each written batch: while
PostgreSQL is down no batch is written, and the lag must still grow with the entries that wait.
Its read time is exported too, so a lag that cannot be read (Redis down) shows as old."""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from engine.model.errors import StoreUnavailable
from engine.store.loops import repeat
from engine.workers.metrics import add_process_collectors

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

log = logging.getLogger("onsale.ledger")

LAG_INTERVAL_S = 0.5  # how often the lag is read from Redis


class LedgerMetrics:
    """Prometheus series of the writer: throughput, refusals, outages, and lag per event."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge

        self.registry = CollectorRegistry()
        self.entries = Counter(
            "onsale_ledger_entries_total", "Outbox entries written", registry=self.registry
        )
        self.alerts = Counter(
            "onsale_ledger_alerts_total", "Rows the ledger refused", registry=self.registry
        )
        self.errors = Counter(
            "onsale_ledger_errors_total",
            "Writer passes that failed (PostgreSQL or Redis unreachable); retried",
            registry=self.registry,
        )
        self.lag_entries = Gauge(
            "onsale_ledger_lag_entries",
            "Outbox entries not in the ledger",
            ["event"],
            registry=self.registry,
        )
        self.lag_seconds = Gauge(
            "onsale_ledger_lag_seconds",
            "Age of the oldest of them",
            ["event"],
            registry=self.registry,
        )
        self.lag_read = Gauge(
            "onsale_ledger_lag_read_timestamp_seconds",
            "When the lag was last read from Redis (Unix time)",
            registry=self.registry,
        )
        add_process_collectors(self.registry)
        self.webhooks = WebhookMetrics(self.registry)  # shown by the webhook sender
        self._events: set[str] = set()  # events with lag series

    async def read_lag(
        self, event_ids: list[str], lag: Callable[[str], Awaitable[tuple[int, float]]]
    ) -> None:
        """One reading of every event's lag; the series of events gone are dropped."""
        for event_id in event_ids:
            entries, seconds = await lag(event_id)
            self.lag_entries.labels(event_id).set(entries)
            self.lag_seconds.labels(event_id).set(seconds)
        for event_id in self._events - set(event_ids):
            self.lag_entries.remove(event_id)
            self.lag_seconds.remove(event_id)
        self._events = set(event_ids)
        self.lag_read.set(time.time())

    async def follow_lag(
        self,
        event_ids: Callable[[], Awaitable[list[str]]],
        lag: Callable[[str], Awaitable[tuple[int, float]]],
        stop: asyncio.Event,
        *,
        interval_s: float = LAG_INTERVAL_S,
    ) -> None:
        """`read_lag` every `interval_s` until `stop` is set, whatever the writer is doing."""

        async def once() -> bool:
            await self.read_lag(await event_ids(), lag)
            return False

        await repeat(
            "ledger lag",
            once,
            stop,
            interval_s=interval_s,
            expected=(StoreUnavailable, OSError),
            log=log,
            backoff_max_s=interval_s * 4,
        )


WEBHOOK_FIGURES_S = 15.0  # how often the delivery log's figures are read (a count over it)
DELIVERY_STATUSES = ("pending", "delivered", "failed")


class WebhookMetrics:
    """Merchant webhook deliveries, per endpoint, from the ledger's delivery log (ADR 0024):
    the deliveries by status, the attempts they took, the age of the oldest pending one, and
    whether the endpoint is enabled. Any ledger process may export them (they are the log's
    figures, not the process's)."""

    def __init__(self, registry: "CollectorRegistry") -> None:
        from prometheus_client import Gauge

        self.deliveries = Gauge(
            "onsale_webhook_deliveries",
            "Deliveries in the log, by status (delivered and failed ones until pruned)",
            ["endpoint", "status"],
            registry=registry,
        )
        self.attempts = Gauge(
            "onsale_webhook_attempts",
            "Attempts made on the deliveries in the log",
            ["endpoint"],
            registry=registry,
        )
        self.oldest_pending = Gauge(
            "onsale_webhook_oldest_pending_seconds",
            "Age of the endpoint's oldest pending delivery (0: none pending)",
            ["endpoint"],
            registry=registry,
        )
        self.enabled = Gauge(
            "onsale_webhook_endpoint_enabled",
            "1 while the endpoint receives deliveries (0: disabled, by an operator or a 410)",
            ["endpoint"],
            registry=registry,
        )
        self._endpoints: set[str] = set()

    def show(self, rows: list[Any]) -> None:
        """One reading of the log (the rows of the webhook_delivery_figures query)."""
        seen = set()
        for r in rows:
            endpoint = r["endpoint_id"]
            seen.add(endpoint)
            for status in DELIVERY_STATUSES:
                self.deliveries.labels(endpoint, status).set(r[status])
            self.attempts.labels(endpoint).set(r["attempts"])
            self.oldest_pending.labels(endpoint).set(r["oldest_pending_s"])
            self.enabled.labels(endpoint).set(1 if r["enabled"] else 0)
        for endpoint in self._endpoints - seen:  # deleted endpoints leave no series behind
            for status in DELIVERY_STATUSES:
                self.deliveries.remove(endpoint, status)
            for gauge in (self.attempts, self.oldest_pending, self.enabled):
                gauge.remove(endpoint)
        self._endpoints = seen
