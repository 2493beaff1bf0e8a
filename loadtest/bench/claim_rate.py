"""Measure the claim endpoint against a trivial endpoint on the same server, side by side.

    python -m loadtest.bench.claim_rate [--workers 1] [--seconds 5] [--connections 64]

Starts the stack (API with N uvicorn workers), creates an event with enough seats that claims
never run out, and drives both endpoints with wrk (a separate C process, so the load generator
does not compete with Python for the GIL). Each claim is a real one: a fresh hold id, and one
login per wrk connection, so every request also releases that login's previous hold (one
active checkout per login). Prints requests/s, latency percentiles and the ratio. Beside the
bare claim, the bare app runs the engine's own claim script (loadtest/bench/bare_app.py `POST
/bare-engine-claim`): the distance to the bare claim split into the script's share and the
share of the engine's Python.

`--api-tree DIR` runs the API from another checkout (`git worktree add DIR REV`): an earlier
commit measured with today's tools beside today's bare claim (docs/benchmarks-journal.md
section 38 measured every stop so). `--api-env VAR=VALUE` gives the API a variable: one piece
switched off (`ONSALE_ACCESS_LOG=0`, `ONSALE_EARLY_LANE=0`, ...)."""

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import orjson
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from loadtest.bench import bare_app
from loadtest.bench.cpu_meter import CpuMeter
from loadtest.bench.wrk_load import (
    CLAIM_PATH,
    JWT_LOGINS_PER_S,
    LOGINS_PER_S,
    claim_script,
    claim_scripts,
    demo_tokens,
    wrk,
)
from loadtest.burst.main import add_redis_aof
from loadtest.burst.report import durability
from loadtest.burst.targets import engine_redis
from loadtest.devstack.identity_provider import IdentityProvider
from loadtest.devstack.scratch import NO_LOGIN_LIMITS
from loadtest.devstack.services import pg_server_dsn
from loadtest.devstack.stack import LocalStack

PY_SPY = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")


def run_bare(
    redis_url: str,
    prefix: str,
    args: argparse.Namespace,
    scripts: tuple[str, str],
    engine: LocalStack,
) -> dict[str, dict[str, float]]:
    """The naive ceiling (loadtest/bench/bare_app.py), same uvicorn configuration, same run,
    its claim driven by the claim's own wrk requests (`scripts[0]`: a token each, which the bare
    endpoint does not read); then the bare app's Python around the engine's own claim script
    (`scripts[1]`, the same tokens to its route), on the engine's event "bench" with the engine
    API's environment: the script's share of the distance."""
    claim, engine_script = scripts
    env = {**engine.env(), "BARE_ENGINE_EVENT": "bench"}
    with bare_app.served(redis_url, prefix, args.seats, args.workers, env) as (url, pid):
        meter = CpuMeter({"api": lambda: [pid], "redis": lambda: [redis_pid(redis_url)]})
        return {
            "trivial": wrk(f"{url}/trivial", args.seconds, args.connections, meter=meter),
            "claim": wrk(url, args.seconds, args.connections, claim, meter),
            "engine_script": wrk(url, args.seconds, args.connections, engine_script, meter),
        }


