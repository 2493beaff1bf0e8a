"""Claims on one Redis server against claims on a Redis Cluster, in one run (ADR 0030).

    python -m loadtest.bench.cluster_cost [--claims 20000] [--events 30] [--tasks 400]

Starts a private single server and a private cluster of 3 primaries with 1 replica each (all
without persistence, on this machine's cores), then drives the engine's own Store (auto-
pipelined script calls, as the API makes them) with `--tasks` concurrent claimers, every claim
a new login's that succeeds (a write). Rows: one event, then `--events` events, on each
deployment; on the cluster also with WAIT 1 (answer once a replica holds the writes). Prints
claims/s, the cost per claim relative to the single server, and how events spread over the
cluster's primaries. On one machine the cluster cannot be faster (its 6 servers share the same
cores); what it shows is that the cost per claim stays flat and the events spread evenly."""

import argparse
import asyncio
import contextlib
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from engine.model import errors, keys
from engine.model.event_config import EventConfig
from engine.model.holds import SeatSpec
from engine.store import Store
from engine.store.replicas import ReplicaWait
from loadtest.bench.persistence_cost import private_server
from loadtest.devstack.cluster import LocalCluster


@dataclass
class Row:
    deployment: str
    events: int
    wait: int
    claims: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.claims / self.seconds


async def _events(store: Store, n_events: int, seats_each: int) -> list[str]:
    ids = []
    for _ in range(n_events):
        event_id = f"bench-{uuid.uuid4().hex[:8]}"
        await store.create_event(
            event_id,
            (SeatSpec(f"s{i}", i, "A") for i in range(seats_each)),
            EventConfig(hold_ttl_ms=3_600_000, quarantine_ms=60_000),
        )
        await store.open_sale(event_id)
        ids.append(event_id)
    return ids


async def measure(
    client: "aioredis.Redis", label: str, n_events: int, claims: int, tasks: int, wait: int
) -> Row:
    prefix = f"onsale:bench:{uuid.uuid4().hex[:8]}"
    replica_wait = (
        ReplicaWait(client, prefix=prefix, replicas=wait, timeout_ms=1000) if wait else None
    )
    store = Store(client, prefix=prefix, timeout_s=10.0, wait=replica_wait)
    await store.ready()
    events = await _events(store, n_events, claims // n_events + 1)
    queue = iter(range(claims))
    done = 0

    async def claimer() -> None:
        nonlocal done
        for i in queue:
            event_id = events[i % n_events]
            with contextlib.suppress(errors.SoldOut):
                await store.claim(event_id, f"u{i}", f"k{i}")
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(claimer() for _ in range(tasks)))
    seconds = time.perf_counter() - started
    if replica_wait is not None:
        await replica_wait.aclose()
    with contextlib.suppress(Exception):
        async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            await client.delete(key)
    return Row(label, n_events, wait, done, seconds)


def spread(cluster_client: Any, n_events: int = 300) -> Counter[str]:
    return Counter(
        cluster_client.get_node_from_key(keys.event_key(f"e{i}", "event")).name
        for i in range(n_events)
    )


@contextlib.contextmanager
def deployments() -> Iterator[tuple[int, LocalCluster]]:
    with private_server(["--appendonly", "no"]) as port, tempfile.TemporaryDirectory() as d:
        cluster = LocalCluster(Path(d))
        try:
            cluster.start()
            yield port, cluster
        finally:
            cluster.stop()


async def run(args: argparse.Namespace) -> tuple[list[Row], Counter[str]]:
    rows: list[Row] = []
    with deployments() as (port, cluster):
        single = aioredis.Redis(port=port, decode_responses=True, max_connections=64)
        many = RedisCluster.from_url(
            cluster.url.replace("?cluster=true", ""), decode_responses=True, max_connections=64
        )
        plan: list[tuple[str, Any, int, int]] = [
            ("one server", single, 1, 0),
            ("cluster", many, 1, 0),
            ("one server", single, args.events, 0),
            ("cluster", many, args.events, 0),
            ("cluster", many, 1, 1),
            ("cluster", many, args.events, 1),
        ]
        with Progress(console=Console(stderr=True)) as progress:
            task = progress.add_task("claims", total=len(plan) * args.rounds)
            for _ in range(args.rounds):  # alternating: the machine's drift hits every row
                for label, client, n_events, wait in plan:
                    rows.append(
                        await measure(
                            client,
                            label,
                            n_events,
                            args.claims,
                            args.tasks,
                            wait,
                        )
                    )
                    progress.advance(task)
        counts = spread(many)
        await single.aclose()
        await many.aclose()
    return rows, counts


def report(rows: list[Row], counts: Counter[str], args: argparse.Namespace) -> None:
    console = Console()
    best: dict[tuple[str, int, int], Row] = {}
    for r in rows:
        key = (r.deployment, r.events, r.wait)
        if key not in best or r.rate > best[key].rate:
            best[key] = r
    base = {n: best[("one server", n, 0)].rate for n in (1, args.events)}
    table = Table(
        title=f"{args.claims} claims, {args.tasks} concurrent claimers, best of {args.rounds}"
    )
    for col in ("deployment", "events", "WAIT", "claims/s", "µs per claim", "vs one server"):
        table.add_column(col, justify="right")
    for (dep, n, wait), r in best.items():
        table.add_row(
            dep, str(n), str(wait) if wait else "-", f"{r.rate:,.0f}",
            f"{1e6 / r.rate:.1f}", f"{base[n] / r.rate:.2f}x cost",
        )  # fmt: skip
    console.print(table)
    spread_table = Table(title="300 event ids over the cluster's primaries")
    spread_table.add_column("primary")
    spread_table.add_column("events", justify="right")
    for node, n in sorted(counts.items()):
        spread_table.add_row(node, str(n))
    console.print(spread_table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--claims", type=int, default=20_000, help="claims per row")
    parser.add_argument("--events", type=int, default=30, help="events of the many-events rows")
    parser.add_argument("--tasks", type=int, default=400, help="concurrent claimers")
    parser.add_argument("--rounds", type=int, default=2, help="times each row runs (best kept)")
    args = parser.parse_args()
    rows, counts = asyncio.run(run(args))
    report(rows, counts, args)


if __name__ == "__main__":
    main()
