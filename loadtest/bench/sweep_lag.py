"""`python -m loadtest.bench.sweep_lag`: how late the sweeper expires a hold when most events are
idle. For each count of events (10, 1,000, 10,000 by default), idle one-seat events plus one event
with 16 holds whose deadline comes a second later; a sweeper with a 50 ms interval runs, and each
hold's lateness is its EXPIRED decision's time minus its deadline (both by the Redis clock). Run
side by side: the sweeper as it is (the due index: one read, then only the events with something
due) and, with `--compare`, the designs before it: one pipelined look at every event each pass, and
both scripts on every event each pass."""

import argparse
import asyncio
import statistics
import uuid

from rich.console import Console
from rich.progress import Progress, TaskID
from rich.table import Table

from engine.model.event_config import EventConfig
from engine.model.holds import SeatSpec
from engine.model.states import HoldState
from engine.store import Store
from engine.store.loops import each_event
from engine.workers.sweeper import Sweeper, due_events
from loadtest.devstack.services import redis_client

HOLDS = 16
INTERVAL_MS = 50


class LookEvery(Sweeper):
    """The sweeper before the due index: one pipelined look at every event, every pass."""

    async def run_once(self) -> bool:
        due = await due_events(self.store, await self.store.read.event_ids())
        return await each_event(due, self.sweep_event, self.stats)


class VisitEvery(Sweeper):
    """The sweeper before the look: both scripts for every event, every pass."""

    async def run_once(self) -> bool:
        return await each_event(await self.store.read.event_ids(), self.sweep_event, self.stats)


async def idle_events(store: Store, count: int, p: Progress, task: TaskID) -> None:
    """`count` open events of one seat each, nothing held: what most of a platform's events
    are at any moment (the trim pass's bench makes the same)."""
    for i in range(count):
        await store.create_event(
            f"idle-{i}",
            [SeatSpec("s0", 0, "A")],
            EventConfig(hold_ttl_ms=60_000, quarantine_ms=60_000),
        )
        await store.open_sale(f"idle-{i}")
        p.advance(task)


async def lateness(
    store: Store, events: int, sweeper_kind: type[Sweeper], p: Progress
) -> list[int]:
    task = p.add_task(f"{events:,} events ({sweeper_kind.__name__})", total=events)
    await idle_events(store, events - 1, p, task)
    seats = [SeatSpec(f"s{i}", i, "A") for i in range(HOLDS)]
    await store.create_event("busy", seats, EventConfig(hold_ttl_ms=1_000, quarantine_ms=60_000))
    await store.open_sale("busy")
    for i in range(HOLDS):
        await store.claim("busy", f"u{i}", f"h{i}")
    p.advance(task)
    stop = asyncio.Event()
    sweeper = sweeper_kind(store, interval_ms=INTERVAL_MS)
    running = asyncio.create_task(sweeper.run(stop))
    late: list[int] = []
    while len(late) < HOLDS:
        await asyncio.sleep(0.05)
        holds = await store.read.holds("busy")
        late = [h.decided_ms - h.expires_ms for h in holds.values() if h.state == HoldState.EXPIRED]
    stop.set()
    await running
    return late


async def main_async(counts: list[int], compare: bool) -> None:
    client = redis_client()
    console = Console()
    rows = []
    kinds: list[type[Sweeper]] = [Sweeper, LookEvery, VisitEvery] if compare else [Sweeper]
    with Progress(console=console) as progress:
        for events in counts:
            for kind in kinds:
                store = Store(client, prefix=f"onsale:sweep-lag:{uuid.uuid4().hex[:8]}")
                await store.scripts.load_all()
                late = await lateness(store, events, kind, progress)
                rows.append((events, kind.__name__, late))
                async for key in client.scan_iter(match=f"{store.prefix}:*", count=1000):
                    await client.delete(key)
    await client.aclose()
    table = Table(title=f"expiry lateness (ms past the deadline), {HOLDS} holds, sweep every "
                  f"{INTERVAL_MS} ms")  # fmt: skip
    for col in ("events", "sweeper", "median", "max"):
        table.add_column(col, justify="left" if col == "sweeper" else "right")
    for events, name, late in rows:
        table.add_row(f"{events:,}", name, str(int(statistics.median(late))), str(max(late)))
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[10, 1_000, 10_000])
    parser.add_argument("--compare", action="store_true", help="also the designs before")
    args = parser.parse_args()
    asyncio.run(main_async(args.events, args.compare))


if __name__ == "__main__":
    main()
