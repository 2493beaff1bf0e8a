"""`python -m loadtest.demo` (`make demo`): the whole stack on this machine and a T0 burst
through it, over HTTP.

It starts the provider simulator, the API (two uvicorn workers) and the worker as separate
processes, creates an event of 80 seats and opens it at T0 (by the Redis clock). 10,000
clients, already logged in, press "buy" at T0. The 80 winners then pay through the simulator,
which declines some, fails some, answers some with a timeout and captures them late, loses some
callbacks (reconciliation finds them) and delivers the rest once, twice or three times. Some
buyers walk away, pay from two tabs, release, or drop their seat and grab another while the
first charge still captures. Fans told "sold out" retry while seats may come back.

At the end it checks the engine's state (audit of docs/invariants.md), the money against the
simulator's ledger, and prints tables. Any violation makes the command exit non-zero."""

import asyncio
import os
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import orjson
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from engine.settings import Settings
from engine.store import Store
from loadtest.buyer import AsyncSend, BuyerApi
from loadtest.demo_ledger import LedgerWatch, demo_database
from loadtest.demo_report import Outcome, report
from loadtest.demo_scenario import (
    PRICE,
    Burst,
    DemoConfig,
    aiohttp_send,
    burst,
    buyers,
    logged_in_fans,
    seat_map,
    second_wave,
)
from loadtest.stack import QUICK_SETTLE_ENV, LocalStack

SETTLE_TIMEOUT_S = 30.0  # refunds and callbacks still in flight once the buyers are done


@dataclass(frozen=True)
class Sale:
    """One run's event and the clients that reach the stack: the operator's and the fans'."""

    stack: LocalStack
    store: Store
    cfg: DemoConfig
    event_id: str
    http: httpx.AsyncClient  # availability, admin and metrics reads
    send: AsyncSend  # the fans' requests


@dataclass(frozen=True)
class Played:
    """What the crowd did, and how the stack settled after it."""

    burst: Burst
    kinds: Counter[str]
    late_sold: int
    settled: bool
    nightly: dict[str, Any] | None


