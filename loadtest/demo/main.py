"""`python -m loadtest.demo.main` (`make demo`): the whole stack on this machine and a T0 burst
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
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx
from rich.console import Console
from rich.progress import Progress

from engine.config.settings import Settings
from engine.store import Store
from loadtest.demo.ledger import LedgerWatch
from loadtest.demo.report import Outcome, report
from loadtest.demo.run import nightly_report as nightly_report  # the load tools' import
from loadtest.demo.run import progress_bars, provider_books, run_command, running_stack, settle
from loadtest.demo.scenario import (
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
from loadtest.devstack.buyer import AsyncSend, BuyerApi
from loadtest.devstack.stack import LocalStack


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
    sim_args = (
        *("--decline-rate", "0.1", "--fail-rate", "0.03", "--late-rate", "0.1"),
        *("--late-delay-ms", str(cfg.hold_ttl_ms + cfg.quarantine_ms // 2)),
        *("--duplicate-rate", "0.3", "--loss-rate", "0.05"),
        *("--contradict-rate", "1.0"),  # every decline is captured anyway, later: given back
        *("--seed", str(cfg.seed)),
    )
    async with running_stack(
        settings,
        console,
        api_workers=cfg.api_workers,
        sim_args=sim_args,
        pg_dsn=pg_dsn,
        pg_database=pg_database,
    ) as (stack, store):
        return await _run(stack, store, cfg, console)


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
        with progress_bars(console) as progress:
            played = await _play(sale, fans, t0_ms, seat_ids, progress)
        avail = (await http.get(f"/v1/events/{event_id}")).json()
        provider_ledger = await provider_books(stack)
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
    settled, nightly = await settle(sale.stack, sale.http, sale.event_id, progress)
    return Played(result, kinds, late_sold, settled, nightly)


def main(argv: list[str] | None = None) -> int:
    """`python -m loadtest.demo.main` (`make demo`); with `--retail`, the retail run instead
    (`make demo-retail`, loadtest/demo/retail.py), which takes its own options."""
    import argparse

    argv = sys.argv[1:] if argv is None else argv
    if "--retail" in argv:
        from loadtest.demo.retail import main as retail

        return retail([a for a in argv if a != "--retail"])
    parser = argparse.ArgumentParser(prog="python -m loadtest.demo.main", description=__doc__)
    parser.add_argument(
        "--retail",
        action="store_true",
        help="bicycle parts from two warehouses instead (see --retail -h)",
    )
    parser.add_argument("--clients", type=int, default=DemoConfig.clients)
    parser.add_argument("--seats", type=int, default=DemoConfig.seats)
    parser.add_argument("--hold-ttl-ms", type=int, default=DemoConfig.hold_ttl_ms)
    parser.add_argument("--quarantine-ms", type=int, default=DemoConfig.quarantine_ms)
    parser.add_argument("--seed", type=int, default=DemoConfig.seed)
    parser.add_argument("--api-workers", type=int, default=DemoConfig.api_workers)
    args = parser.parse_args(argv)
    cfg = DemoConfig(
        clients=args.clients,
        seats=args.seats,
        hold_ttl_ms=args.hold_ttl_ms,
        quarantine_ms=args.quarantine_ms,
        seed=args.seed,
        api_workers=args.api_workers,
    )
    return run_command(
        lambda settings, pg_dsn, database: run_demo(settings, cfg, Console(), pg_dsn, database)
    )


if __name__ == "__main__":
    raise SystemExit(main())
