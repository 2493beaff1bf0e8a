"""`python -m loadtest.bench.rebuild_time`: how long a sale stops when Redis loses an event, with
nobody at the keyboard (ADR 0037). For each size (80 seats, 10,000 seats, 100,000 stock units
at two locations) it sells a tenth (200 units of the stock), lets the ledger catch up, and,
with a ledger writer running with automatic rebuilds on (its look is once a second), deletes
every key of the event (Redis restarted empty, for this event) and times the first claim
answered by the live sale again; the rebuild's own time beside it.
Real Redis (ONSALE_REDIS_URL) and a scratch database on ONSALE_PG_DSN's server."""

import argparse
import asyncio
import time
import uuid

import asyncpg
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from engine.model import errors
from engine.model.event_config import EventConfig
from engine.model.holds import ProviderOutcome, SeatSpec
from engine.model.stock_lines import SkuSpec, StockLine
from engine.store import Store
from loadtest.devstack.scratch import store_and_ledger
from persistence.writer import LedgerWriter

SIZES = (
    ("80 seats", "seats", 80),
    ("10k seats", "seats", 10_000),
    ("100k units", "stock", 100_000),
)


async def sell(store: Store, event_id: str, kind: str, n: int, progress: Progress) -> None:
    task = progress.add_task(f"{event_id}: selling {n}", total=n)
    for i in range(n):
        lines = (StockLine("part", 1),) if kind == "stock" else ()
        claimed = await store.claim(event_id, f"u{i}", f"h{i}", lines=lines)
        amount = claimed.amount or 100
        await store.start_charge(event_id, f"h{i}", f"u{i}", f"c{i}", amount)
        outcome = ProviderOutcome(f"pe{i}", f"c{i}", f"a{i}", "", "CAPTURED", amount=amount)
        await store.apply_outcome(event_id, outcome)
        progress.advance(task)


async def create(store: Store, event_id: str, kind: str, size: int) -> None:
    if kind == "stock":
        half = size // 2
        sku = SkuSpec("part", 100, {"east": half, "west": size - half})
        await store.stock.create_event(
            event_id,
            ["east", "west"],
            [sku],
            EventConfig(hold_ttl_ms=600_000, quarantine_ms=600_000),
        )
    else:
        seats = [SeatSpec(f"s{i}", i, "A") for i in range(size)]
        await store.create_event(
            event_id,
            seats,
            EventConfig(hold_ttl_ms=600_000, quarantine_ms=600_000),
            price_minor=100,
        )
    await store.open_sale(event_id)


async def first_claim_after_loss(store: Store, event_id: str, kind: str) -> float:
    lines = (StockLine("part", 1),) if kind == "stock" else ()
    began = time.monotonic()
    while time.monotonic() - began < 120:
        (restored,) = await store.read.event_fields(event_id, "restored_at_ms")
        if restored is not None:
            try:
                await store.claim(event_id, "probe", "h-probe", lines=lines)
                return time.monotonic() - began
            except (errors.Recovering, errors.EventNotFound, errors.SaleNotOpen):
                pass
        await asyncio.sleep(0.01)
    raise RuntimeError(f"{event_id} did not sell again within 120 s")


async def measure(
    store: Store, pool: asyncpg.Pool, label: str, kind: str, size: int, progress: Progress
) -> tuple[str, float, float]:
    event_id = f"rt-{kind}-{size}-{uuid.uuid4().hex[:6]}"
    await create(store, event_id, kind, size)
    await sell(store, event_id, kind, max(1, size // 10) if kind == "seats" else 200, progress)
    writer = LedgerWriter(store.client, pool, prefix=store.prefix, consumer="rt")
    while await writer.step(event_id):
        pass
    rebuilder = LedgerWriter(
        store.client, pool, prefix=store.prefix, consumer="rt-auto", auto_rebuild=True
    )
    stop = asyncio.Event()
    running = asyncio.create_task(rebuilder.run(stop, idle_s=0.1))
    try:
        await asyncio.sleep(1.5)  # a writer at work: its next look is 0 to 1 s away
        await store.restore.drop_event(event_id)  # Redis lost the event
        took = await first_claim_after_loss(store, event_id, kind)
    finally:
        stop.set()
        await running
    return label, took, rebuilder.fencer.rebuilder.stats.last_s


async def main_async(sizes: list[str]) -> None:
    console = Console()
    rows = []
    async with store_and_ledger("rebuild_time") as (store, pool):
        with Progress(console=console) as progress:
            for label, kind, size in SIZES:
                if label in sizes:
                    rows.append(await measure(store, pool, label, kind, size, progress))
    table = Table(title="Redis lost the event: the first claim answered again, nobody acting")
    for col in ("event", "loss to first claim (s)", "the rebuild itself (s)"):
        table.add_column(col, justify="left" if col == "event" else "right")
    for label, took, rebuild_s in rows:
        table.add_row(label, f"{took:.2f}", f"{rebuild_s:.2f}")
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", nargs="+", default=[s[0] for s in SIZES], choices=[s[0] for s in SIZES]
    )
    asyncio.run(main_async(parser.parse_args().sizes))


if __name__ == "__main__":
    main()
