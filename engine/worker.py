"""`onsale worker`: the sweeper, the trimmer of ended holds, the refund queue and provider
reconciliation in one process, each a loop with its own interval and capped, jittered backoff on
Redis or provider outages."""

import asyncio
import logging
from collections.abc import Awaitable, Callable

from engine.errors import StoreUnavailable
from engine.loops import repeat
from engine.providers import ProviderTimeout, build_provider
from engine.reconcile import ProviderReconciler
from engine.refunds import RefundWorker
from engine.settings import Settings
from engine.store import Store
from engine.sweeper import Sweeper
from engine.trim import Trimmer

log = logging.getLogger("onsale.worker")


EXPECTED = (StoreUnavailable, ProviderTimeout)


def every(
    name: str, interval_s: float, step: Callable[[], Awaitable[object]], stop: asyncio.Event
) -> Awaitable[None]:
    async def once() -> bool:
        await step()
        return False

    return repeat(name, once, stop, interval_s=interval_s, expected=EXPECTED, log=log)


async def run_worker(settings: Settings, stop: asyncio.Event) -> None:
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
    refunds = RefundWorker(store, provider)
    reconciler = ProviderReconciler(
        store,
        provider,
        stale_ms=settings.reconcile_stale_ms,
        watch_ms=settings.reconcile_watch_ms,
    )
    try:
        await asyncio.gather(
            sweeper.run(stop),
            trimmer.run(stop),
            every("refunds", settings.refund_interval_ms / 1000, refunds.run_once, stop),
            every("reconcile", settings.reconcile_interval_ms / 1000, reconciler.run_once, stop),
        )
    finally:
        await provider.aclose()
        await client.aclose()
