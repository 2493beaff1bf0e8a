"""Where the claim script's server time goes: hold_claim with one part removed at a time, beside
the bare two-command claim script, each on a fresh Redis, in one run.

    python -m loadtest.bench.script_parts [--rounds 3] [--requests 30000] [--redis-aof always|no]

Each variant is a copy of this checkout's lua/ with one part's text replaced (PARTS); what the
part costs is the whole script's time less the variant's. Each run: a fresh private
redis-server, an event of 100,000 seats, FCALLs of hold_claim pipelined 50 at a time, each with
a hold id and a login of its own, the API's default limits; the bare reference is the same
harness on loadtest/bench/bare_app.py's two-command script (EVALSHA: ZPOPMIN, HSET). Variants
run in turn, round after round, so a noisy minute costs each the same.

A removed part may make the claim wrong (no rate limit, no deadline): the variants are
measurements, never code. The seat itself (ZPOPMIN and its owner's HSET) is the bare script's
too and is not removed. tests/unit/test_script_parts.py fails by a part's name when the script
no longer has its text."""

import argparse
import asyncio
import shutil
import statistics
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import redis.asyncio as aioredis
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

import lua
from engine.model import keys
from loadtest.bench.bare_app import MINIMAL_CLAIM, free_seats, keys_of
from loadtest.bench.claim_ab import library_of
from loadtest.bench.persistence_cost import CLAIM_LIMITS, MODES, make_event, private_server

LUA = Path(lua.__file__).parent
WARMUP = 500
COMMANDS = ("cmdstat_fcall", "cmdstat_evalsha")
Load = Callable[[aioredis.Redis], Awaitable[Callable[[int], list[str]]]]


@dataclass(frozen=True)
class Part:
    name: str
    file: str  # in lua/
    old: str  # text found exactly once in it
    new: str


PARTS = (
    Part("everything after binding the keys", "hold_claim.lua",
         "local hold_id, login, want = ARGV[1], ARGV[2], ARGV[3]\n",
         "do return { 'OK' } end\nlocal hold_id, login, want = ARGV[1], ARGV[2], ARGV[3]\n"),
    Part("the server clock (TIME)", "_clock_server.lua",
         "  local t = redis.call('TIME')\n", "  local t = { '1900000000', '0' }\n"),
    Part("the login's rate token (HGET, HSET)", "_lib.lua",
         "  if per_s <= 0 then return 0 end\n", "  do return 0 end\n"),
    Part("the replay lookup (HMGET of two windows)", "hold_claim.lua",
         "  existing = get_hold_either(hold_id, string.format('%s:%.0f', base, window - 1))\n",
         "  existing = nil\n"),
    Part("the login's previous hold (HGET)", "hold_claim.lua",
         "local prev_id = redis.call('HGET', K_LOGINS, login)\n", "local prev_id = nil\n"),
    Part("the cap: units bought (HGET)", "hold_claim.lua",
         "if cap > 0 and tonumber(", "if false and tonumber("),
    Part("the seat counters (2 HINCRBY)", "_lib.lua",
         "  n = n or 1\n", "  do return end\n"),
    Part("the hold record (JSON, HSET)", "_lib.lua",
         "  redis.call('HSET', K_HOLDS, h.id, cjson.encode(h))\n", ""),
    Part("the login's active hold (HSET)", "hold_claim.lua",
         "redis.call('HSET', K_LOGINS, login, hold_id)\n", ""),
    Part("the deadline (ZADD)", "hold_claim.lua",
         "redis.call('ZADD', K_DEADLINES, h.expires_ms, hold_id)\n", ""),
)  # fmt: skip
WHOLE, BARE = "the claim script (hold_claim)", "bare claim script (ZPOPMIN, HSET)"


