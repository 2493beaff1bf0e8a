"""Run a Locust scenario headless against a local stack, then check the invariants.

    python -m loadtest.locust.main --scenario burst|flow --users N --seats S
        [--spawn-rate R] [--run-time 30s] [--out DIR] [--workers 2] [--hold-ttl-ms MS]

It starts the stack (provider simulator, API with --workers uvicorn workers, worker) on spare
ports under a key prefix of its own, creates and opens an event of S seats, runs
`locust -f loadtest/locust/locustfile.py --headless` as a subprocess (CSV and HTML reports in DIR,
reports/locust/<scenario>-<time> by default), waits for charges, refunds and callbacks to settle,
then checks the engine's state with loadtest/devstack/invariants.py and prints the tables. It exits
non-zero when an invariant is violated, Locust counted a failure, or Locust did not finish."""

import argparse
import asyncio
import csv
import os
import re
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import orjson
import redis.asyncio as redis_asyncio
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from engine.store import Store
from loadtest.demo.main import nightly_report
from loadtest.demo.report import refund_bound_table
from loadtest.demo.scenario import PRICE, seat_map
from loadtest.devstack import services
from loadtest.devstack.invariants import FlowSeen, Verdict, check_burst, check_flow
from loadtest.devstack.stack import QUICK_SETTLE_ENV, LocalStack
from loadtest.locust.report import print_report
from persistence import database

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
FINISH_GRACE_S = 60.0  # beyond --run-time: Locust's own shutdown, reports
SETTLE_TIMEOUT_S = 30.0  # charges, refunds and callbacks still in flight after the run
HTTP_TIMEOUT_S = 5.0


def seconds(timespan: str) -> int:
    """Locust's --run-time syntax: 90, 90s, 1m30s, 1h."""
    if timespan.isdigit():
        return int(timespan)
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", timespan)
    if not parts or not any(parts.groups()):
        raise argparse.ArgumentTypeError(f"bad run time {timespan!r} (e.g. 30s, 1m30s)")
    h, m, s = (int(g or 0) for g in parts.groups())
    return h * 3600 + m * 60 + s


def run_time(value: str) -> str:
    seconds(value)
    return value


