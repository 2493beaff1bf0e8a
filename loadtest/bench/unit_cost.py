"""What a claim costs by what it asks for, measured side by side in one run on one Redis.

    python -m loadtest.bench.unit_cost [--requests 20000] [--clients 50] [--baseline-rev REV]

Starts a private Redis server (no persistence) and drives EVALSHA of hold_claim with
redis-benchmark (a C client) for: one seat, a party of 4 and of 6 ("n best together"), and
stock carts of 1, 4 and 6 units (one or two lines). Every call is a new login's claim that
succeeds (a write). Each variant runs on a fresh event (seats in rows of 20, each row its own
section, so a block is found at the front as at T0), and Redis's own per-call time (INFO
commandstats) is read per row. With `--baseline-rev`, the single-seat claim of that revision
(its lua/_lib.lua and lua/hold_claim.lua, read with `git show`) runs on the same server,
alternating with today's, twice each: the before/after figure of docs/benchmarks-journal.md."""

import argparse
import asyncio
import shutil
import subprocess
import sys

import redis.asyncio as aioredis
from rich.console import Console
from rich.progress import track
from rich.table import Table

import lua
from engine.model import keys
from engine.model.event_config import EventConfig
from engine.model.holds import SeatSpec
from engine.model.stock_lines import SkuSpec
from engine.store import Store
from loadtest.bench.persistence_cost import CLAIM_LIMITS, bench, private_server

ROW = 20  # seats per row (one section each)
VARIANTS: tuple[tuple[str, str, int], ...] = (
    # (name, what the claim asks for: hold_claim ARGV[3], units)
    ("1 seat", "", 1),
    ("party of 4 (n best)", "#4", 4),
    ("party of 6 (n best)", "#6", 6),
    ("cart: 1 unit, 1 line", "+CHAIN*1", 1),
    ("cart: 4 units, 2 lines", "+CHAIN*2,TUBE*2", 4),
    ("cart: 6 units, 2 lines", "+CHAIN*3,TUBE*3@west", 6),
)


async def seat_event(store: Store, event_id: str, seats: int) -> None:
    await store.create_event(
        event_id,
        (SeatSpec(f"s{i}", i, f"r{i // ROW}") for i in range(seats)),
        EventConfig(hold_ttl_ms=3_600_000, quarantine_ms=60_000),
    )
    await store.open_sale(event_id)


async def stock_event(store: Store, event_id: str, units: int) -> None:
    skus = [SkuSpec(s, 100, {"east": units, "west": units}) for s in ("CHAIN", "TUBE")]
    await store.stock.create_event(
        event_id, ["east", "west"], skus, EventConfig(hold_ttl_ms=3_600_000, quarantine_ms=60_000)
    )
    await store.open_sale(event_id)


def old_claim_chunk(rev: str) -> str:
    """The single-seat claim script as revision `rev` sent it (clock + _lib + hold_claim)."""
    parts = [lua.source("_clock_server")]
    for name in ("_lib", "hold_claim"):
        parts.append(
            subprocess.run(
                ["git", "show", f"{rev}:lua/{name}.lua"], capture_output=True, text=True, check=True
            ).stdout
        )
    return "\n".join(parts)


async def measure(
    port: int, args: argparse.Namespace, script: tuple[str, str], event_id: str, want: str
) -> tuple[float, float]:
    """`script`: ("FCALL", function) of this code, or ("EVALSHA", sha) of an older one's."""
    client = aioredis.Redis(port=port, decode_responses=True)
    try:
        await client.config_resetstat()
        event_keys = keys.script_keys(event_id)
        rate = bench(
            port, args.requests, args.clients,
            *script, str(len(event_keys)), *event_keys,
            "h__rand_int__", "u__rand_int__", want, *CLAIM_LIMITS,
        )  # fmt: skip
        stats = await client.info("commandstats")
        return rate, float(stats[f"cmdstat_{script[0].lower()}"]["usec_per_call"])
    finally:
        await client.aclose()


async def run(port: int, args: argparse.Namespace) -> list[tuple[str, int, float, float]]:
    client = aioredis.Redis(port=port, decode_responses=True)
    store = Store(client, autopipeline=False, timeout_s=60)
    await store.scripts.load_all()
    claim = ("FCALL", store.scripts.function("hold_claim"))
    seats = args.requests * 6 + ROW * 10
    plan: list[tuple[str, str, int, tuple[str, str]]] = []  # (name, want, units, script)
    for name, want, units in VARIANTS:
        plan.append((name, want, units, claim))
    if args.baseline_rev:
        old = ("EVALSHA", await client.script_load(old_claim_chunk(args.baseline_rev)))
        one = ("1 seat", "", 1, claim)
        base = (f"1 seat, {args.baseline_rev}", "", 1, old)
        plan = [base, one, base, one, *plan[1:]]
    rows = []
    for i, (name, want, units, script) in enumerate(track(plan, description="claim variants")):
        event_id = f"cost{i}"
        if want.startswith("+"):
            await stock_event(store, event_id, args.requests * 6)
        else:
            await seat_event(store, event_id, seats if units > 1 else args.requests + ROW)
        rate, usec = await measure(port, args, script, event_id, want)
        rows.append((name, units, rate, usec))
        await store.restore.drop_event(event_id)  # keep the server's memory flat
    await client.aclose()
    return rows


def report(args: argparse.Namespace, rows: list[tuple[str, int, float, float]]) -> None:
    t = Table(
        title=f"hold_claim by what it asks for: {args.requests:,} claims each, "
        f"{args.clients} clients (redis-benchmark, no persistence)"
    )
    for col in ("claim", "units", "claims/s", "server µs per call", "µs vs 1 seat"):
        t.add_column(col, justify="right")
    base = min(usec for name, _u, _r, usec in rows if name == "1 seat")
    for name, units, rate, usec in rows:
        t.add_row(name, str(units), f"{rate:,.0f}", f"{usec:.2f}", f"{usec / base:.2f}")
    Console().print(t)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=20_000, help="claims per variant")
    ap.add_argument("--clients", type=int, default=50, help="redis-benchmark connections")
    ap.add_argument(
        "--baseline-rev", default="", help="git revision whose single-seat claim to compare"
    )
    args = ap.parse_args()
    if shutil.which("redis-benchmark") is None or shutil.which("redis-server") is None:
        print("needs redis-server and redis-benchmark", file=sys.stderr)
        return 2
    with private_server(["--appendonly", "no"]) as port:
        rows = asyncio.run(run(port, args))
    report(args, rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
