"""`make bench-guard`: a fixed workload on the claim path, held against figures checked into the
repository, so the path's cost never drifts unseen again. Run it before and after every change
that touches the claim path, and quote its figures.

    python -m loadtest.bench.guard [--claims 20000] [--rounds 3] [--record]

A private Redis at `appendfsync always`; the API app in this process, driven straight through ASGI
(no socket, no HTTP client: the HTTP server's parsing is not in the figure); one event of `claims` +
500 seats; every claim a new login's (tokens minted before the clock starts), one after the other,
on each of `rounds` fresh servers (medians), the per-login rate limit and cap at their production
defaults (they refuse none of these claims, and the claim script runs them). The bare
JSON+EVALSHA claim (loadtest/bench/bare_app.py) is driven the same way on the same server, in
turns of 1,000 claims with it, so that both see the same minutes of the machine. Four
figures: this process's CPU time per claim (the API code and the redis client, the access log
written to stderr included) and Redis's own time per claim call (INFO commandstats, `fcall`), and
the same two of the bare claim (`evalsha`); and what the guard holds, their ratios: the claim's
API CPU and Redis time against the bare claim's of the same run. It fails (exit 1) when a ratio
is more than 15% above the one in loadtest/bench/bench_guard.json (the absolute figures move with
the hour of the machine: they are printed, not held); `--record` writes today's figures there
instead. A benchmark, not a test: CI does not run it."""

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from itsdangerous import URLSafeTimedSerializer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from api.app import create_app
from api.settings import ApiSettings
from engine.config.settings import Settings
from engine.model.event_config import EventConfig
from engine.model.holds import SeatSpec
from engine.store import Store
from loadtest.bench import bare_app
from loadtest.bench.persistence_cost import private_server
from loadtest.devstack.scratch import api_env

FIGURES = Path(__file__).with_name("bench_guard.json")
TOLERANCE = 1.15
# What fails the guard: the claim against the bare claim of the same run. The absolute figures
# are printed beside them; they move with the hour of the machine (journal section 40).
HELD = ("api_cpu_vs_bare", "redis_vs_bare")
WARMUP = 300
TURN = 1_000  # claims of one app before the other's turn
CLAIM_PATH = "/v1/events/guard/holds"
BARE_PREFIX = "guard:bare"
DURABLE = ["--appendonly", "yes", "--appendfsync", "always"]


async def create_event(env: dict[str, str], seats: int) -> None:
    client = Settings.from_env(env).redis_client()
    store = Store(client)
    await store.create_event(
        "guard",
        [SeatSpec(f"s{i}", i, "A") for i in range(seats)],
        EventConfig(hold_ttl_ms=600_000, quarantine_ms=600_000),
    )
    await store.open_sale("guard")
    await client.aclose()


class Lifespan:
    """The ASGI lifespan of `app`, run by hand (startup before the workload, shutdown after)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.events: asyncio.Queue[dict[str, str]] = asyncio.Queue()
        self.replies: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def __aenter__(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}}
        self.task = asyncio.create_task(self.app(scope, self.events.get, self.replies.put))
        await self.events.put({"type": "lifespan.startup"})
        reply = await self.replies.get()
        assert reply["type"] == "lifespan.startup.complete", reply

    async def __aexit__(self, *exc: object) -> None:
        await self.events.put({"type": "lifespan.shutdown"})
        await self.replies.get()
        await self.task


async def post(app: Any, path: str, authorization: bytes, method: str = "POST") -> int:
    """One request with an empty body (a POST by default), straight into the ASGI app: no
    socket, no HTTP client."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "client": ("127.0.0.1", 40000), "server": ("guard", 80),
        "headers": [(b"host", b"guard"), (b"authorization", authorization),
                    (b"content-length", b"0")],
    }  # fmt: skip
    status = 0

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


@dataclass
class Side:
    """One of the two apps the guard drives: its claims' path, their Authorization headers, the
    script command its claims run (INFO commandstats), and the CPU its turns took."""

    app: Any
    path: str
    auths: list[bytes]
    command: str
    cpu_s: float = 0.0


async def drive(sides: list[Side], server: redis.Redis) -> list[tuple[float, float]]:
    """Both apps' lifespans around WARMUP claims each, then the rest in turns of TURN claims,
    one app then the other, so that both halves of a ratio see the same minutes of the machine
    (run one after the other, an uneven hour moved their ratio by up to 80%: journal section 50).
    Per side: this process's CPU µs per claim of its turns, and Redis's µs per call of its
    command."""
    claims = len(sides[0].auths) - WARMUP
    async with contextlib.AsyncExitStack() as stack:
        for side in sides:
            await stack.enter_async_context(Lifespan(side.app))
            for auth in side.auths[:WARMUP]:  # scripts loaded, pools filled, caches warm
                assert await post(side.app, side.path, auth) == 201
        server.config_resetstat()
        with Progress(transient=True) as progress:
            task = progress.add_task(f"{claims:,} claims each, in turns", total=claims * 2)
            for start in range(WARMUP, WARMUP + claims, TURN):
                for side in sides:
                    turn = side.auths[start : start + TURN]
                    began = time.process_time()
                    for auth in turn:
                        assert await post(side.app, side.path, auth) == 201
                    side.cpu_s += time.process_time() - began
                    progress.advance(task, len(turn))
    stats = server.info("commandstats")
    return [
        (
            round(side.cpu_s * 1e6 / claims, 1),
            round(float(stats.get(f"cmdstat_{side.command}", {}).get("usec_per_call", 0.0)), 2),
        )
        for side in sides
    ]


