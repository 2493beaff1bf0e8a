"""The long-running commands, `onsale worker`, `onsale sweep` and `onsale ledger` (and
`onsale migrate`, which precedes the ledger writer): each runs until SIGTERM or SIGINT, then ends
the step in hand and exits 0 (docs/deploy.md, "Stopping"); a second signal stops it at once."""

import asyncio
import contextlib
import functools
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from redis.exceptions import ConnectionError as RedisConnectionError

from engine.config.logs import redact_url
from engine.config.settings import Settings
from engine.config.variables import every_problem

if TYPE_CHECKING:
    from persistence.settings import LedgerDb, LedgerSettings, SenderSettings

log = logging.getLogger("onsale")


def worker_command(command: str) -> int:
    """`onsale worker` or `onsale sweep`, until stopped."""
    try:
        with every_problem():
            settings = Settings.from_env(os.environ)
        run = _worker if command == "worker" else _sweep
        return asyncio.run(until_signalled(functools.partial(run, settings)))
    except RedisConnectionError as exc:
        url = redact_url(settings.redis_url)
        print(f"onsale: cannot reach Redis at {url}: {exc}", file=sys.stderr)
        return 3
    except (KeyboardInterrupt, asyncio.CancelledError):
        return 1


async def until_signalled(run: Callable[[asyncio.Event], Awaitable[int]]) -> int:
    """`run(stop)`, where SIGTERM or SIGINT sets `stop`: the long-running commands end the step
    in hand and return 0. A second signal cancels at once (exit 1)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def on_signal(name: str) -> None:
        if stop.is_set():
            log.warning("%s again: stopping now, without ending the step in hand", name)
            task.cancel()
            return
        log.info("%s: stopping after the step in hand", name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig.name)
    try:
        return await run(stop)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


async def migrate_ledger(db: "LedgerDb") -> int:
    from persistence.database import create_pool
    from persistence.migrate import migrate

    pool = await create_pool(db.dsn, size_max=1, timeout_s=db.timeout_ms / 1000)
    try:
        async with pool.acquire() as conn:
            applied = await migrate(conn)
        print(f"onsale: applied {applied or 'nothing (up to date)'}")
        return 0
    finally:
        await pool.close()


async def pool_when_reachable(
    settings: "LedgerSettings", stop: asyncio.Event, create_pool: Callable[..., Awaitable[Any]]
) -> Any:
    """The ledger's pool, once PostgreSQL answers: a writer started while it is down or still
    recovering waits for it, as a running one rides out an outage (the decisions wait in the
    outbox). None when stopped first."""
    import asyncpg

    delay_s = 0.2
    while not stop.is_set():
        try:
            return await create_pool(
                settings.pg_dsn,
                size_max=settings.pg_pool_max,
                timeout_s=settings.pg_timeout_ms / 1000,
            )
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.warning("ledger: PostgreSQL not reachable at start (%r); retrying", exc)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay_s)
        delay_s = min(delay_s * 2, 2.0)
    return None


async def run_ledger(
    settings: "LedgerSettings", hooks: "SenderSettings", stop: asyncio.Event
) -> int:
    import socket

    from prometheus_client import start_http_server

    from engine.workers.metrics import ExporterSettings
    from persistence.database import create_pool
    from persistence.metrics import LedgerMetrics
    from persistence.writer import LedgerWriter

    exporter = ExporterSettings.from_env(os.environ)
    pool = await pool_when_reachable(settings, stop, create_pool)
    if pool is None:
        return 0  # stopped before PostgreSQL answered: nothing was in hand
    client = settings.engine.redis_client()
    try:
        writer = LedgerWriter(
            client,
            pool,
            prefix=settings.engine.key_prefix,
            consumer=f"{socket.gethostname()}-{os.getpid()}",
            batch_max=settings.batch_max,
            claim_idle_ms=settings.claim_idle_ms,
            retention_ms=settings.outbox_retention_ms,
            auto_rebuild=settings.auto_rebuild,
        )
        metrics = LedgerMetrics()
        start_http_server(
            settings.metrics_port, addr=exporter.metrics_host, registry=metrics.registry
        )
        log.info(
            "ledger writer %s: metrics on %s:%d",
            writer.consumer,
            exporter.metrics_host,
            settings.metrics_port,
            extra={"fields": {"redis": redact_url(settings.engine.redis_url)}},
        )
        stats = await writer.run(
            stop, idle_s=settings.idle_ms / 1000, metrics=metrics, webhooks=hooks
        )
        log.info("ledger writer stopped", extra={"fields": {"entries": stats.entries}})
        return 0
    finally:
        await client.aclose()
        await pool.close()


async def _worker(settings: Settings, stop: asyncio.Event) -> int:
    from prometheus_client import CollectorRegistry, start_http_server

    from engine.workers.metrics import ExporterSettings
    from engine.workers.process import run_worker

    exporter = ExporterSettings.from_env(os.environ)

    def serve_metrics(registry: CollectorRegistry) -> None:
        start_http_server(
            exporter.worker_metrics_port, addr=exporter.metrics_host, registry=registry
        )
        log.info("worker: metrics on %s:%d", exporter.metrics_host, exporter.worker_metrics_port)

    loops = await run_worker(settings, stop, on_metrics=serve_metrics)
    passes = {name: record.passes for name, record in loops.records.items()}
    log.info("worker stopped", extra={"fields": {"passes": passes}})
    return 0


async def _sweep(settings: Settings, stop: asyncio.Event) -> int:
    from engine.store import Store
    from engine.workers.sweeper import Sweeper

    client = settings.redis_client()
    store = Store(client, prefix=settings.key_prefix, timeout_s=settings.redis_timeout_ms / 1000)
    await store.scripts.load_all()
    sweeper = Sweeper(
        store,
        interval_ms=settings.sweep_interval_ms,
        batch_max=settings.sweep_batch_max,
        rounds_max=settings.sweep_rounds_max,
    )
    try:
        await sweeper.run(stop)
    finally:
        await client.aclose()
    return 0
