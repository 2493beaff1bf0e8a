"""The worker's Prometheus series (served by `onsale worker` on ONSALE_WORKER_METRICS_PORT).

- Each loop (sweep, trim, refunds, reconcile): passes, failed passes, when the last pass ended
  and how long it took (`Loops`, fed by `Loops.counted` around each loop's step).
- What the loops did, from their own counters, read at scrape time: holds expired, quarantined
  and freed; holds trimmed; refunds made, retried, refused and parked; charges reconciliation
  examined and resolved.
- What waits in Redis, per event, read on its own clock (`follow_backlog`) and not by the loops
  themselves, so a stuck or failing loop shows: the sweep lag (how long past its deadline the
  most overdue hold or quarantine still is), refunds due now, refunds waiting for a retry.

Also the process's own series (CPU, memory, open files, garbage collector)."""

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Gauge,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from engine.config.variables import Group, Int, Text, read_all
from engine.model.errors import StoreUnavailable
from engine.store.loops import repeat

if TYPE_CHECKING:
    from engine.store import Store

log = logging.getLogger("onsale.worker")

BACKLOG_INTERVAL_S = 1.0  # how often the backlog is read from Redis


def add_process_collectors(registry: CollectorRegistry) -> None:
    """The default series of a Prometheus client (process_*: CPU, memory, open files; python_*:
    the interpreter and its garbage collector) in a private registry."""
    for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(collector)


@dataclass
class LoopRecord:
    passes: int = 0
    errors: int = 0
    last_pass_s: float = 0.0  # Unix time the last pass ended (0: none yet)
    last_duration_s: float = 0.0


@dataclass
class Loops:
    """Passes and failures of each loop of a process, by loop name."""

    records: dict[str, LoopRecord] = field(default_factory=dict)

    def counted(
        self, name: str, step: Callable[[], Awaitable[object]]
    ) -> Callable[[], Awaitable[bool]]:
        """`step` as a `repeat` step that records its passes; True when the step said so (a
        worker that left work behind), False for any other answer."""
        record = self.records.setdefault(name, LoopRecord())

        async def once() -> bool:
            started = time.perf_counter()
            behind = await step()
            record.passes += 1
            record.last_duration_s = time.perf_counter() - started
            record.last_pass_s = time.time()
            return behind is True

        return once

    def failed(self, name: str) -> Callable[[], None]:
        """The `on_error` of the loop `name`: counts its failed passes."""
        record = self.records.setdefault(name, LoopRecord())

        def count() -> None:
            record.errors += 1

        return count


# (loop, series, help, the loop's stats counters it shows, each as a `result` label value)
OUTCOMES: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("sweep", "onsale_sweep_holds", "Holds the sweeper moved", ("expired", "quarantined", "freed")),
    ("trim", "onsale_trim_holds", "Ended holds trimmed from Redis", ("trimmed",)),
    ("refunds", "onsale_refunds", "Refund attempts by result",
     ("refunded", "retried", "refused", "parked")),
    ("reconcile", "onsale_reconcile_charges", "Charges reconciliation asked about, by result",
     ("examined", "resolved", "never_reached_provider", "still_processing",
      "provider_unavailable", "rechecked", "contradictions")),
)  # fmt: skip


class LoopCollector:
    """The loops' passes and their own counters, read when scraped."""

    def __init__(self, loops: Loops, stats: Mapping[str, object]) -> None:
        self.loops, self.stats = loops, stats

    def collect(self) -> Iterator[Metric]:
        passes = CounterMetricFamily(
            "onsale_worker_passes", "Passes of each worker loop", labels=["loop"]
        )
        errors = CounterMetricFamily(
            "onsale_worker_errors", "Failed passes of each loop (retried)", labels=["loop"]
        )
        last = GaugeMetricFamily(
            "onsale_worker_last_pass_timestamp_seconds",
            "When each loop last ended a pass (Unix time)",
            labels=["loop"],
        )
        took = GaugeMetricFamily(
            "onsale_worker_last_pass_seconds",
            "How long each loop's last pass took",
            labels=["loop"],
        )
        for name, record in sorted(self.loops.records.items()):
            passes.add_metric([name], record.passes)
            errors.add_metric([name], record.errors)
            last.add_metric([name], record.last_pass_s)
            took.add_metric([name], record.last_duration_s)
        yield from (passes, errors, last, took)
        for loop, series, doc, counters in OUTCOMES:
            stats = self.stats.get(loop)
            if stats is None:
                continue
            family = CounterMetricFamily(series, doc, labels=["result"])
            for counter in counters:
                family.add_metric([counter], getattr(stats, counter))
            yield family


