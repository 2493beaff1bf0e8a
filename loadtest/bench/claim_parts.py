"""Where a claim's CPU goes in the API process: the claim with one piece removed at a time, beside
the bare JSON+EVALSHA claim and a trivial request, in one run.

    python -m loadtest.bench.claim_parts [--claims 10000] [--rounds 3]

Each variant is `make bench-guard`'s workload (loadtest/bench/guard.py: the API app driven
straight through ASGI in this process, one new login per claim, one after the other, a fresh
private Redis at `appendfsync always` per run), with one piece of the claim path switched off by
its setting or replaced by a no-op; the references are loadtest/bench/bare_app.py's `POST
/bare-claim` (a JSON body parsed, one EVALSHA of a two-command claim) and its `GET /trivial`,
driven the same way. The variants run in turn, round after round, so a noisy minute costs each
the same. Printed: the median of each variant's API CPU per request and what removing its piece
saved against the whole claim, and Redis's own time per script call (INFO commandstats).

What it cannot see: the HTTP server's parsing and the early lane (no socket here: the same for
every variant, measured by `loadtest.bench.claim_rate`), and the script's own parts (Redis's column
says the script's cost as a whole; `loadtest.bench.claim_ab` compares two versions of lua/)."""

import argparse
import asyncio
import functools
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis
import redis.asyncio as aioredis
from itsdangerous import URLSafeTimedSerializer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from api.app import create_app
from api.settings import ApiSettings
from loadtest.bench.bare_app import MINIMAL_CLAIM, free_seats, keys_of
from loadtest.bench.bare_app import create_app as create_bare_app
from loadtest.bench.guard import DURABLE, WARMUP, Lifespan, create_event, post
from loadtest.bench.persistence_cost import private_server
from loadtest.devstack.scratch import api_env

Patch = Callable[[Any], None]  # given the API's context, switches one piece off


def _no_metrics(ctx: Any) -> None:
    ctx.metrics.observe = lambda route, status, seconds: None
    ctx.metrics.claimed = lambda result: None


def _no_prices(ctx: Any) -> None:
    async def zeros(event_id: str, seat_ids: list[str]) -> list[int]:
        return [0] * len(seat_ids)

    ctx.store.prices.prices = zeros


def _no_token_check(ctx: Any) -> None:
    """The login read from the bearer token's payload without verifying its signature."""
    signer = URLSafeTimedSerializer("unused", salt="onsale-login")

    def login_of(request: Any, event_id: str | None = None) -> str:
        token = request.headers["authorization"].removeprefix("Bearer ")
        return str(signer.loads_unsafe(token)[1]["l"])

    ctx.login_of = login_of


@dataclass(frozen=True)
class Variant:
    name: str
    env: dict[str, str] = field(default_factory=dict)
    patch: Patch | None = None
    bare: str = ""  # a loadtest/bench/bare_app.py route instead of the claim
    direct: bool = False  # the call without the HTTP app (GatedClaims.claim, or the EVALSHA)


VARIANTS = (
    Variant("the claim (production defaults)"),
    Variant("  without the access log line", {"ONSALE_ACCESS_LOG": "0"}),
    Variant("  without the sold-out gate", {"ONSALE_SOLD_OUT_MEMORY": "0"}),
    Variant("  without request metrics", patch=_no_metrics),
    Variant("  without the token's signature check", patch=_no_token_check),
    Variant("  without the seats' prices in the answer", patch=_no_prices),
    Variant("  without auto-pipelining", {"ONSALE_REDIS_AUTOPIPELINE": "0"}),
    Variant("the claim's engine call alone, no HTTP app", direct=True),
    Variant("bare JSON+EVALSHA claim", bare="POST /bare-claim"),
    Variant("bare EVALSHA alone, no HTTP app", bare="POST /bare-claim", direct=True),
    Variant("trivial request", bare="GET /trivial"),
)


async def _engine(v: Variant, claims: int, port: int) -> float:
    env = api_env(f"redis://127.0.0.1:{port}/0", limits=True, **v.env)  # a new login a claim
    await create_event(env, claims + WARMUP + 200)
    signer = URLSafeTimedSerializer(env["ONSALE_TOKEN_SECRET"], salt="onsale-login")
    tokens = [f"Bearer {signer.dumps({'l': f'g{i}'})}".encode() for i in range(claims + WARMUP)]
    app = create_app(ApiSettings.from_env(env))
    async with Lifespan(app):
        ctx = app.app.state.ctx  # type: ignore[attr-defined]  # HotRoute's Starlette
        if v.patch is not None:
            v.patch(ctx)
        if v.direct:  # the API's own GatedClaims and store, called as the route calls them
            calls = [
                functools.partial(ctx.claims.claim, "guard", f"g{i}", f"k{i}")
                for i in range(claims + WARMUP)
            ]
            return await _timed_calls(calls, port)
        return await _timed(app, "POST /v1/events/guard/holds", tokens, 201, port)