def variant_tree(part: Part, root: Path) -> Path:
    """A copy of lua/ under `root` with `part` removed."""
    tree = root / part.file.removesuffix(".lua").strip("_") / part.name.split(" (")[0]
    shutil.copytree(LUA, tree, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    path = tree / part.file
    text = path.read_text(encoding="utf-8")
    assert text.count(part.old) == 1, part.name
    path.write_text(text.replace(part.old, part.new), encoding="utf-8")
    return tree


BATCH = 50  # calls in flight at once, as redis-benchmark's 50 clients


async def calls_run(args: argparse.Namespace, load: Load) -> float:
    """Server µs per call (INFO commandstats) of the calls `load` prepares on a fresh server:
    `args.requests` of them after a warm-up, pipelined BATCH at a time, each with its own id
    (no two calls share a login: every claim takes a new seat for a new login)."""
    flags = MODES["AOF always" if args.redis_aof == "always" else "no persistence"]
    with private_server(flags) as port:
        client = aioredis.Redis(port=port, decode_responses=True)
        try:
            call = await load(client)
            for start in range(-WARMUP, args.requests, BATCH):
                if start == 0:
                    await client.config_resetstat()
                pipe = client.pipeline(transaction=False)
                for i in range(start, min(start + BATCH, args.requests)):
                    pipe.execute_command(*call(i))
                await pipe.execute()
            stats = await client.info("commandstats")
            return float(next(s for k, s in stats.items() if k in COMMANDS)["usec_per_call"])
        finally:
            await client.aclose()


def claim_of(tree: Path, args: argparse.Namespace) -> Load:
    """hold_claim of `tree`'s library, on an event of `args.seats` seats made by this checkout."""

    async def load(client: aioredis.Redis) -> Callable[[int], list[str]]:
        await make_event(client, args.seats)
        name, text = library_of(tree)
        await client.function_flush()  # the same function names when `tree` is this lua/
        await client.function_load(text)
        function = f"hold_claim_{name.removeprefix('ab_')}"
        event_keys = keys.script_keys("bench")
        head = ["FCALL", function, str(len(event_keys)), *event_keys]
        return lambda i: [*head, f"h{i}", f"u{i}", "", *CLAIM_LIMITS]

    return load


def bare_of(args: argparse.Namespace) -> Load:
    """The bare claim script, its free seats as many as the event's."""

    async def load(client: aioredis.Redis) -> Callable[[int], list[str]]:
        free, owners = keys_of("bench")
        for mapping in free_seats(args.seats):
            await client.zadd(free, mapping)
        sha = await client.script_load(MINIMAL_CLAIM)
        return lambda i: ["EVALSHA", sha, "2", free, owners, f"h{i}"]

    return load


async def run(args: argparse.Namespace, root: Path) -> dict[str, list[float]]:
    trees = {WHOLE: LUA} | {p.name: variant_tree(p, root) for p in PARTS}
    usec: dict[str, list[float]] = {name: [] for name in [*trees, BARE]}
    with Progress() as progress:
        task = progress.add_task("script runs", total=args.rounds * len(usec))
        for _ in range(args.rounds):
            for name, tree in trees.items():
                usec[name].append(await calls_run(args, claim_of(tree, args)))
                progress.advance(task)
            usec[BARE].append(await calls_run(args, bare_of(args)))
            progress.advance(task)
    return usec


def report(usec: dict[str, list[float]], args: argparse.Namespace) -> None:
    whole = statistics.median(usec[WHOLE])
    bare = statistics.median(usec[BARE])
    t = Table(
        title=f"hold_claim's server µs per call, one part removed at a time: {args.requests:,} "
        f"claims x {args.rounds} fresh servers, AOF {args.redis_aof}"
    )
    for col in ("script", "median µs", "saved µs", "share", "runs"):
        t.add_column(col, justify="left" if col == "script" else "right")
    for name, runs in usec.items():
        med = statistics.median(runs)
        part = name not in (WHOLE, BARE)
        t.add_row(
            ("  without " if part else "") + name,
            f"{med:.2f}",
            f"{whole - med:.2f}" if part else "",
            f"{(whole - med) / whole:.0%}" if part else "",
            ", ".join(f"{u:.1f}" for u in runs),
        )
    Console().print(t)
    Console().print(f"the claim script against the bare claim script: {whole / bare:.2f}x")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=30_000)
    ap.add_argument("--seats", type=int, default=100_000)
    ap.add_argument("--redis-aof", choices=("no", "always"), default="always")
    args = ap.parse_args()
    assert args.requests + WARMUP < args.seats, "every claim must find its seat"
    with tempfile.TemporaryDirectory(prefix="script-parts-") as root:
        report(asyncio.run(run(args, Path(root))), args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