def workload_env(redis_url: str) -> dict[str, str]:
    """The guard's API: the per-login limits at their production defaults (every claim is a new
    login's: they refuse none, and the claim script runs them as in production)."""
    return api_env(redis_url, limits=True)


async def workload(env: dict[str, str], claims: int, port: int) -> dict[str, float]:
    """The claim, and the bare JSON+EVALSHA claim (loadtest/bench/bare_app.py) on the same
    server in turns with it: the reference its figures are held against, so that a slower hour
    of the machine moves both and not their ratio."""
    await create_event(env, claims + WARMUP + 200)
    signer = URLSafeTimedSerializer(env["ONSALE_TOKEN_SECRET"], salt="onsale-login")
    tokens = [f"Bearer {signer.dumps({'l': f'g{i}'})}".encode() for i in range(claims + WARMUP)]
    os.environ |= {"ONSALE_REDIS_URL": env["ONSALE_REDIS_URL"], "BARE_PREFIX": BARE_PREFIX}
    free, _owners = bare_app.keys_of(BARE_PREFIX)
    with redis.Redis(port=port) as server:
        for mapping in bare_app.free_seats(claims + WARMUP):
            server.zadd(free, mapping)
        claim = Side(create_app(ApiSettings.from_env(env)), CLAIM_PATH, tokens, "fcall")
        no_token = [b"-"] * len(tokens)  # the bare claim reads none
        bare = Side(bare_app.create_app(), "/bare-claim", no_token, "evalsha")
        (api_us, redis_us), (bare_api_us, bare_redis_us) = await drive([claim, bare], server)
    return {
        "api_cpu_us_per_claim": api_us,
        "redis_us_per_claim_call": redis_us,
        "bare_api_cpu_us_per_claim": bare_api_us,
        "bare_redis_us_per_call": bare_redis_us,
    }


def ratios(now: dict[str, float]) -> dict[str, float]:
    """What the guard holds: the claim's figures against the bare claim's of the same run."""
    return {
        "api_cpu_vs_bare": round(now["api_cpu_us_per_claim"] / now["bare_api_cpu_us_per_claim"], 3),
        "redis_vs_bare": round(now["redis_us_per_claim_call"] / now["bare_redis_us_per_call"], 3),
    }


def measure(claims: int, rounds: int) -> dict[str, float]:
    """Each figure's median over `rounds` fresh servers (a run's Redis time alone moves by up
    to a fifth from one fresh server to the next)."""
    runs = [measure_once(claims) for _ in range(rounds)]
    return {name: round(statistics.median(r[name] for r in runs), 2) for name in runs[0]}


def measure_once(claims: int) -> dict[str, float]:
    """The access log (a line per claim, part of its cost) goes to fd 2, buffered and flushed
    until the process exits: fd 2 is /dev/null from here on, so the table stays readable; a
    failure is printed on stdout."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    try:
        with private_server(DURABLE) as port:
            url = f"redis://127.0.0.1:{port}/0"
            return asyncio.run(workload(workload_env(url), claims, port))
    except Exception:
        Console().print_exception()
        raise


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claims", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3, help="fresh servers; medians are held")
    ap.add_argument("--record", action="store_true", help="write today's figures as the guard")
    ap.add_argument("--figures", type=Path, default=FIGURES, help="the guard's figures (JSON)")
    args = ap.parse_args()
    now = measure(args.claims, args.rounds)
    now |= ratios(now)
    console = Console()
    if args.record:
        args.figures.write_text(json.dumps({**now, "claims": args.claims}, indent=2) + "\n")
        console.print(f"recorded in {args.figures.name}: {now}")
        return 0
    guard = json.loads(args.figures.read_text())
    table = Table(title=f"bench guard: {args.claims:,} claims, Redis at appendfsync always")
    for col in ("figure", "guard", "now", "now / guard", ""):
        table.add_column(col, justify="left" if col == "figure" else "right")
    failed = False
    for name, value in now.items():
        held = name in HELD
        ratio = value / guard[name] if guard.get(name) else 1.0
        over = held and ratio > TOLERANCE
        failed |= over
        verdict = ("[red]over 15%[/]" if over else "ok") if held else "(this machine, now)"
        table.add_row(name, str(guard.get(name, "")), str(value), f"{ratio:.2f}", verdict)
    console.print(table)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
