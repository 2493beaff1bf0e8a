"""`python -m loadtest.bench.trim_pass`: what one trim pass costs when most events are idle. For
each count of events (10, 1,000, 10,000 by default), idle one-seat events plus one event with an
ended hold to trim; a trimmer without a ledger (the retention 0) runs passes, alternated: as it
is (the trim index: one read, then only the events with something to trim) and, before it, one
pipelined look at every event's ended holds. Each pass's wall time and the Redis server's CPU
(INFO) it took, medians of the rounds."""

import argparse
import asyncio
import statistics
import time
import uuid

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from engine.model.event_config import EventConfig
from engine.model.holds import SeatSpec
from engine.store import Store
from engine.workers.looks import FULL_LOOK_S
from engine.workers.trim import Trimmer
from loadtest.bench.sweep_lag import idle_events
from loadtest.devstack.services import redis_client

ROUNDS = 7


async def redis_cpu_ms(store: Store) -> float:
    info = await store.client.info("cpu")
    return (float(info["used_cpu_sys"]) + float(info["used_cpu_user"])) * 1000


async def one_pass(store: Store, trimmer: Trimmer, *, every: bool) -> tuple[float, float]:
    """(wall ms, Redis CPU ms) of one pass; `every`: the look at every event."""
    trimmer.looks.full_look_at = time.monotonic() - (FULL_LOOK_S if every else 0)
    await store.claim("busy", "u", f"h{uuid.uuid4().hex[:8]}")  # the previous hold ends
    cpu, started = await redis_cpu_ms(store), time.perf_counter()
    await trimmer.run_once()
    wall = (time.perf_counter() - started) * 1000
    return wall, await redis_cpu_ms(store) - cpu


async def measure(store: Store, events: int, p: Progress) -> dict[str, list[tuple[float, float]]]:
    task = p.add_task(f"{events:,} events", total=events + 2 * ROUNDS)
    await idle_events(store, events - 1, p, task)
    seats = [SeatSpec("s0", 0, "A"), SeatSpec("s1", 1, "A")]  # a login trades its hold
    await store.create_event("busy", seats, EventConfig(hold_ttl_ms=60_000, quarantine_ms=60_000))
    await store.open_sale("busy")
    p.advance(task)
    trimmer = Trimmer(store, retention_ms=0, without_ledger=True)
    found: dict[str, list[tuple[float, float]]] = {"index": [], "every event": []}
    for _ in range(ROUNDS):
        for name, every in (("index", False), ("every event", True)):
            found[name].append(await one_pass(store, trimmer, every=every))
            p.advance(task)
    return found


async def main_async(counts: list[int]) -> None:
    client = redis_client()
    console = Console()
    table = Table(title=f"one trim pass, median of {ROUNDS} alternated")
    for col in ("events", "look", "wall ms", "Redis CPU ms"):
        table.add_column(col, justify="left" if col == "look" else "right")
    with Progress(console=console) as progress:
        for events in counts:
            store = Store(client, prefix=f"onsale:trim-pass:{uuid.uuid4().hex[:8]}")
            await store.scripts.load_all()
            for name, passes in (await measure(store, events, progress)).items():
                wall = statistics.median(w for w, _c in passes)
                cpu = statistics.median(c for _w, c in passes)
                table.add_row(f"{events:,}", name, f"{wall:.1f}", f"{cpu:.1f}")
            async for key in client.scan_iter(match=f"{store.prefix}:*", count=1000):
                await client.delete(key)
    await client.aclose()
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, nargs="+", default=[10, 1_000, 10_000])
    args = parser.parse_args()
    asyncio.run(main_async(args.events))


if __name__ == "__main__":
    main()