def stack_for(
    args: argparse.Namespace, prefix: str, log_dir: Path, ledger_dsn: str = ""
) -> LocalStack:
    redis_url = services.redis_url()
    if args.scenario == "burst":
        return LocalStack(redis_url, prefix, log_dir, api_workers=args.workers)
    # The purchase flow meets every kind of provider behaviour, with short timers so that
    # quarantined holds, late captures and lost callbacks resolve within the run.
    return LocalStack(
        redis_url,
        prefix,
        log_dir,
        api_workers=args.workers,
        ledger_dsn=ledger_dsn,
        sim_args=(
            *("--decline-rate", "0.1", "--fail-rate", "0.03"),
            *("--late-rate", "0.05", "--late-delay-ms", str(args.hold_ttl_ms // 2)),
            *("--duplicate-rate", "0.3", "--loss-rate", "0.03", "--seed", str(args.seed)),
            *("--contradict-rate", "0.5"),  # half the declines capture later: given back
        ),
        extra_env=dict(QUICK_SETTLE_ENV),
    )


def create_event(stack: LocalStack, event_id: str, args: argparse.Namespace) -> None:
    stack.create_event(
        event_id,
        seat_map(args.seats),
        hold_ttl_ms=args.hold_ttl_ms,
        quarantine_ms=args.quarantine_ms,
        policy="quarantine",
        price_minor=PRICE,
    )


def locust_command(args: argparse.Namespace, stack: LocalStack, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(LOCUSTFILE),
        "--headless",
        "--only-summary",
        "-u",
        str(args.users),
        "-r",
        str(args.spawn_rate or args.users),
        "--run-time",
        args.run_time,
        "--csv",
        str(out / args.scenario),
        "--html",
        str(out / f"{args.scenario}.html"),
        "--host",
        stack.api_url,
    ]


async def run_locust(
    args: argparse.Namespace, stack: LocalStack, event_id: str, out: Path, console: Console
) -> int | None:
    """Locust's exit code, or None when it had to be stopped (it did not finish in time)."""
    env = {
        **os.environ,
        "ONSALE_LOCUST_SCENARIO": args.scenario,
        "ONSALE_LOCUST_EVENT_ID": event_id,
        "ONSALE_LOCUST_REPORT_PATH": str(out / f"{args.scenario}_report.json"),
        "ONSALE_LOCUST_POLL_MAX_MS": str(args.hold_ttl_ms + args.quarantine_ms + 5_000),
        "ONSALE_LOCUST_SEED": str(args.seed),
    }
    columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    async with httpx.AsyncClient(base_url=stack.api_url, timeout=HTTP_TIMEOUT_S) as http:
        with Progress(*columns, console=console, transient=True) as progress:
            return await _watch(
                start_locust(locust_command(args, stack, out), env, out / "locust.log"),
                http,
                progress,
                args,
                event_id,
            )


def start_locust(cmd: list[str], env: dict[str, str], log_path: Path) -> "subprocess.Popen[bytes]":
    with log_path.open("wb") as log:
        return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)


async def _watch(
    proc: "subprocess.Popen[bytes]",
    http: httpx.AsyncClient,
    progress: Progress,
    args: argparse.Namespace,
    event_id: str,
) -> int | None:
    """Show the seats while Locust runs; stop it past its run time plus a grace period."""
    limit_s = seconds(args.run_time) + FINISH_GRACE_S
    task = progress.add_task("locust", total=seconds(args.run_time))
    started = time.monotonic()
    while proc.poll() is None and time.monotonic() - started < limit_s:
        try:
            a = (await http.get(f"/v1/events/{event_id}")).json()
            seats = f"free {a['free']}, held {a['held']}, blocked {a['blocked']}, sold {a['sold']}"
        except httpx.HTTPError as exc:
            seats = f"availability: {type(exc).__name__}"
        progress.update(
            task,
            completed=time.monotonic() - started,
            description=f"locust {args.scenario}, {args.users:,} users: {seats}",
        )
        await asyncio.sleep(0.5)
    if proc.poll() is None:
        proc.terminate()  # Locust writes its reports on SIGTERM too
        await asyncio.to_thread(proc.wait, 30)
        return None
    return proc.returncode


async def settle(stack: LocalStack, store: Store, event_id: str, console: Console) -> bool:
    """Wait until no charge is in flight, no refund pending and no callback undelivered."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    async with httpx.AsyncClient(base_url=stack.sim_url, timeout=HTTP_TIMEOUT_S) as sim:
        with console.status("charges, refunds and callbacks settling"):
            while time.monotonic() < deadline:
                open_charges = [
                    c
                    for c in await store.read.scan_charges(event_id)
                    if c.state in ("CHARGING", "REFUNDING")
                ]
                pending = (await sim.get("/v1/ledger")).json()["pending_deliveries"]
                if not open_charges and not pending:
                    return True
                await asyncio.sleep(0.3)
    return False


def read_report(path: Path) -> dict[str, Any]:
    """What the Locust process saw (written by the locustfile when it quits)."""
    if not path.exists():
        return {}
    report: dict[str, Any] = orjson.loads(path.read_bytes())
    return report


def read_stats(out: Path, scenario: str) -> list[dict[str, str]]:
    path = out / f"{scenario}_stats.csv"
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def all_codes(report: dict[str, Any], prefix: str = "") -> Counter[str]:
    total: Counter[str] = Counter()
    for name, codes in report.get("answers", {}).items():
        if name.startswith(prefix):
            total.update(codes)
    return total


async def run(args: argparse.Namespace, console: Console) -> int:
    out = Path(args.out or f"reports/locust/{args.scenario}-{time.strftime('%Y%m%d-%H%M%S')}")
    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    prefix = f"onsale:bench:{uuid.uuid4().hex[:8]}"
    # The purchase flow runs with a ledger, so that the nightly reconciliation can run at the end
    # (a capture after a decline whose webhook was lost is found there, as in production).
    pg_server = services.pg_server_dsn()
    ledger_db = f"onsale_locust_{uuid.uuid4().hex[:8]}" if args.scenario == "flow" else ""
    ledger_dsn = await database.create_database(pg_server, ledger_db) if ledger_db else ""
    stack = stack_for(args, prefix, out / "logs", ledger_dsn)
    event_id = f"locust-{args.scenario}-{uuid.uuid4().hex[:6]}"
    console.print(
        f"[bold]locust {args.scenario}[/]: {args.users:,} users, {args.seats} seats, "
        f"API {args.workers} worker(s); reports in {out}/, stack logs in {stack.log_dir}/"
    )
    await asyncio.to_thread(stack.start)
    redis = redis_asyncio.from_url(stack.redis_url, decode_responses=True)
    store = Store(redis, prefix=prefix)
    try:
        await asyncio.to_thread(create_event, stack, event_id, args)
        rc = await run_locust(args, stack, event_id, out, console)
        settled = await settle(stack, store, event_id, console)
        report = await asyncio.to_thread(read_report, out / f"{args.scenario}_report.json")
        verdict = await check_run(args, stack, store, event_id, report, settled, console)
        alive = stack.alive()
    finally:
        await asyncio.to_thread(stack.stop)
        async for key in redis.scan_iter(match=f"{prefix}:*"):
            await redis.delete(key)
        await redis.aclose()
        if ledger_db:
            await database.drop_database(pg_server, ledger_db)
    stats = read_stats(out, args.scenario)
    verdict.checks += locust_checks(stats, rc, alive)
    print_report(console, args, out, stats, report, verdict)
    return 0 if verdict.ok else 1


async def check_run(
    args: argparse.Namespace,
    stack: LocalStack,
    store: Store,
    event_id: str,
    report: dict[str, Any],
    settled: bool,
    console: Console,
) -> Verdict:
    """The invariants once the run settled: the burst's from the engine's state and the claims'
    answers; the purchase flow's after the nightly reconciliation, with the money."""
    if args.scenario == "burst":
        return await check_burst(
            store, event_id, all_codes(report, "claim"), args.users, args.seats
        )
    nightly = await nightly_report(stack, event_id)
    settled = await settle(stack, store, event_id, console) and settled
    async with httpx.AsyncClient(base_url=stack.sim_url, timeout=HTTP_TIMEOUT_S) as sim:
        ledger = (await sim.get("/v1/ledger")).json()
    seen = FlowSeen(
        answers=all_codes(report),
        confirmed_seats=list(report.get("confirmed_seats", [])),
        surprises=list(report.get("surprises", [])),
        settled=settled,
    )
    verdict = await check_flow(store, event_id, args.seats, PRICE, ledger, seen)
    verdict.checks.append(
        (
            "nightly reconciliation left nothing unrepaired",
            nightly["unrepaired"] == 0,
            f"{nightly['total']} found, {nightly['unrepaired']} left",
        )
    )
    console.print(refund_bound_table(ledger["entries"]))
    return verdict


def locust_checks(
    stats: list[dict[str, str]], rc: int | None, alive: bool
) -> list[tuple[str, bool, str]]:
    """Locust's own verdict (it finished, nothing failed) and the stack's (still running)."""
    failures = sum(int(r["Failure Count"]) for r in stats if r["Name"] == "Aggregated")
    requests = sum(int(r["Request Count"]) for r in stats if r["Name"] == "Aggregated")
    return [
        (
            "locust finished, exit code 0",
            rc == 0,
            "stopped after its run time + grace" if rc is None else f"exit code {rc}",
        ),
        ("locust: requests, no failures", requests > 0 and failures == 0, f"{failures} failed"),
        ("API, worker and simulator still running", alive, ""),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loadtest.locust.main", description=__doc__)
    ap.add_argument("--scenario", choices=("burst", "flow"), required=True)
    ap.add_argument("--users", type=int, default=1_000)
    ap.add_argument("--seats", type=int, default=80)
    ap.add_argument("--spawn-rate", type=float, default=0, help="users/s (default: --users)")
    ap.add_argument("--run-time", type=run_time, default="30s", help="Locust's: 30s, 1m30s")
    ap.add_argument("--out", default="", help="report directory")
    ap.add_argument("--workers", type=int, default=2, help="API (uvicorn) workers")
    ap.add_argument("--hold-ttl-ms", type=int, default=0, help="default: 600000 burst, 8000 flow")
    ap.add_argument("--quarantine-ms", type=int, default=4_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    if not args.hold_ttl_ms:
        args.hold_ttl_ms = 600_000 if args.scenario == "burst" else 8_000
    if args.users < 1 or args.seats < 1:
        ap.error("--users and --seats must be positive")
    return asyncio.run(run(args, Console()))


if __name__ == "__main__":
    raise SystemExit(main())
