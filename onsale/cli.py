"""The `onsale` command line: the composition root (ADR 0015). It wires the engine, the API and
the ledger together; the demo and the provider simulator are tools (`python -m loadtest.demo.main`,
`python -m loadtest.provider_sim.server`)."""

import argparse
import asyncio
import functools
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console

from engine.config.logs import configure
from engine.config.variables import MissingSetting, every_problem, say_missing
from onsale.admin_commands import add_admin_parsers, run_logins, run_orders, run_webhooks
from onsale.chaos_command import add_chaos_parser, run_chaos
from onsale.daemons import migrate_ledger, run_ledger, until_signalled, worker_command
from onsale.environment import HOST, PORT, WORKERS
from onsale.event_command import add_event_parser, run_event
from onsale.help_text import document, env_option
from onsale.policy_command import add_policy_parser, run_policy
from onsale.presale_command import add_presale_parser, run_presale
from onsale.serve import raise_open_files, serve, serve_options
from onsale.stock_command import add_stock_parser, run_stock
from onsale.waiting_command import add_waiting_parser, run_waiting

if TYPE_CHECKING:
    from engine.store import Store
    from persistence.nightly_report import EventReport
    from persistence.settings import LedgerSettings

__all__ = ["build_parser", "main", "raise_open_files", "serve_options"]

log = logging.getLogger("onsale")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="onsale", description=__doc__)
    parser.add_argument("--version", action="version", version=f"onsale {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("sweep", help="run the sweeper (expiry and quarantine timeout) until stopped")
    sub.add_parser(
        "worker",
        help="run the sweeper, the trimmer, the refund queue and reconciliation until stopped",
        description="SIGTERM or SIGINT: each loop ends the pass in hand, then exit 0 (a second "
        "signal stops at once). Prometheus series on ONSALE_WORKER_METRICS_PORT.",
    )
    sub.add_parser("migrate", help="apply pending PostgreSQL ledger migrations")
    sub.add_parser(
        "ledger",
        help="run the write-behind worker (outbox streams -> ledger) until stopped",
        description="SIGTERM or SIGINT: the batches in hand are committed and acknowledged, "
        "then exit 0 (a second signal stops at once). Prometheus series on "
        "ONSALE_LEDGER_METRICS_PORT.",
    )
    rebuild = sub.add_parser("rebuild", help="rebuild an event's Redis state from the ledger")
    rebuild.add_argument("event_id", help="the event to rebuild")
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
        help="outbox records younger than this may still be on their way (default 60000)",
    )
    serve = sub.add_parser(
        "serve",
        help="run the checkout API (uvicorn, uvloop, httptools)",
        description="Logs one line at start: where it listens and with what settings.",
    )
    env_option(serve, HOST, "--host", "address to listen on")
    env_option(serve, PORT, "--port", "port to listen on", type=int)
    env_option(serve, WORKERS, "--workers", "worker processes (about one per core)", type=int)
    add_policy_parser(sub)
    add_stock_parser(sub)
    add_chaos_parser(sub)
    add_waiting_parser(sub)
    add_event_parser(sub)
    add_presale_parser(sub)
    add_admin_parsers(sub)
    document(parser)
    return parser


def _version() -> str:
    """The installed distribution's version (pyproject.toml), or "unknown" when run from a tree
    that was never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("onsale")
    except PackageNotFoundError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    """`onsale <command>`. A setting missing, malformed or weak, wherever a command reads it,
    ends the command with status 2, each problem named on a line of stderr."""
    try:
        configure(os.environ)
        return _run(build_parser().parse_args(argv))
    except MissingSetting as exc:
        say_missing(exc)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.command == "serve":
        return serve(args)
    if args.command == "policy":
        return run_policy(args)
    if args.command == "stock":
        return run_stock(args)
    if args.command == "chaos":
        return run_chaos(args)
    if args.command == "waiting":
        return run_waiting(args)
    admin = {"event": run_event, "webhooks": run_webhooks, "logins": run_logins,
             "orders": run_orders, "presale": run_presale}  # fmt: skip
    if args.command in admin:
        return admin[args.command](args)
    if args.command in ("migrate", "ledger", "rebuild", "reconcile"):
        return _ledger_command(args)
    return worker_command(args.command)


def _ledger_command(args: argparse.Namespace) -> int:
    from persistence.settings import LedgerDb, LedgerSettings, SenderSettings

    with every_problem():  # every missing or weak variable named at once
        if args.command == "migrate":  # the database alone: no Redis, no provider
            return asyncio.run(migrate_ledger(LedgerDb.from_env(os.environ)))
        settings = LedgerSettings.from_env(os.environ)
        hooks = SenderSettings.from_env(os.environ)  # merchant webhooks by `onsale ledger`
    if args.command == "rebuild":
        return asyncio.run(_rebuild(settings, args.event_id, args.force))
    if args.command == "reconcile":
        return asyncio.run(_reconcile(settings, args.event, args.json, args.grace_ms))
    try:
        return asyncio.run(until_signalled(functools.partial(run_ledger, settings, hooks)))
    except asyncio.CancelledError:
        return 1


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
    if report.places:
        t.add_row("places in its waiting room", str(report.places))
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
    from persistence.database import create_pool
    from persistence.nightly import provider_entries, reconcile_event
    from persistence.nightly_report import as_json
    from persistence.writer import LedgerWriter

    provider = build_provider(settings.engine)  # the deployment's (ONSALE_PROVIDER)
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
    cols = ("event", "provider holds", "charges say", "seats w/o money", "parked", "refunding")
    for col in (*cols, "alerts", "superseded"):
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
            str(ex.get("alerts", 0)),
            str(ex.get("superseded_by_rebuild", 0)),
        )
    console.print(m)
    console.print(f"{left} unrepaired" if left else "clean: nothing left unrepaired")


if __name__ == "__main__":
    raise SystemExit(main())