async def run_demo(
    settings: Settings,
    cfg: DemoConfig,
    console: Console,
    pg_dsn: str = "",
    pg_database: str = "onsale_demo",
) -> int:
    ledger_dsn = await demo_database(pg_dsn, pg_database) if pg_dsn else ""
    stack = LocalStack(
        ledger_dsn=ledger_dsn,
        redis_url=settings.redis_url,
        key_prefix=settings.key_prefix,
        log_dir=Path(".services") / "demo-logs",
        api_workers=cfg.api_workers,
        sim_args=(
            *("--decline-rate", "0.1", "--fail-rate", "0.03", "--late-rate", "0.1"),
            *("--late-delay-ms", str(cfg.hold_ttl_ms + cfg.quarantine_ms // 2)),
            *("--duplicate-rate", "0.3", "--loss-rate", "0.05"),
            *("--contradict-rate", "1.0"),  # every decline is captured anyway, later: given back
            *("--seed", str(cfg.seed)),
        ),
        extra_env=dict(QUICK_SETTLE_ENV),
    )
    console.print(
        f"[bold]demo[/]: starting provider simulator, API "
        f"({cfg.api_workers} workers), worker"
        f"{' and ledger writer' if ledger_dsn else ' (no ONSALE_PG_DSN: no ledger)'}; "
        f"logs in {stack.log_dir}/"
    )
    stack.start()
    redis_client = settings.redis_client()
    store = Store(redis_client, prefix=settings.key_prefix)
    try:
        return await _run(stack, store, cfg, console)
    finally:
        stack.stop()
        await redis_client.aclose()


async def _run(stack: LocalStack, store: Store, cfg: DemoConfig, console: Console) -> int:
    event_id = f"demo-{time.strftime('%H%M%S')}-{uuid.uuid4().hex[:4]}"
    connector = aiohttp.TCPConnector(limit=cfg.connections_max)
    async with (
        httpx.AsyncClient(base_url=stack.api_url, timeout=httpx.Timeout(30.0)) as http,
        aiohttp.ClientSession(
            base_url=stack.api_url, connector=connector, timeout=aiohttp.ClientTimeout(total=30)
        ) as fan_http,
    ):
        sale = Sale(stack, store, cfg, event_id, http, aiohttp_send(fan_http))
        t0_ms, seat_ids = await _open_event(sale, console)
        fans = logged_in_fans(event_id, stack.token_secret, cfg.clients)
        watch = None
        if stack.ledger_dsn:
            watch = LedgerWatch(stack.ledger_dsn, stack.ledger_metrics_port, event_id)
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=console) as progress:
            played = await _play(sale, fans, t0_ms, seat_ids, progress)
        avail = (await http.get(f"/v1/events/{event_id}")).json()
        async with httpx.AsyncClient(base_url=stack.sim_url) as sim:
            provider_ledger = (await sim.get("/v1/ledger")).json()
        metrics = (await http.get("/metrics", headers=stack.admin_headers())).text
    ledger_view = None
    if watch is not None:
        ledger_view = await watch.caught_up(len(await store.read.outbox(event_id)))
    audit = await store.read.audit(event_id)
    should_hold = sum(c.holds_money for c in await store.read.scan_charges(event_id))
    return report(
        console,
        Outcome(
            event_id=event_id,
            clients=cfg.clients,
            burst=played.burst,
            kinds=played.kinds,
            late_sold=played.late_sold,
            avail=avail,
            provider_ledger=provider_ledger,
            audit=audit,
            settled=played.settled,
            alive=stack.alive(),
            metrics=metrics,
            ledger_view=ledger_view,
            should_hold=should_hold,
            nightly=played.nightly,
        ),
    )


async def _open_event(sale: Sale, console: Console) -> tuple[int, list[str]]:
    """Create the event, opening at T0 two seconds from now by the Redis clock: (T0, its seats)."""
    cfg = sale.cfg
    seats = seat_map(cfg.seats)
    t0_ms = await sale.store.read.server_time_ms() + 2_000
    await asyncio.to_thread(
        sale.stack.create_event,
        sale.event_id,
        seats,
        opens_at_ms=t0_ms,
        hold_ttl_ms=cfg.hold_ttl_ms,
        quarantine_ms=cfg.quarantine_ms,
        policy="quarantine",
        price_minor=PRICE,
    )
    console.print(
        f"event {sale.event_id}: {cfg.seats} seats, {cfg.clients:,} clients at T0, "
        f"hold {cfg.hold_ttl_ms} ms, quarantine {cfg.quarantine_ms} ms"
    )
    return t0_ms, [s["seat_id"] for s in seats]


async def _play(
    sale: Sale, fans: dict[str, BuyerApi], t0_ms: int, seat_ids: list[str], progress: Progress
) -> Played:
    """The T0 burst, then the winners' journeys alongside the second wave, then settling."""
    cfg, send = sale.cfg, sale.send
    now_ms = await sale.store.read.server_time_ms()
    result = await burst(send, fans, t0_ms, now_ms, seat_ids, progress, cfg.seed)
    wave_deadline = time.monotonic() + (cfg.hold_ttl_ms + cfg.quarantine_ms) / 1000 + 15
    won = {login for login, _ in result.winners}
    losers = [api for login, api in fans.items() if login not in won]
    wave = asyncio.create_task(second_wave(send, losers[:200], wave_deadline))
    kinds = await buyers(send, fans, result.winners, cfg, progress)
    late_sold = await wave
    settled, nightly = await _settle(sale, progress)
    return Played(result, kinds, late_sold, settled, nightly)


async def _settle(sale: Sale, progress: Progress) -> tuple[bool, dict[str, Any] | None]:
    """Wait for refunds and callbacks to settle; with a ledger, run the nightly reconciliation
    and settle again. (settled, the nightly report or None)."""
    settle = progress.add_task("refunds and callbacks settling", total=None)
    settled = await _wait_settled(sale, SETTLE_TIMEOUT_S)
    progress.update(settle, total=1, completed=1)
    if not sale.stack.ledger_dsn:
        return settled, None
    # What the provider did that no callback told us (a lost webhook of a capture after a
    # decline, say) is found by the nightly run, as in production.
    night = progress.add_task("nightly reconciliation", total=None)
    nightly = await nightly_report(sale.stack, sale.event_id)
    settled = await _wait_settled(sale, SETTLE_TIMEOUT_S)
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
        "0",
        env={**os.environ, **stack.env()},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    async with asyncio.timeout(120):
        await proc.wait()
    report: dict[str, Any] = orjson.loads(await asyncio.to_thread(out.read_bytes))
    return report


async def _wait_settled(sale: Sale, timeout_s: float) -> bool:
    """Until no hold is live or blocked, no refund pending or retrying, no charge in flight too
    long and no callback undelivered; False when that did not happen within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    admin = {"Authorization": f"Bearer {sale.stack.admin_token}"}
    async with httpx.AsyncClient(base_url=sale.stack.sim_url) as sim:
        while time.monotonic() < deadline:
            a = (await sale.http.get(f"/v1/events/{sale.event_id}")).json()
            ex = (
                await sale.http.get(
                    f"/v1/admin/events/{sale.event_id}/exceptions",
                    headers=admin,
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


def main(argv: list[str] | None = None) -> int:
    """`python -m loadtest.demo` (`make demo`)."""
    import argparse

    from engine.settings import MissingSetting

    parser = argparse.ArgumentParser(prog="python -m loadtest.demo", description=__doc__)
    parser.add_argument("--clients", type=int, default=DemoConfig.clients)
    parser.add_argument("--seats", type=int, default=DemoConfig.seats)
    parser.add_argument("--hold-ttl-ms", type=int, default=DemoConfig.hold_ttl_ms)
    parser.add_argument("--quarantine-ms", type=int, default=DemoConfig.quarantine_ms)
    parser.add_argument("--seed", type=int, default=DemoConfig.seed)
    parser.add_argument("--api-workers", type=int, default=DemoConfig.api_workers)
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env(os.environ)
    except MissingSetting as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    cfg = DemoConfig(
        clients=args.clients,
        seats=args.seats,
        hold_ttl_ms=args.hold_ttl_ms,
        quarantine_ms=args.quarantine_ms,
        seed=args.seed,
        api_workers=args.api_workers,
    )
    pg_dsn = os.environ.get("ONSALE_PG_DSN", "")
    database = os.environ.get("ONSALE_DEMO_DATABASE", "onsale_demo")
    try:
        return asyncio.run(run_demo(settings, cfg, Console(), pg_dsn, database))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
