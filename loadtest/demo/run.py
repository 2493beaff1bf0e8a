"""What the seat demo (loadtest/demo/main.py) and the retail demo (loadtest/demo/retail.py) share:
the stack started as processes (provider simulator, API, worker, ledger writer) with the worker's
loops tuned to settle in seconds, the progress bars, the wait until nothing is left in flight, the
nightly reconciliation run at the end, and the command's settings and exit codes."""

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx
import orjson
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from engine.config.settings import Settings
from engine.config.variables import MissingSetting
from engine.store import Store
from loadtest.demo.ledger import demo_database
from loadtest.devstack import services
from loadtest.devstack.stack import QUICK_SETTLE_ENV, LocalStack

SETTLE_TIMEOUT_S = 30.0  # refunds and callbacks still in flight once the buyers are done
LOG_DIR = Path(".services") / "demo-logs"
# The nightly run's grace: a refund younger than this is the refund queue's, on its way (the
# worker's reconciliation may find a capture after a decline, and send its refund, in the
# moment between settling and the nightly run; with no grace it read as overdue); an outbox
# record younger than this may still be on its way to the ledger.
NIGHTLY_GRACE_MS = 2_000


@contextlib.asynccontextmanager
async def running_stack(
    settings: Settings,
    console: Console,
    *,
    api_workers: int,
    sim_args: tuple[str, ...],
    pg_dsn: str,
    pg_database: str,
) -> AsyncIterator[tuple[LocalStack, Store]]:
    """The whole stack as processes, and a store on its Redis (for the audit at the end); with
    `pg_dsn`, the ledger writer too, on a database of the demo's own. Stopped on the way out."""
    ledger_dsn = await demo_database(pg_dsn, pg_database) if pg_dsn else ""
    stack = LocalStack(
        ledger_dsn=ledger_dsn,
        redis_url=settings.redis_url,
        key_prefix=settings.key_prefix,
        log_dir=LOG_DIR,
        api_workers=api_workers,
        sim_args=sim_args,
        extra_env=dict(QUICK_SETTLE_ENV),
    )
    console.print(
        f"[bold]demo[/]: starting provider simulator, API "
        f"({api_workers} workers), worker"
        f"{' and ledger writer' if ledger_dsn else ' (no ONSALE_PG_DSN: no ledger)'}; "
        f"logs in {stack.log_dir}/"
    )
    stack.start()
    redis_client = settings.redis_client()
    try:
        yield stack, Store(redis_client, prefix=settings.key_prefix)
    finally:
        stack.stop()
        await redis_client.aclose()


def progress_bars(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )


async def provider_books(stack: LocalStack) -> dict[str, Any]:
    """The simulator's own ledger (GET /v1/ledger): every money movement, with its time."""
    async with httpx.AsyncClient(base_url=stack.sim_url) as sim:
        books: dict[str, Any] = (await sim.get("/v1/ledger")).json()
    return books


async def settle(
    stack: LocalStack, http: httpx.AsyncClient, event_id: str, progress: Progress
) -> tuple[bool, dict[str, Any] | None]:
    """Wait for refunds and callbacks to settle; with a ledger, run the nightly reconciliation
    and settle again. (settled, the nightly report or None)."""
    task = progress.add_task("refunds and callbacks settling", total=None)
    settled = await wait_settled(stack, http, event_id, SETTLE_TIMEOUT_S)
    progress.update(task, total=1, completed=1)
    if not stack.ledger_dsn:
        return settled, None
    # What the provider did that no callback told us (a lost webhook of a capture after a
    # decline, say) is found by the nightly run, as in production.
    night = progress.add_task("nightly reconciliation", total=None)
    nightly = await nightly_report(stack, event_id)
    settled = await wait_settled(stack, http, event_id, SETTLE_TIMEOUT_S)
    progress.update(night, total=1, completed=1)
    return settled, nightly


async def nightly_report(stack: LocalStack, event_id: str) -> dict[str, Any]:
    """`onsale reconcile` on the event, as its own process against the stack; its JSON report."""
    out = stack.log_dir / f"reconcile-{event_id}.json"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "onsale.cli",
        "reconcile",
        "--event",
        event_id,
        "--json",
        str(out),
        "--grace-ms",
        str(NIGHTLY_GRACE_MS),
        env={**os.environ, **stack.env()},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    async with asyncio.timeout(120):
        await proc.wait()
    report: dict[str, Any] = orjson.loads(await asyncio.to_thread(out.read_bytes))
    return report


async def wait_settled(
    stack: LocalStack, http: httpx.AsyncClient, event_id: str, timeout_s: float
) -> bool:
    """Until no hold is live or blocked, no refund pending or retrying, no charge in flight too
    long and no callback undelivered; False when that did not happen within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(base_url=stack.sim_url) as sim:
        while time.monotonic() < deadline:
            a = (await http.get(f"/v1/events/{event_id}")).json()
            ex = (
                await http.get(
                    f"/v1/admin/events/{event_id}/exceptions",
                    headers=stack.admin_headers(),
                    params={"charging_older_than_ms": 0},
                )
            ).json()
            pending = (await sim.get("/v1/ledger")).json()["pending_deliveries"]
            if (
                not a["held"]
                and not a["blocked"]
                and not ex["refunds_pending"]
                and not ex["refunds_retrying"]
                and not ex["charging_too_long"]
                and not pending
            ):
                return True
            await asyncio.sleep(0.3)
    return False


def run_command(play: Callable[[Settings, str, str], Coroutine[Any, Any, int]]) -> int:
    """A demo command's main: its settings from the environment (2 and a clear message when one
    is missing), the ledger's server (ONSALE_PG_DSN, none: no ledger) and database
    (ONSALE_DEMO_DATABASE), then `play(settings, pg_dsn, database)`'s exit code."""
    try:
        settings = Settings.from_env(os.environ)  # named, or a clear error (not a default)
    except MissingSetting as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    pg_dsn = services.named_pg_server_dsn()
    database = os.environ.get("ONSALE_DEMO_DATABASE", "onsale_demo")
    try:
        return asyncio.run(play(settings, pg_dsn, database))
    except KeyboardInterrupt:
        return 130
