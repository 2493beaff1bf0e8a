"""`onsale worker`: the sweeper, the trimmer of ended holds, the refund queue and provider
reconciliation in one process, each a loop with its own interval and capped, jittered backoff on
Redis or provider outages.

Stopping (`stop` set, on SIGTERM): each loop ends the pass in hand and returns; none starts
another. The refund and reconciliation passes, which wait on the provider for each charge, end
sooner: after the charge in hand (the others stay due for the next process). Every change a pass
makes is one script call, so nothing is ever half written; a refund asked of the provider is
also recorded before the pass ends, and every event the sweep had started on is swept through.

Each loop's passes and failures, what the loops did, and what waits for them in Redis (read on
its own clock) are exported for Prometheus (engine/workers/metrics.py)."""

import asyncio
import logging
from collections.abc import Awaitable, Callable

from prometheus_client import CollectorRegistry

from engine.config.settings import Settings
from engine.model.errors import StoreUnavailable
from engine.providers import ProviderTimeout, build_provider
from engine.store import Store
from engine.store.loops import repeat
from engine.workers.metrics import Loops, WorkerMetrics, read_backlog
from engine.workers.reconcile import ProviderReconciler
from engine.workers.refunds import RefundWorker
from engine.workers.sweeper import Sweeper
from engine.workers.trim import Trimmer

log = logging.getLogger("onsale.worker")


EXPECTED = (StoreUnavailable, ProviderTimeout)

Step = Callable[[], Awaitable[object]]


async def run_worker(
    settings: Settings,
    stop: asyncio.Event,
    *,
    on_metrics: Callable[[CollectorRegistry], None] | None = None,
) -> Loops:
    """Run the loops until `stop` is set; `on_metrics` is handed the registry of the worker's
    series before the first pass (the command line serves it over HTTP)."""
    provider = build_provider(settings)  # refuses an incomplete configuration before anything
    client = settings.redis_client()
    store = Store(
        client,
        prefix=settings.key_prefix,
        timeout_s=settings.redis_timeout_ms / 1000,
        wait=settings.replica_wait(client),
    )
    if not await store.boot():
        log.warning("Redis unreachable at boot; the loops retry until it is back")
    sweeper = Sweeper(
        store,
        interval_ms=settings.sweep_interval_ms,
        batch_max=settings.sweep_batch_max,
        rounds_max=settings.sweep_rounds_max,
    )
    trimmer = Trimmer(
        store,
        retention_ms=settings.trim_retention_ms,
        interval_ms=settings.trim_interval_ms,
        without_ledger=settings.trim_without_ledger,
    )
    refunds = RefundWorker(store, provider, stop=stop)
    reconciler = ProviderReconciler(
        store,
        provider,
        stale_ms=settings.reconcile_stale_ms,
        watch_ms=settings.reconcile_watch_ms,
        stop=stop,
    )
    plan: list[tuple[str, Step, float]] = [
        ("sweep", sweeper.run_once, sweeper.interval_s),
        ("trim", trimmer.run_once, trimmer.interval_s),
        ("refunds", refunds.run_once, settings.refund_interval_ms / 1000),
        ("reconcile", reconciler.run_once, settings.reconcile_interval_ms / 1000),
    ]
    loops = Loops()
    stats = {"sweep": sweeper.stats, "trim": trimmer.stats, "refunds": refunds.stats}
    metrics = WorkerMetrics(loops, {**stats, "reconcile": reconciler.stats})
    if on_metrics is not None:
        on_metrics(metrics.registry)
    try:
        await asyncio.gather(
            *(_loop(loops, name, step, interval_s, stop) for name, step, interval_s in plan),
            metrics.follow_backlog(lambda: read_backlog(store), stop),
        )
    finally:
        await provider.aclose()
        await client.aclose()
    return loops


def _loop(
    loops: Loops, name: str, step: Step, interval_s: float, stop: asyncio.Event
) -> Awaitable[None]:
    return repeat(
        name,
        loops.counted(name, step),
        stop,
        interval_s=interval_s,
        expected=EXPECTED,
        log=log,
        on_error=loops.failed(name),
    )
