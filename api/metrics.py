"""The API's Prometheus series, one view over every worker process of `onsale serve`.

`onsale serve` runs uvicorn's worker processes, and a scrape of /metrics reaches one of them.
Each process therefore writes its values to memory-mapped files in a directory private to this
`onsale serve` (prometheus_client's multiprocess mode; PROMETHEUS_MULTIPROC_DIR, set and wiped
by `onsale serve`), and the process that answers the scrape adds up every process's files:
counters and histograms are summed (a worker that died and was replaced keeps its counts, so
nothing goes backwards), the store's largest pipelined batch is the maximum over live workers,
and the restock subscription gauge their minimum (0 when one worker is not listening). The
process series (CPU, memory, open files) are read from /proc for every live worker, labelled
with its `pid`. An app made in a process without that directory (tests, tools) exports its own
registry, the process series included.

The store's counters (auto-pipelining, sold-out memory) live in plain objects the engine owns;
each process copies them into its series every second and before it answers a scrape."""

import asyncio
import logging
import os
import re
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.process_collector import ProcessCollector

from engine.gate.soldout import SoldOutMemory
from engine.model.errors import StoreUnavailable
from engine.store import Store
from engine.store.loops import repeat
from engine.workers.metrics import add_process_collectors

log = logging.getLogger("onsale.api")

COPY_INTERVAL_S = 1.0
PID_OF_FILE = re.compile(r"_(\d+)\.db$")


def multiprocess_dir() -> str | None:
    """The multiprocess directory, when this process writes its values there (it does when the
    variable was set before prometheus_client was first imported)."""
    from prometheus_client import values

    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    return path if path and values.ValueClass is not values.MutexValue else None


class Metrics:
    def __init__(self, store: Store | None = None, sold_out: SoldOutMemory | None = None) -> None:
        """`store`: its own counters are exported too (and the sold-out memory's, if any)."""
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
        self.early_lane = Counter(
            "onsale_early_lane",
            "Claims their connection held before ASGI (api/claim_front/connection.py): answered "
            "there, or passed on as ASGI requests",
            ["outcome"],
            registry=self.registry,
        )
        if multiprocess_dir() is None:
            add_process_collectors(self.registry)
        # Labelled children looked up once: labels() takes a lock and builds a key each call.
        self._latency: dict[tuple[str, int], Any] = {}
        self._claims: dict[str, Any] = {}
        self._early: dict[str, Any] = {}
        self._store = StoreSeries(store, sold_out, self.registry) if store is not None else None

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

    def early(self, outcome: str) -> None:
        """A claim its connection held: `answered` there, or `passed` on to ASGI."""
        child = self._early.get(outcome)
        if child is None:
            child = self._early[outcome] = self.early_lane.labels(outcome)
        child.inc()

    def copy_store(self) -> None:
        if self._store is not None:
            self._store.copy()

    async def follow_store(self, stop: asyncio.Event) -> None:
        """`copy_store` every second until `stop` is set (the other workers' share of a
        scrape is at most this old)."""

        async def once() -> bool:
            self.copy_store()
            return False

        await repeat(
            "metrics", once, stop, interval_s=COPY_INTERVAL_S, expected=(StoreUnavailable,), log=log
        )

    def exposition(self, extra: Iterable[Metric] = ()) -> bytes:
        """The text a scrape gets: every worker's series (or this process's), and `extra`
        (series read at scrape time, the same whichever worker answers)."""
        self.copy_store()
        registry = CollectorRegistry()
        path = multiprocess_dir()
        if path is None:
            registry.register(Families(self.registry.collect))
        else:
            MultiProcessCollector(registry, path)  # type: ignore[no-untyped-call]
            registry.register(WorkerProcesses(path))
        registry.register(Families(lambda: iter(list(extra))))
        return generate_latest(registry)


class Families:
    """A collector of the families some function yields."""

    def __init__(self, families: Any) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        yield from self.families()


class StoreSeries:
    """The store's counters (auto-pipelining, sold-out memory) as series of this process."""

    COUNTERS = (
        ("pipeline", "calls", "onsale_pipeline_calls", "Script calls sent pipelined"),
        ("pipeline", "batches", "onsale_pipeline_batches", "Pipelined round trips"),
        ("pipeline", "expired", "onsale_pipeline_expired", "Calls failed unsent (waited too long)"),
        ("sold_out", "answered", "onsale_sold_out_answered", "Claims refused from memory"),
        ("sold_out", "snapshots", "onsale_sold_out_snapshots", "Hold-id snapshots read"),
        ("sold_out", "dropped", "onsale_sold_out_dropped", "Memories dropped by a restock"),
        ("sold_out", "held", "onsale_claims_held", "Claims that waited at the gate (ADR 0012)"),
        ("sold_out", "probes", "onsale_sold_out_probes", "Claims sent on to renew a memory"),
    )

    def __init__(
        self, store: Store, sold_out: SoldOutMemory | None, registry: CollectorRegistry
    ) -> None:
        self.store, self.sold_out = store, sold_out
        self.parts: dict[str, Any] = {"pipeline": store.pipeline, "sold_out": sold_out}
        self.counters: dict[str, tuple[Counter, str, str]] = {}
        self.copied: dict[str, float] = {}
        for part, stat, name, doc in self.COUNTERS:
            if self.parts[part] is not None:
                self.counters[name] = (Counter(name, doc, registry=registry), part, stat)
        self.largest = self.listening = None
        if store.pipeline is not None:
            self.largest = Gauge(
                "onsale_pipeline_largest_batch",
                "Largest batch so far",
                registry=registry,
                multiprocess_mode="max",
            )
        if sold_out is not None:
            self.listening = Gauge(
                "onsale_sold_out_listening",
                "1 while the restock subscription is confirmed (every worker's)",
                registry=registry,
                multiprocess_mode="livemin",
            )

    def copy(self) -> None:
        for name, (counter, part, stat) in self.counters.items():
            value = float(getattr(self.parts[part].stats, stat))
            if value > self.copied.get(name, 0.0):
                counter.inc(value - self.copied.get(name, 0.0))
                self.copied[name] = value
        if self.largest is not None and self.store.pipeline is not None:
            self.largest.set(self.store.pipeline.stats.largest)
        if self.listening is not None and self.sold_out is not None:
            self.listening.set(1 if self.sold_out.listening else 0)


class WorkerProcesses:
    """process_* series of every live worker of this `onsale serve` (those with files in the
    multiprocess directory), labelled by pid; the files of live-only gauges of dead workers
    are dropped."""

    def __init__(self, path: str) -> None:
        self.path = path

    def pids(self) -> list[int]:
        found = {int(m[1]) for f in os.listdir(self.path) if (m := PID_OF_FILE.search(f))}
        live = []
        for pid in sorted(found):
            if os.path.exists(f"/proc/{pid}"):
                live.append(pid)
            else:
                mark_process_dead(pid, self.path)  # type: ignore[no-untyped-call]
        return live

    def collect(self) -> Iterator[Metric]:
        current = [0]
        reader = ProcessCollector(pid=lambda: current[0], registry=None)
        merged: dict[str, Metric] = {}
        pids = self.pids()
        for pid in pids:
            current[0] = pid
            for family in reader.collect():
                into = merged.setdefault(
                    family.name, Metric(family.name, family.documentation, family.type)
                )
                for s in family.samples:
                    into.add_sample(s.name, {**s.labels, "pid": str(pid)}, s.value)
        workers = GaugeMetricFamily("onsale_api_workers", "Live API worker processes")
        workers.add_metric([], len(pids))
        yield from merged.values()
        yield workers
