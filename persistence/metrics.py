"""The ledger writer's Prometheus series (served by `onsale ledger` on its metrics port):
throughput, refusals, failed passes, the lag per event, and the process's own series.

The lag is read from Redis on its own clock (`follow_lag`), not after each written batch: while
PostgreSQL is down no batch is written, and the lag must still grow with the entries that wait.
Its read time is exported too, so a lag that cannot be read (Redis down) shows as old."""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from engine.errors import StoreUnavailable
from engine.loops import repeat
from engine.metrics import add_process_collectors

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
