"""What Redis persistence costs the claim script, measured side by side in one run.

    python -m loadtest.bench.persistence_cost [--requests 100000] [--clients 50] [--seats 300000]

Starts three private Redis servers on spare ports (no persistence; AOF appendfsync everysec;
AOF appendfsync always), creates the same event on each, and drives them with redis-benchmark
(a C client, so the client is not the bottleneck): plain SET, and FCALL of hold_claim with a
random hold id and login per call (every call claims a seat: a write). Prints ops/s and the
ratio of the claim script to SET on each server, then where the claim's server time goes: a
function of the library that only binds its keys, one that also reads the clock and the event
config, and the full claim, with Redis's own per-call time (INFO commandstats) for each; and,
for comparison, the whole library's definitions run at every call as an EVALSHA script did."""

import argparse
import asyncio
import contextlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import redis.asyncio as aioredis
from rich.console import Console
from rich.table import Table

import lua
from engine.model import keys
from engine.model.event_config import EventConfig
from engine.model.holds import SeatSpec
from engine.store import Store
from loadtest.devstack.stack import spare_port

MODES = {
    "no persistence": ["--appendonly", "no"],
    "AOF everysec": ["--appendonly", "yes", "--appendfsync", "everysec"],
    "AOF always": ["--appendonly", "yes", "--appendfsync", "always"],
}

# The API's default per-login limits (api/settings.py Limits) and idempotency window (the trim
# retention): the claim pays for them.
CLAIM_LIMITS = ("2", "10", "6", "600000")


def bench(port: int, requests: int, clients: int, *command: str) -> float:
    out = subprocess.run(
        [
            "redis-benchmark",
            "-p",
            str(port),
            "-n",
            str(requests),
            "-c",
            str(clients),
            "-r",
            "100000000",
            "-q",
            *command,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    m = re.findall(r"([\d.]+) requests per second", out)
    assert m, out
    return float(m[-1])


async def make_event(client: aioredis.Redis, seats: int) -> Store:
    """The event "bench" of `seats` seats, open, with this checkout's library loaded."""
    store = Store(client)
    await store.scripts.load_all()
    await store.create_event(
        "bench",
        (SeatSpec(f"s{i}", i) for i in range(seats)),
        EventConfig(hold_ttl_ms=3_600_000, quarantine_ms=60_000),
    )
    await store.open_sale("bench")
    return store


async def prepare(port: int, seats: int) -> tuple[str, list[str]]:
    client = aioredis.Redis(port=port, decode_responses=True)
    function = (await make_event(client, seats)).scripts.function("hold_claim")
    await client.aclose()
    return function, keys.script_keys("bench")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seats", type=int, default=300_000)
    args = ap.parse_args()
    if shutil.which("redis-benchmark") is None or shutil.which("redis-server") is None:
        print("needs redis-server and redis-benchmark", file=sys.stderr)
        return 2
    assert args.requests < args.seats, "every claim must find a free seat"
    rows = []
    anatomy: list[tuple[str, float, float]] = []
    for mode, flags in MODES.items():
        with private_server(flags) as port:
            function, event_keys = asyncio.run(prepare(port, args.seats))
            set_rate = bench(port, args.requests, args.clients, "SET", "k:__rand_int__", "v")
            claim = ["FCALL", function, str(len(event_keys)), *event_keys]
            claim_rate = bench(
                port,
                args.requests,
                args.clients,
                *claim,
                "h__rand_int__",
                "u__rand_int__",
                "",
                *CLAIM_LIMITS,
            )
            rows.append((mode, set_rate, claim_rate))
            if not anatomy:
                anatomy = asyncio.run(claim_anatomy(port, args, function, event_keys))
    print_report(args, rows, anatomy)
    return 0


@contextlib.contextmanager
def private_server(flags: list[str]) -> Iterator[int]:
    """A redis-server of our own on a spare port, with these persistence flags; its port. Stopped
    and its directory removed after."""
    workdir = Path(tempfile.mkdtemp(prefix="onsale-aof-"))
    port = spare_port()
    proc = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            str(workdir),
            *flags,
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.3)
        yield port
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


def print_report(
    args: argparse.Namespace,
    rows: list[tuple[str, float, float]],
    anatomy: list[tuple[str, float, float]],
) -> None:
    t = Table(
        title=f"claim script vs SET, {args.requests:,} requests, {args.clients} clients "
        "(redis-benchmark)"
    )
    for col in (
        "Redis persistence",
        "SET ops/s",
        "claim ops/s",
        "claim / SET",
        "claim vs no persistence",
    ):
        t.add_column(col, justify="right")
    base = rows[0][2]
    for mode, s, c in rows:
        t.add_row(mode, f"{s:,.0f}", f"{c:,.0f}", f"{c / s:.2f}", f"{c / base:.2f}")
    Console().print(t)
    t = Table(title="Where the claim's server time goes (no persistence, same clients)")
    for col in ("script", "ops/s", "server µs per call"):
        t.add_column(col, justify="right")
    for name, rate, usec in anatomy:
        t.add_row(name, f"{rate:,.0f}", f"{usec:.2f}")
    Console().print(t)


async def claim_anatomy(
    port: int, args: argparse.Namespace, claim_function: str, event_keys: list[str]
) -> list[tuple[str, float, float]]:
    """The claim against cut-down versions of itself, each timed by redis-benchmark and by
    Redis's own accounting (INFO commandstats, reset per row on this private server): SET, a
    library function that binds its keys and returns, one that also reads the clock and the
    event config, the full claim; and the library's definitions run at every call, as each
    EVALSHA script ran them before the library (ADR 0032)."""
    variants = {"keys": "return 1", "config": "local ctx = context()\nreturn 1"}
    name, text = lua.library(bodies=variants, prefix="anatomy")
    tag = name.removeprefix("anatomy_")
    prelude = "\n".join(lua.preludes())
    client = aioredis.Redis(port=port, decode_responses=True)
    out: list[tuple[str, float, float]] = []
    try:
        await client.function_load(text, replace=True)
        sha = await client.script_load(prelude + "\nbind_keys(KEYS)\nreturn 1")
        head = [str(len(event_keys)), *event_keys]
        rows: list[tuple[str, list[str]]] = [
            ("SET", ["SET", "k:__rand_int__", "v"]),
            ("function: bind the keys, return", ["FCALL", f"keys_{tag}", *head, "x"]),
            ("function: + clock and event config", ["FCALL", f"config_{tag}", *head, "x"]),
            ("EVALSHA: every definition, return", ["EVALSHA", sha, *head, "x"]),
            (
                "hold_claim (full)",
                ["FCALL", claim_function, *head, "h__rand_int__", "u__rand_int__", "",
                 *CLAIM_LIMITS],
            ),
        ]  # fmt: skip
        for label, command in rows:
            await client.config_resetstat()
            rate = bench(port, args.requests, args.clients, *command)
            stats = await client.info("commandstats")
            usec = stats[f"cmdstat_{command[0].lower()}"]["usec_per_call"]
            out.append((label, rate, float(usec)))
    finally:
        await client.aclose()
    return out


if __name__ == "__main__":
    raise SystemExit(main())
