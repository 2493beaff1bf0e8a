"""`python -m loadtest.demo.main --retail` (`make demo-retail`): the retail run of the demo. Bicycle
parts (chains, tubes, brake pads, tyres, and a scarce Di2 derailleur) sold from an East and a
West warehouse through the whole stack, over HTTP only, as a stock event (ADR 0022).

It starts the same processes as the seat demo (provider simulator, API, worker, ledger writer),
creates the stock event through the admin API (locations east then west, a per-login cap of a
few units, carts held 10 minutes in production and a few seconds here) and lets shoppers come
over a few seconds. Each fills a cart of 1 to 3 lines, most letting the location rule choose
the warehouse, and pays through the simulator, which declines some, fails some, answers some
with a timeout and captures them after the cart's deadline (they must be refunded, the stock
left as it was), captures some declines anyway, loses some callbacks and sends others twice or
three times. Some shoppers abandon their cart, empty it, pay in its last moments, pay from two
tabs or drop it while paying. In the middle of the sale the warehouses correct their counts
through the admin API: a delivery, damaged units, a write-off that must be refused because
sales and carts own the units, and a correction sent twice.

At the end it prints the stock per SKU and location, the money, the late captures, the ledger
and the invariant checks; any violation makes the command exit non-zero."""

import argparse
import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import Any

import aiohttp
import httpx
from rich.console import Console
from rich.progress import Progress

from engine.config.settings import Settings
from engine.model.states import HoldState
from engine.store import Store
from loadtest.demo.ledger import LedgerView, LedgerWatch, stock_ledger
from loadtest.demo.retail_report import RetailOutcome, report
from loadtest.demo.retail_shoppers import Receipt, Shopping, plan, receipts, shop
from loadtest.demo.retail_stock import (
    Corrected,
    create_shop,
    event_body,
    initial_counts,
    mid_sale_corrections,
    stock_view,
)
from loadtest.demo.run import progress_bars, provider_books, run_command, running_stack, settle
from loadtest.demo.scenario import aiohttp_send, logged_in_fans
from loadtest.devstack.buyer import BuyerApi
from loadtest.devstack.stack import LocalStack

PRODUCTION_CART_MS = 600_000  # a cart holds its units 10 minutes in production


@dataclass(frozen=True)
class RetailConfig:
    shoppers: int = 1_000
    arrival_s: float = 8.0  # shoppers come over this long after the sale opens
    hold_ttl_ms: int = 6_000  # the 10-minute cart, 100 times shorter so the demo ends
    login_cap: int = 8  # units one login may hold and buy: a retailer's limit on parts
    seed: int = 2026
    connections_max: int = 100  # HTTP connections shared by the simulated shoppers
    api_workers: int = 2


def sim_args(cfg: RetailConfig) -> tuple[str, ...]:
    return (
        *("--decline-rate", "0.08", "--fail-rate", "0.02", "--late-rate", "0.06"),
        # A timed-out charge captures one whole cart lifetime later: after its cart's deadline.
        *("--late-delay-ms", str(cfg.hold_ttl_ms)),
        *("--duplicate-rate", "0.3", "--loss-rate", "0.03"),
        *("--contradict-rate", "0.3"),  # some declines captured anyway, later: given back
        *("--seed", str(cfg.seed)),
    )


async def run_retail(
    settings: Settings,
    cfg: RetailConfig,
    console: Console,
    pg_dsn: str = "",
    pg_database: str = "onsale_demo",
) -> int:
    async with running_stack(
        settings,
        console,
        api_workers=cfg.api_workers,
        sim_args=sim_args(cfg),
        pg_dsn=pg_dsn,
        pg_database=pg_database,
    ) as (stack, store):
        return await _run(stack, store, cfg, console)


@dataclass(frozen=True)
class Sold:
    """What happened during the sale, and how the stack settled after it."""

    shopping: Shopping
    corrections: list[Corrected]
    receipts: list[Receipt]
    settled: bool
    nightly: dict[str, Any] | None
    ledger_view: LedgerView | None


