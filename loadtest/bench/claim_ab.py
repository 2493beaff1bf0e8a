"""The claim script of two versions of lua/, side by side, each run on a fresh Redis.

    python -m loadtest.bench.claim_ab BEFORE_LUA_DIR [AFTER_LUA_DIR] [--rounds 5] [--requests 50000]
        [--seats 100000] [--redis-aof no|always] [--party N]

For each round and each version in turn: a private redis-server on a spare port, the same
event (`--seats` seats, open), that version's library loaded, then redis-benchmark's FCALL of
its hold_claim with a random hold id and login per call (every call claims a seat, or with
`--party N` the best N seats together: a write), as `loadtest.bench.persistence_cost` does. A fresh
server per run matters: on one server that keeps growing, each run pays for whatever hash or
sorted set happens to double in size during it, and the runs differ by more than the change
being measured. AFTER defaults to this checkout's lua/.
Prints each run, then the median and the minimum of Redis's own µs per call (INFO
commandstats) and of ops/s per version, and their ratio. A before version comes from
`git worktree add <dir> <rev>` (then `<dir>/lua`)."""

import argparse
import asyncio
import statistics
from pathlib import Path

import redis.asyncio as aioredis
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

import lua
from loadtest.bench.persistence_cost import CLAIM_LIMITS, MODES, bench, prepare, private_server


def library_of(tree: Path) -> tuple[str, str]:
    """(name, text) of the library built from the .lua files of `tree` (its own scripts: a
    version may have fewer or more than this checkout)."""
    own = lua.source
    lua.source = lambda name: (tree / f"{name}.lua").read_text(encoding="utf-8")
    try:
        scripts = sorted(p.stem for p in tree.glob("*.lua") if not p.stem.startswith("_"))
        return lua.library(prefix="ab", bodies={n: lua.source(n) for n in scripts})
    finally:
        lua.source = own


async def one_run(tree: Path, args: argparse.Namespace) -> tuple[float, float]:
    """(claims/s, server µs per claim) of `tree`'s hold_claim on a fresh server."""
    flags = MODES["AOF always" if args.redis_aof == "always" else "no persistence"]
    with private_server(flags) as port:
        _, event_keys = await prepare(port, args.seats)  # this checkout's library makes the event
        client = aioredis.Redis(port=port, decode_responses=True)
        try:
            name, text = library_of(tree)
            await client.function_flush()  # the same function names when `tree` is this lua/
            await client.function_load(text)
            function = f"hold_claim_{name.removeprefix('ab_')}"
            await client.config_resetstat()
            rate = await asyncio.to_thread(
                bench, port, args.requests, args.clients, "FCALL", function,
                str(len(event_keys)), *event_keys, "h__rand_int__", "u__rand_int__",
                f"#{args.party}" if args.party > 1 else "", *CLAIM_LIMITS,
            )  # fmt: skip
            stats = await client.info("commandstats")
            return rate, float(stats["cmdstat_fcall"]["usec_per_call"])
        finally:
            await client.aclose()


Runs = list[tuple[str, list[tuple[float, float]]]]  # (label, each run's claims/s and µs)


async def run(trees: list[Path], args: argparse.Namespace) -> Runs:
    labels = ("before", "after")
    runs: Runs = [(f"{label}: {tree}", []) for label, tree in zip(labels, trees, strict=True)]
    with Progress() as progress:
        task = progress.add_task("claim runs", total=args.rounds * len(trees))
        for _ in range(args.rounds):
            for tree, (_, rows) in zip(trees, runs, strict=True):
                rows.append(await one_run(tree, args))
                progress.advance(task)
    return runs


def report(runs: Runs, args: argparse.Namespace) -> None:
    t = Table(
        title=f"hold_claim of {args.party} seat(s), {args.requests:,} claims x {args.rounds} "
        "fresh servers, "
        f"{args.clients} clients, AOF {args.redis_aof}"
    )
    for col in ("lua", "µs per call (each run)", "median µs", "min µs", "median claims/s"):
        t.add_column(col, justify="right")
    medians = []
    for label, rows in runs:
        usec = [u for _, u in rows]
        medians.append(statistics.median(usec))
        t.add_row(
            label,
            ", ".join(f"{u:.1f}" for u in usec),
            f"{medians[-1]:.2f}",
            f"{min(usec):.2f}",
            f"{statistics.median(r for r, _ in rows):,.0f}",
        )
    Console().print(t)
    if len(medians) == 2:
        Console().print(f"after / before, server µs per claim: {medians[1] / medians[0]:.2f}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path, nargs="?", default=Path(lua.__file__).parent)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=50_000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seats", type=int, default=100_000)
    ap.add_argument("--redis-aof", choices=("no", "always"), default="no")
    ap.add_argument("--party", type=int, default=1, help="seats per claim (the best together)")
    args = ap.parse_args()
    assert args.requests * args.party < args.seats, "every claim must find its seats"
    report(asyncio.run(run([args.before, args.after], args)), args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
