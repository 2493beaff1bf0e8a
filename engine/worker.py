"""`onsale worker`: the sweeper, the refund queue and provider reconciliation in one process,
each a loop with its own interval and capped, jittered backoff on Redis or provider outages."""

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable

from engine.errors import InvariantViolation, StoreUnavailable
from engine.provider import ProviderClient, ProviderTimeout
from engine.reconcile import ProviderReconciler
from engine.refunds import RefundWorker
from engine.settings import Settings
from engine.store import Store
from engine.sweeper import Sweeper

log = logging.getLogger("onsale.worker")

BACKOFF_MAX_S = 10.0


async def every(
    name: str, interval_s: float, step: Callable[[], Awaitable[object]], stop: asyncio.Event
) -> None:
    failures = 0
    while not stop.is_set():
        try:
            await step()
            failures = 0
            pause = interval_s
        except InvariantViolation:
            raise  # a bug: stop the worker loudly rather than act on impossible state
        except Exception as exc:
            failures += 1
            pause = min(BACKOFF_MAX_S, interval_s * 2**failures) * random.uniform(0.5, 1.0)
            expected = isinstance(exc, StoreUnavailable | ProviderTimeout)
            log.log(
                logging.WARNING if expected else logging.ERROR,
                "%s failed (%r); retrying in %.2fs",
                name,
                exc,
                pause,
                exc_info=not expected,
            )
        try:
            async with asyncio.timeout(pause):
                await stop.wait()
        except TimeoutError:
            pass


async def run_worker(settings: Settings, stop: asyncio.Event) -> None:
    if not settings.provider_url:
        raise ValueError("ONSALE_PROVIDER_URL is not set (the worker refunds and reconciles)")
    client = settings.redis_client()
    store = Store(client, prefix=settings.key_prefix, timeout_s=settings.redis_timeout_ms / 1000)
    await store.scripts.load_all()
    provider = ProviderClient(settings.provider_url, timeout_ms=settings.provider_timeout_ms)
    sweeper = Sweeper(
        store,
        interval_ms=settings.sweep_interval_ms,
        batch_max=settings.sweep_batch_max,
        rounds_max=settings.sweep_rounds_max,
    )
    refunds = RefundWorker(store, provider)
    reconciler = ProviderReconciler(store, provider, stale_ms=settings.reconcile_stale_ms)
    try:
        await asyncio.gather(
            sweeper.run(stop),
            every("refunds", settings.refund_interval_ms / 1000, refunds.run_once, stop),
            every("reconcile", settings.reconcile_interval_ms / 1000, reconciler.run_once, stop),
        )
    finally:
        await provider.aclose()
        await client.aclose()