def profiled(stack: LocalStack, args: argparse.Namespace, script: str) -> dict[str, float]:
    """Run the claim load while py-spy samples the (single) API process; print the frames
    that hold the most samples, inclusive and self, and keep the raw stacks in args.profile."""
    api = next(proc for name, proc, _out in stack.procs if name == "api")
    spy = subprocess.Popen(
        [
            PY_SPY,
            "record",
            "-p",
            str(api.pid),
            "-d",
            str(args.seconds),
            "-r",
            "500",
            "--format",
            "raw",
            "-o",
            args.profile,
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    result = wrk(stack.api_url, args.seconds, args.connections, script)
    spy.wait(args.seconds + 30)
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in Path(args.profile).read_text().splitlines():
        stack_text, _, count = line.rpartition(" ")
        n = int(count)
        frames = [re.sub(r"\((?:[^()]*/)?", "(", f) for f in stack_text.split(";")]
        total += n
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    t = Table(title=f"py-spy: {total:,} samples of the API process under claim load")
    for col in ("frame", "inclusive %", "self %"):
        t.add_column(col, justify="right" if col != "frame" else "left")
    for frame, n in inclusive.most_common(args.profile_top):
        t.add_row(frame[:90], f"{100 * n / total:.1f}", f"{100 * own[frame] / total:.1f}")
    Console().print(t)
    t = Table(title="py-spy: top self time")
    t.add_column("frame")
    t.add_column("self %", justify="right")
    for frame, n in own.most_common(args.profile_top):
        t.add_row(frame[:90], f"{100 * n / total:.1f}")
    Console().print(t)
    return result


def run_pg(args: argparse.Namespace) -> dict[str, float]:
    """The same sustained claims against the PostgreSQL-locking baseline (loadtest/pg_baseline),
    same uvicorn configuration and worker count, on a private database dropped afterwards."""
    import asyncio

    from loadtest.pg_baseline import server as pg_baseline
    from persistence import database as db

    server_dsn = pg_server_dsn()
    database = f"onsale_bench_pg_{uuid.uuid4().hex[:8]}"
    asyncio.run(db.create_database(server_dsn, database))
    try:
        dsn = db.dsn_for(server_dsn, database)
        asyncio.run(pg_baseline.setup(dsn, "bench", args.seats))
        server = pg_baseline.BaselineServer(
            pg_dsn=dsn, workers=args.workers, log_dir=Path(tempfile.mkdtemp())
        )
        server.start()
        try:
            script = claim_script(demo_tokens(server.token_secret, logins(args)))
            return wrk(server.url, args.seconds, args.connections, script)
        finally:
            server.stop()
    finally:
        asyncio.run(db.drop_database(server_dsn, database))


def limits_env(args: argparse.Namespace) -> dict[str, str]:
    """The per-login limits at their production defaults when every claim is a new login's
    (they refuse none and the claim script runs them); off when each connection is one login
    claiming without pause, which they would answer 429 after its burst."""
    return dict(NO_LOGIN_LIMITS) if args.logins == "per-connection" else {}


def logins(args: argparse.Namespace) -> int:
    if args.logins == "per-connection":
        return int(args.connections)
    return (JWT_LOGINS_PER_S if args.tokens == "jwt" else LOGINS_PER_S) * int(args.seconds)


def jwt_tokens(provider: IdentityProvider, logins: int) -> list[str]:
    """An RS256 token of `provider` for each of `logins` logins (about 0.3 ms each)."""
    with Progress() as progress:
        task = progress.add_task("signing RS256 tokens", total=logins)
        tokens = []
        for i in range(logins):
            tokens.append(provider.token(f"u{i}", exp=int(time.time()) + 3_600))
            if i % 500 == 0:
                progress.update(task, completed=i)
        progress.update(task, completed=logins)
    return tokens


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--seats", type=int, default=200_000)
    ap.add_argument("--json", default="")
    ap.add_argument("--pg", action="store_true", help="also the PostgreSQL-locking baseline")
    ap.add_argument(
        "--logins",
        choices=("per-claim", "per-connection"),
        default="per-claim",
        help="per-claim: every claim is a new login's (one hold per buyer, every claim writes "
        "one hold); per-connection: one login per wrk connection, so each claim also releases "
        "that login's previous hold",
    )
    add_redis_aof(ap)
    ap.add_argument(
        "--api-tree", type=Path, default=None,
        help="run the API from this checkout (e.g. `git worktree add DIR REV`): an earlier "
        "commit measured beside today's bare claim, with today's tools",
    )  # fmt: skip
    ap.add_argument(
        "--api-env", type=lambda kv: tuple(kv.split("=", 1)), action="append", default=[],
        metavar="VAR=VALUE", help="a variable for the API (repeatable): one piece switched off",
    )  # fmt: skip
    ap.add_argument(
        "--tokens", choices=("demo", "jwt"), default="demo",
        help="demo: the name-only login's tokens (itsdangerous); jwt: RS256 JWTs of a local "
        "identity provider, checked as in production (a new login's first check, about 60 µs)",
    )  # fmt: skip
    ap.add_argument("--profile", default="", help="py-spy raw stacks file (needs --workers 1)")
    ap.add_argument("--profile-top", type=int, default=30)
    args = ap.parse_args()
    if args.profile and (args.workers != 1 or not Path(PY_SPY).exists()):
        print("--profile needs --workers 1 and py-spy on PATH", file=sys.stderr)
        return 2
    if args.pg and args.tokens == "jwt":
        print("--pg needs demo tokens: the baseline checks no JWT", file=sys.stderr)
        return 2
    if shutil.which("wrk") is None:
        print("wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 2
    with engine_redis(args) as redis_url:
        rows = measure(args, redis_url)
    print_report(args, rows)
    if args.json:
        out = {"workers": args.workers, "rows": rows, "durability": durability(args)}
        Path(args.json).write_bytes(
            orjson.dumps(out | {"logins": args.logins, "tokens": args.tokens})
        )
    return 0


Rows = dict[str, dict[str, float]]  # endpoint -> wrk's numbers (rps, p50, p99, non2xx)


def redis_pid(url: str) -> int:
    """The pid of the Redis server at `url` (on this machine: its CPU is measured)."""
    import redis

    with redis.Redis.from_url(url) as r:
        return int(r.info("server")["process_id"])


def measure(args: argparse.Namespace, redis_url: str) -> Rows:
    """Every endpoint, one after the other on a fresh stack: /healthz, the claim, the claim with
    auto-pipelining off, the bare app's two endpoints and, with --pg, the PostgreSQL baseline.
    The stack's keys are deleted afterwards."""
    prefix = f"onsale:bench:{uuid.uuid4().hex[:8]}"
    # --tokens jwt: the API checks RS256 JWTs of a local provider, as in production (ADR 0019).
    provider = IdentityProvider() if args.tokens == "jwt" else None
    stack = LocalStack(
        redis_url=redis_url,
        key_prefix=prefix,
        log_dir=Path(tempfile.mkdtemp()),
        api_workers=args.workers,
        extra_env={
            **limits_env(args), **(provider.api_env() if provider else {}), **dict(args.api_env),
        },
        api_tree=args.api_tree,
    )  # fmt: skip
    stack.start()
    try:
        stack.create_event("bench", args.seats, hold_ttl_ms=600_000)
        tokens = (
            jwt_tokens(provider, logins(args))
            if provider
            else demo_tokens(stack.token_secret, logins(args))
        )
        script, engine_script = claim_scripts(tokens, CLAIM_PATH, "/bare-engine-claim")
        meter = CpuMeter(
            {"api": lambda: [stack.pid("api")], "redis": lambda: [redis_pid(redis_url)]}
        )
        rows = {"healthz": wrk(f"{stack.api_url}/healthz", args.seconds, args.connections)}
        if args.profile:
            rows["claim"] = profiled(stack, args, script)
        else:
            rows["claim"] = wrk(stack.api_url, args.seconds, args.connections, script, meter)
        # The same API with auto-pipelining off: each script call is its own round trip.
        stack.kill_api()
        stack.extra_env["ONSALE_REDIS_AUTOPIPELINE"] = "0"
        stack.start_api()
        rows["claim_no_autopipeline"] = wrk(
            stack.api_url, args.seconds, args.connections, script, meter
        )
        bare = run_bare(redis_url, prefix, args, (script, engine_script), stack)
        rows |= {
            "bare_trivial": bare["trivial"],
            "bare_claim": bare["claim"],
            "bare_engine_script": bare["engine_script"],
        }
        if args.pg:
            rows["pg_claim"] = run_pg(args)
    finally:
        stack.stop()
        if provider is not None:
            provider.close()
        import redis

        r = redis.Redis.from_url(redis_url)
        for key in r.scan_iter(match=f"{prefix}:*"):
            r.delete(key)
    return rows


ROW_NAMES = {
    "healthz": "GET /healthz (API)",
    "claim": "POST claim (API)",
    "claim_no_autopipeline": "POST claim (API, auto-pipelining off)",
    "bare_trivial": "GET /trivial (bare app)",
    "bare_claim": "POST bare JSON+EVALSHA claim",
    "bare_engine_script": "POST bare JSON + the engine's claim script",
    "pg_claim": "POST claim (PostgreSQL baseline)",
}


def durability_pg() -> str:
    return "PostgreSQL synchronous_commit=on"


def print_report(args: argparse.Namespace, rows: Rows) -> None:
    t = Table(
        title=f"claim vs trivial endpoint, {args.workers} uvicorn worker(s), "
        f"{args.connections} connections, {args.seconds}s each (wrk); logins {args.logins}, "
        f"{args.tokens} tokens; "
        f"engine: {durability(args)}, baseline: {durability_pg()}"
    )
    for col in ("endpoint", "req/s", "p50 ms", "p99 ms", "non-2xx"):
        t.add_column(col, justify="right")
    for key, m in rows.items():
        t.add_row(
            ROW_NAMES[key],
            f"{m['rps']:,.0f}",
            f"{m['p50']:.2f}",
            f"{m['p99']:.2f}",
            f"{m['non2xx']:.0f}",
        )
    Console().print(t)
    print_cpu(rows)
    claim, pg = rows["claim"]["rps"], rows.get("pg_claim")
    engine_script = rows["bare_engine_script"]["rps"]
    Console().print(
        f"claim / trivial = {claim / rows['healthz']['rps']:.2f}; "
        f"claim / bare JSON+EVALSHA = {claim / rows['bare_claim']['rps']:.2f}; "
        f"bare + the engine's script / bare = {engine_script / rows['bare_claim']['rps']:.2f} "
        f"(the script's share); claim / bare + the engine's script = "
        f"{claim / engine_script:.2f} (the engine's Python's share); "
        f"auto-pipelining on / off = {claim / rows['claim_no_autopipeline']['rps']:.2f}; "
        f"bare claim / bare trivial = "
        f"{rows['bare_claim']['rps'] / rows['bare_trivial']['rps']:.2f}"
        + (f"; claim / PostgreSQL baseline = {claim / pg['rps']:.2f}" if pg else "")
    )


def print_cpu(rows: Rows) -> None:
    """Where each request's CPU went: the API processes, Redis, the load generator (wrk) and
    all three (the machine's share; the kernel's network work is in each process's system
    time)."""
    t = Table(title="CPU µs per request, by process, during each endpoint's run")
    for col in ("endpoint", "API", "Redis", "wrk", "machine"):
        t.add_column(col, justify="right")
    for key, m in rows.items():
        if "api_us" in m:
            us = (m["api_us"], m["redis_us"], m["load_us"])
            t.add_row(ROW_NAMES[key], *(f"{v:,.0f}" for v in us), f"{sum(us):,.0f}")
    Console().print(t)


if __name__ == "__main__":
    raise SystemExit(main())