@dataclass(frozen=True, slots=True)
class Backlog:
    """What waits in one event's Redis state for the worker."""

    sweep_lag_s: float  # how long past due the most overdue hold or quarantine is (0: none)
    refunds_due: int  # refunds due now
    refunds_retrying: int  # refunds scheduled later, after a failed attempt


class WorkerMetrics:
    def __init__(self, loops: Loops, stats: Mapping[str, object]) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(LoopCollector(loops, stats))
        labels = ["event"]
        self.sweep_lag = Gauge(
            "onsale_sweep_lag_seconds",
            "How long past its deadline the most overdue hold or quarantine still is",
            labels,
            registry=self.registry,
        )
        self.refunds_due = Gauge(
            "onsale_refunds_due", "Refunds due now, not yet made", labels, registry=self.registry
        )
        self.refunds_retrying = Gauge(
            "onsale_refunds_retrying",
            "Refunds waiting for their next attempt after a failed one",
            labels,
            registry=self.registry,
        )
        self.backlog_read = Gauge(
            "onsale_worker_backlog_read_timestamp_seconds",
            "When the backlog was last read from Redis (Unix time)",
            registry=self.registry,
        )
        add_process_collectors(self.registry)
        self._events: set[str] = set()
        self._gauges = (self.sweep_lag, self.refunds_due, self.refunds_retrying)

    def record(self, backlog: Mapping[str, Backlog]) -> None:
        """One reading of every event's backlog; the series of events gone are dropped."""
        for event_id, b in backlog.items():
            self.sweep_lag.labels(event_id).set(b.sweep_lag_s)
            self.refunds_due.labels(event_id).set(b.refunds_due)
            self.refunds_retrying.labels(event_id).set(b.refunds_retrying)
        for event_id in self._events - backlog.keys():
            for gauge in self._gauges:
                gauge.remove(event_id)
        self._events = set(backlog)
        self.backlog_read.set(time.time())

    async def follow_backlog(
        self,
        read: Callable[[], Awaitable[Mapping[str, Backlog]]],
        stop: asyncio.Event,
        *,
        interval_s: float = BACKLOG_INTERVAL_S,
    ) -> None:
        """`record(await read())` every `interval_s` until `stop` is set."""

        async def once() -> bool:
            self.record(await read())
            return False

        await repeat(
            "backlog",
            once,
            stop,
            interval_s=interval_s,
            expected=(StoreUnavailable,),
            log=log,
            backoff_max_s=interval_s * 4,
        )


async def read_backlog(store: "Store") -> dict[str, Backlog]:
    """Every event's backlog, one round trip per event (its keys share a slot), against the
    server's clock (the one the deadline rule reads)."""
    read = store.read
    now_ms = await read.server_time_ms()
    found: dict[str, Backlog] = {}
    for event_id in await read.event_ids():
        async with read.client.pipeline(transaction=False) as pipe:
            pipe.zrange(read._key(event_id, "deadlines"), 0, 0, withscores=True)
            pipe.zrange(read._key(event_id, "quarantines"), 0, 0, withscores=True)
            pipe.zcount(read._key(event_id, "refunds"), "-inf", now_ms)
            pipe.zcount(read._key(event_id, "refunds"), f"({now_ms}", "+inf")
            replies = await read._read(pipe.execute())
        found[event_id] = backlog_of(now_ms, replies)
    return found


def backlog_of(now_ms: int, replies: list[Any]) -> Backlog:
    """An event's backlog from its replies: the first deadline and quarantine end (ZRANGE 0 0
    WITHSCORES), refunds due and refunds scheduled later (ZCOUNT)."""
    deadline, quarantine, due, later = replies
    firsts = [int(rows[0][1]) for rows in (deadline, quarantine) if rows]
    lag_ms = max((now_ms - first for first in firsts), default=0)
    return Backlog(max(0, lag_ms) / 1000, int(due), int(later))


METRICS_HOST = Text(
    "ONSALE_METRICS_HOST", "address the exporter listens on (no credential: keep it private)",
    "127.0.0.1",
)  # fmt: skip
WORKER_METRICS_PORT = Int(
    "ONSALE_WORKER_METRICS_PORT", "`onsale worker`'s port (its loops, the sweep lag, refunds "
    "due and retrying)", 9109,
)  # fmt: skip
EXPORTER = Group(
    "Prometheus exporter of `onsale worker` and `onsale ledger`",
    (METRICS_HOST, WORKER_METRICS_PORT),
)


@dataclass(frozen=True)
class ExporterSettings:
    """Where `onsale worker` and `onsale ledger` serve their series (plain HTTP, no token:
    keep it on a private address; the default is this host only)."""

    metrics_host: str = METRICS_HOST.default
    worker_metrics_port: int = WORKER_METRICS_PORT.default

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "ExporterSettings":
        return cls(**read_all(env, EXPORTER))