async def _run(stack: LocalStack, store: Store, cfg: RetailConfig, console: Console) -> int:
    event_id = f"retail-{time.strftime('%H%M%S')}-{uuid.uuid4().hex[:4]}"
    connector = aiohttp.TCPConnector(limit=cfg.connections_max)
    async with (
        httpx.AsyncClient(base_url=stack.api_url, timeout=httpx.Timeout(30.0)) as http,
        aiohttp.ClientSession(
            base_url=stack.api_url, connector=connector, timeout=aiohttp.ClientTimeout(total=30)
        ) as shop_http,
    ):
        body = event_body(event_id, cfg.shoppers, hold_ttl_ms=cfg.hold_ttl_ms,
                          login_cap=cfg.login_cap)  # fmt: skip
        units = await create_shop(http, stack.admin_headers(), body)
        console.print(
            f"event {event_id}: {len(body['skus'])} SKUs, {units:,} units at east and west, "
            f"{cfg.shoppers:,} shoppers over {cfg.arrival_s:g} s, carts held "
            f"{cfg.hold_ttl_ms / 1000:g} s ({PRODUCTION_CART_MS // 60_000} min in production), "
            f"{cfg.login_cap} units per login"
        )
        fans = logged_in_fans(event_id, stack.token_secret, cfg.shoppers, name="shopper")
        watch = None
        if stack.ledger_dsn:
            watch = LedgerWatch(stack.ledger_dsn, stack.ledger_metrics_port, event_id)
        with progress_bars(console) as progress:
            sold = await _sell(stack, store, http, shop_http, event_id, cfg, fans, watch, progress)
        final = await stock_view(http, event_id)
        provider_ledger = await provider_books(stack)
    sl = await stock_ledger(stack.ledger_dsn, event_id) if stack.ledger_dsn else None
    holds = await store.read.holds(event_id)
    return report(
        console,
        RetailOutcome(
            event_id=event_id,
            shoppers=cfg.shoppers,
            shopping=sold.shopping,
            corrections=sold.corrections,
            initial=initial_counts(cfg.shoppers),
            stock=final,
            receipts=sold.receipts,
            provider_ledger=provider_ledger,
            audit=await store.read.audit(event_id),
            should_hold=sum(c.holds_money for c in await store.read.scan_charges(event_id)),
            confirmed_holds=sum(h.state == HoldState.CONFIRMED for h in holds.values()),
            settled=sold.settled,
            alive=stack.alive(),
            nightly=sold.nightly,
            ledger_view=sold.ledger_view,
            stock_ledger=sl,
        ),
    )


async def _sell(
    stack: LocalStack,
    store: Store,
    http: httpx.AsyncClient,
    shop_http: aiohttp.ClientSession,
    event_id: str,
    cfg: RetailConfig,
    fans: dict[str, BuyerApi],
    watch: LedgerWatch | None,
    progress: Progress,
) -> Sold:
    """The shoppers, with the corrections halfway through their arrivals; then settling, the
    ledger catching up, and every cart's receipt read back by its shopper."""
    send = aiohttp_send(shop_http)
    shoppers = plan(fans, cfg.arrival_s, cfg.login_cap, cfg.seed)
    corrections = asyncio.create_task(_corrections_at(cfg.arrival_s / 2, stack, http, event_id))
    shopping = await shop(send, shoppers, cfg.hold_ttl_ms, progress)
    corrected = await corrections
    settled, nightly = await settle(stack, http, event_id, progress)
    ledger_view = None
    if watch is not None:  # a buyer reads CONFIRMED only once the ledger holds the sale
        ledger_view = await watch.caught_up(len(await store.read.outbox(event_id)))
    read = await receipts(send, fans, shopping.holds, progress)
    return Sold(shopping, corrected, read, settled, nightly, ledger_view)


async def _corrections_at(
    after_s: float, stack: LocalStack, http: httpx.AsyncClient, event_id: str
) -> list[Corrected]:
    await asyncio.sleep(after_s)
    return await mid_sale_corrections(http, stack.admin_headers(), event_id)


def main(argv: list[str] | None = None) -> int:
    """`python -m loadtest.demo.main --retail` (`make demo-retail`)."""
    parser = argparse.ArgumentParser(
        prog="python -m loadtest.demo.main --retail", description=__doc__
    )
    parser.add_argument("--shoppers", type=int, default=RetailConfig.shoppers)
    parser.add_argument("--arrival-s", type=float, default=RetailConfig.arrival_s)
    parser.add_argument(
        "--hold-ttl-ms",
        type=int,
        default=RetailConfig.hold_ttl_ms,
        help="how long a cart holds its units (10 minutes in production)",
    )
    parser.add_argument("--login-cap", type=int, default=RetailConfig.login_cap)
    parser.add_argument("--seed", type=int, default=RetailConfig.seed)
    parser.add_argument("--api-workers", type=int, default=RetailConfig.api_workers)
    args = parser.parse_args(argv)
    cfg = RetailConfig(
        shoppers=args.shoppers,
        arrival_s=args.arrival_s,
        hold_ttl_ms=args.hold_ttl_ms,
        login_cap=args.login_cap,
        seed=args.seed,
        api_workers=args.api_workers,
    )
    return run_command(
        lambda settings, pg_dsn, database: run_retail(settings, cfg, Console(), pg_dsn, database)
    )


if __name__ == "__main__":
    raise SystemExit(main())