async def _bare(v: Variant, claims: int, port: int) -> float:
    os.environ["ONSALE_REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
    os.environ["BARE_PREFIX"] = "bench"
    if v.bare.startswith("POST"):
        with redis.Redis(port=port) as server:
            for mapping in free_seats(claims + WARMUP + 200):
                server.zadd(keys_of("bench")[0], mapping)
    if v.direct:
        client = aioredis.Redis(port=port, decode_responses=True, max_connections=64)
        script = client.register_script(MINIMAL_CLAIM)
        keys = list(keys_of("bench"))
        calls = [
            functools.partial(script, keys=keys, args=[uuid.uuid4().hex])
            for _ in range(claims + WARMUP)
        ]
        try:
            return await _timed_calls(calls, port)
        finally:
            await client.aclose()
    app = create_bare_app()
    want = 201 if v.bare.startswith("POST") else 200
    async with Lifespan(app):
        return await _timed(app, v.bare, [b""] * (claims + WARMUP), want, port)


async def _timed(app: Any, route: str, auth: list[bytes], want: int, port: int) -> float:
    """API CPU µs per request after the warm-up (Redis's statistics reset at its end)."""
    method, path = route.split()
    for token in auth[:WARMUP]:
        assert await post(app, path, token, method) == want
    redis.Redis(port=port).config_resetstat()
    began = time.process_time()
    for token in auth[WARMUP:]:
        assert await post(app, path, token, method) == want
    return (time.process_time() - began) * 1e6 / (len(auth) - WARMUP)


async def _timed_calls(calls: Sequence[Callable[[], Awaitable[Any]]], port: int) -> float:
    """As _timed, for calls made without the HTTP app."""
    for call in calls[:WARMUP]:
        await call()
    redis.Redis(port=port).config_resetstat()
    began = time.process_time()
    for call in calls[WARMUP:]:
        await call()
    return (time.process_time() - began) * 1e6 / (len(calls) - WARMUP)


def run_one(v: Variant, claims: int) -> tuple[float, float]:
    """(API CPU µs per request, Redis µs per script call) of one variant on a fresh server."""
    with private_server(DURABLE) as port:
        cpu = asyncio.run((_bare if v.bare else _engine)(v, claims, port))
        stats = redis.Redis(port=port).info("commandstats")
        calls = [stats[k] for k in ("cmdstat_fcall", "cmdstat_evalsha") if k in stats]
        return cpu, float(calls[0]["usec_per_call"]) if calls else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claims", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)  # the access log's lines, as bench_guard
    cpu: dict[str, list[float]] = {v.name: [] for v in VARIANTS}
    srv: dict[str, list[float]] = {v.name: [] for v in VARIANTS}
    with Progress() as progress:
        task = progress.add_task("variants", total=args.rounds * len(VARIANTS))
        for _ in range(args.rounds):
            for v in VARIANTS:
                c, s = run_one(v, args.claims)
                cpu[v.name].append(c)
                srv[v.name].append(s)
                progress.advance(task)
    whole = statistics.median(cpu[VARIANTS[0].name])
    table = Table(
        title=f"a claim's API CPU, {args.claims:,} requests a run, median of {args.rounds}"
    )
    for col in ("variant", "API CPU µs", "saved µs", "share", "runs", "Redis µs/call"):
        table.add_column(col, justify="left" if col == "variant" else "right")
    for v in VARIANTS:
        med = statistics.median(cpu[v.name])
        saved = whole - med if v.name.startswith(("  ", "the claim's engine")) else None
        table.add_row(
            v.name, f"{med:.1f}",
            "" if saved is None else f"{saved:.1f}",
            "" if saved is None else f"{saved / whole:.0%}",
            " ".join(f"{x:.0f}" for x in cpu[v.name]),
            f"{statistics.median(srv[v.name]):.1f}" if srv[v.name][0] else "",
        )  # fmt: skip
    Console(width=140).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
