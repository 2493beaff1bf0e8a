"""The `onsale` command line: the composition root (ADR 0015). It wires the engine, the API and
the ledger together; the demo and the provider simulator are tools (`python -m loadtest.demo`,
`python -m loadtest.provider_sim`)."""

import argparse
import asyncio
import functools
import logging
import os
import resource
import sys
from typing import TYPE_CHECKING, Any

from redis.exceptions import ConnectionError as RedisConnectionError
from rich.console import Console

from engine.settings import MissingSetting, Settings
from onsale.policy_command import add_policy_parser, run_policy
from onsale.stock_command import add_stock_parser, run_stock

if TYPE_CHECKING:
    from engine.store import Store
    from persistence.nightly_report import EventReport
    from persistence.settings import LedgerSettings, SenderSettings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="onsale", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("sweep", help="run the sweeper (expiry and quarantine timeout) until killed")
    sub.add_parser(
        "worker", help="run the sweeper, the trimmer, the refund queue and reconciliation"
    )
    sub.add_parser("migrate", help="apply pending PostgreSQL ledger migrations")
    sub.add_parser("ledger", help="run the write-behind worker (outbox streams -> ledger)")
    rebuild = sub.add_parser("rebuild", help="rebuild an event's Redis state from the ledger")
    rebuild.add_argument("event_id")
    rebuild.add_argument(
        "--force", action="store_true", help="replace the event if it still exists in Redis"
    )
    recon = sub.add_parser("reconcile", help="nightly Redis vs ledger vs provider reconciliation")
    recon.add_argument("--event", action="append", default=[], help="only these events")
    recon.add_argument("--json", default="reconcile-report.json", help="report file")
    recon.add_argument(
        "--grace-ms",
        type=int,
        default=60_000,
        help="outbox records younger than this may still be on their way",
    )
    serve = sub.add_parser("serve", help="run the checkout API (uvicorn, uvloop, httptools)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1)
    add_policy_parser(sub)
    add_stock_parser(sub)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    if args.command == "serve":
        return _serve(args)
    if args.command == "policy":
        return run_policy(args)
    if args.command == "stock":
        return run_stock(args)
    if args.command in ("migrate", "ledger", "rebuild", "reconcile"):
        return _ledger_command(args)
    try:
        settings = Settings.from_env(os.environ)
    except MissingSetting as exc:
        print(f"onsale: {exc}", file=sys.stderr)
        return 2
    try:
        if args.command == "worker":
            return asyncio.run(_worker(settings))
        return asyncio.run(_sweep(settings))
    except RedisConnectionError as exc:
        print(f"onsale: cannot reach Redis at {settings.redis_url}: {exc}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        return 130


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from api.settings import ApiSettings

    try:
        ApiSettings.from_env(os.environ)  # fail fast, naming the missing variable
        options = serve_options()
    except MissingSetting as exc:
        print(f"onsale: {exc}", file=sys.stderr)
        return 2
    bounds = options["http"].keywords["bounds"]
    logging.getLogger("onsale.serve").info(
        "serving on %s:%d, %d worker(s); %s; HTTP header %d s, body %d s, idle %d s",
        args.host,
        args.port,
        args.workers,
        raise_open_files(),
        bounds.header_timeout_s,
        bounds.body_timeout_s,
        bounds.idle_s,
    )
    uvicorn.run(
        "api.app:app_from_env",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        **options,
    )
    return 0


def serve_options() -> dict[str, Any]:
    """uvicorn's configuration of `onsale serve`; the benchmark baselines are served alike.
    The HTTP bounds (ONSALE_HTTP_*_S) are read here, once, and handed to every connection."""
    from api.transport import BoundedHttpToolsProtocol, HttpBounds

    bounds = HttpBounds.from_env(os.environ)
    return {
        "loop": "uvloop",
        # httptools, with header, body and first-request timeouts (api/transport.py)
        "http": functools.partial(BoundedHttpToolsProtocol, bounds=bounds),
        "log_level": "warning",
        "access_log": False,
        "timeout_keep_alive": bounds.idle_s,  # between requests, and before the first one
        "backlog": 4096,
    }


def raise_open_files() -> str:
    """Raise this process's open-files soft limit to its hard limit (workers inherit it): every
    connection is a descriptor, and the common soft limit of 1,024 is what one client's 1,000
    stalled connections used up. Says what it did, for the log line."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return f"open files limit {soft} (the hard limit)"
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:  # e.g. an unlimited hard limit the kernel caps
        return f"open files limit {soft} (could not raise it to the hard limit: {exc})"
    return f"open files limit raised from {soft} to the hard limit, {hard}"


def _ledger_command(args: argparse.Namespace) -> int:
    from persistence.settings import LedgerSettings, SenderSettings

    try:
        settings = LedgerSettings.from_env(os.environ)
        hooks = SenderSettings.from_env(os.environ)  # merchant webhooks sent by `onsale ledger`
    except MissingSetting as exc:
        print(f"onsale: {exc}", file=sys.stderr)
        return 2
    if args.command == "rebuild":
        return asyncio.run(_rebuild(settings, args.event_id, args.force))
    if args.command == "reconcile":
        return asyncio.run(_reconcile(settings, args.event, args.json, args.grace_ms))
    return asyncio.run(_ledger(args.command, settings, hooks))


async def _rebuild(settings: "LedgerSettings", event_id: str, force: bool) -> int:
    from rich.table import Table

    from persistence.database import create_pool
    from persistence.rebuild import RebuildRefused, rebuild

    console = Console()
    pool = await create_pool(settings.pg_dsn, size_max=1, timeout_s=settings.pg_timeout_ms / 1000)
    client = settings.engine.redis_client()
    try:
        store = _store(settings, client)
        await store.scripts.load_all()
        async with pool.acquire() as conn:
            with console.status(f"rebuilding {event_id} from the ledger"):
                report = await rebuild(store, conn, event_id, force=force)
    except RebuildRefused as exc:
        print(f"onsale: {exc}", file=sys.stderr)
        return 1
    finally:
        await client.aclose()
        await pool.close()
    t = Table(title=f"rebuilt {event_id}")
    t.add_column("")
    t.add_column("count", justify="right")
    t.add_row("seats", str(report.seats))
    t.add_row("sold (confirmed holds restored)", str(report.sold))
    t.add_row("ended holds restored as records", str(report.ended_holds))
    for state, n in sorted(report.charges.items()):
        t.add_row(f"charges {state}", str(n))
    t.add_row(
        "decisions of the replaced Redis superseded by the ledger", str(len(report.superseded))
    )
    console.print(t)
    for decision_id in report.superseded[:50]:
        console.print(f"  superseded: {decision_id}")
    return 0


def _store(settings: "LedgerSettings", client: Any) -> "Store":
    from engine.store import Store

    return Store(
        client, prefix=settings.engine.key_prefix, timeout_s=settings.engine.redis_timeout_ms / 1000
    )


async def _reconcile(
    settings: "LedgerSettings", only: list[str], json_path: str, grace_ms: int
) -> int:
    import socket
    from pathlib import Path

    import orjson
    from rich.progress import Progress

    from engine.providers import build_provider
    from engine.settings import MissingSetting
    from persistence.database import create_pool
    from persistence.nightly import provider_entries, reconcile_event
    from persistence.nightly_report import as_json
    from persistence.writer import LedgerWriter

    try:  # the deployment's provider (ONSALE_PROVIDER), through the provider interface
        provider = build_provider(settings.engine)
    except MissingSetting as exc:
        print(f"onsale: {exc}", file=sys.stderr)
        return 2
    console = Console()
    pool = await create_pool(settings.pg_dsn, size_max=2, timeout_s=settings.pg_timeout_ms / 1000)
    client = settings.engine.redis_client()
    reports = []
    try:
        store = _store(settings, client)
        await store.scripts.load_all()
        writer = LedgerWriter(
            client,
            pool,
            prefix=settings.engine.key_prefix,
            consumer=f"reconcile-{socket.gethostname()}-{os.getpid()}",
        )
        entries = await provider_entries(provider)
        events = only or await store.read.event_ids()
        with Progress(console=console) as progress:
            task = progress.add_task("reconciling events", total=len(events))
            async with pool.acquire() as conn:
                for event_id in events:
                    one = reconcile_event(
                        store, conn, writer, entries, event_id, provider=provider, grace_ms=grace_ms
                    )
                    reports.append(await one)
                    progress.advance(task)
    finally:
        await provider.aclose()
        await client.aclose()
        await pool.close()
    report = as_json(reports)
    await asyncio.to_thread(
        Path(json_path).write_bytes, orjson.dumps(report, option=orjson.OPT_INDENT_2)
    )
    _print_reconcile(console, reports, report["unrepaired"])
    return 1 if report["unrepaired"] else 0


def _print_reconcile(console: Console, reports: list["EventReport"], left: int) -> None:
    from rich.table import Table

    from persistence.nightly_report import CLASSES

    found = [d for r in reports for d in r.discrepancies]
    t = Table(title="reconciliation: Redis vs ledger vs provider")
    for col in ("discrepancy", "found", "repaired", "left"):
        t.add_column(col, justify="right" if col != "discrepancy" else "left")
    for cls in CLASSES:
        rows = [d for d in found if d.cls == cls]
        fixed = sum(d.repaired for d in rows)
        t.add_row(cls, str(len(rows)), str(fixed), str(len(rows) - fixed))
    console.print(t)
    m = Table(title="money per event (provider holds = our charges say) and open exceptions")
    for col in ("event", "provider holds", "charges say", "seats w/o money", "parked", "refunding"):
        m.add_column(col, justify="left" if col == "event" else "right")
    for r in reports:
        ex = r.open_exceptions
        m.add_row(
            r.event_id,
            str(r.provider_net),
            str(r.expected_net),
            str(ex.get("seats_without_money", 0)),
            str(ex.get("refunds_parked", 0)),
            str(ex.get("refunds_pending", 0)),
        )
    console.print(m)
    console.print(f"{left} unrepaired" if left else "clean: nothing left unrepaired")


async def _ledger(
    command: str, settings: "LedgerSettings", hooks: "SenderSettings | None" = None
) -> int:
    import socket

    from persistence.database import create_pool
    from persistence.migrate import migrate
    from persistence.writer import LedgerWriter

    pool = await create_pool(
        settings.pg_dsn, size_max=settings.pg_pool_max, timeout_s=settings.pg_timeout_ms / 1000
    )
    try:
        if command == "migrate":
            async with pool.acquire() as conn:
                applied = await migrate(conn)
            print(f"onsale: applied {applied or 'nothing (up to date)'}")
            return 0
        client = settings.engine.redis_client()
        from prometheus_client import start_http_server

        from persistence.metrics import LedgerMetrics

        writer = LedgerWriter(
            client,
            pool,
            prefix=settings.engine.key_prefix,
            consumer=f"{socket.gethostname()}-{os.getpid()}",
            batch_max=settings.batch_max,
            claim_idle_ms=settings.claim_idle_ms,
            retention_ms=settings.retention_ms,
        )
        metrics = LedgerMetrics()
        start_http_server(settings.metrics_port, addr="127.0.0.1", registry=metrics.registry)
        try:
            await writer.run(
                asyncio.Event(), idle_s=settings.idle_ms / 1000, metrics=metrics, webhooks=hooks
            )
        finally:
            await client.aclose()
        return 0
    finally:
        await pool.close()


async def _worker(settings: Settings) -> int:
    from engine.worker import run_worker

    await run_worker(settings, asyncio.Event())
    return 0


async def _sweep(settings: Settings) -> int:
    from engine.store import Store
    from engine.sweeper import Sweeper

    client = settings.redis_client()
    store = Store(client, prefix=settings.key_prefix, timeout_s=settings.redis_timeout_ms / 1000)
    await store.scripts.load_all()
    sweeper = Sweeper(
        store,
        interval_ms=settings.sweep_interval_ms,
        batch_max=settings.sweep_batch_max,
        rounds_max=settings.sweep_rounds_max,
    )
    stop = asyncio.Event()
    try:
        await sweeper.run(stop)
    finally:
        await client.aclose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
