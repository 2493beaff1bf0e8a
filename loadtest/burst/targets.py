"""What a T0 burst (loadtest/burst/main.py) is released against: the engine's stack, the
PostgreSQL baseline, or the bare JSON+EVALSHA claim, each a server answering the claim of
EVENT_ID and a check of its own state after the run."""

import argparse
import asyncio
import contextlib
import tempfile
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import redis.asyncio as redis_asyncio

from engine.store import Store
from loadtest.bench import bare_app
from loadtest.bench.persistence_cost import private_server
from loadtest.burst.ledger import ledger_drain, ledger_stats
from loadtest.devstack.invariants import Verdict, check_burst, check_burst_pg
from loadtest.devstack.services import pg_server_dsn, redis_url
from loadtest.devstack.stack import LocalStack
from loadtest.pg_baseline import server as pg_baseline
from persistence import database

EVENT_ID = "burst"
HOLD_TTL_MS = 600_000  # by default no hold ends during a run
AOF_FLAGS = {
    "no": ["--appendonly", "no"],
    "everysec": ["--appendonly", "yes", "--appendfsync", "everysec"],
    "always": ["--appendonly", "yes", "--appendfsync", "always"],
}


@dataclass(frozen=True)
class Target:
    """A server answering the claim of EVENT_ID, and the check of its state after the run."""

    api_url: str
    token_secret: str
    check: Callable[[Counter[str]], Awaitable[Verdict]]
    ledger: Callable[[int], Awaitable[dict[str, float]]] | None = None
    admin_token: str = ""  # the engine's: its /metrics tell what reached Redis
    server_pid: int = 0  # the API's main process (its workers are under it): its CPU is read


@contextlib.contextmanager
def engine_redis(args: argparse.Namespace) -> Iterator[str]:
    """The engine's Redis for a tool's run (this one and loadtest/bench/claim_rate.py): a private
    server with the AOF policy asked for ("always" is the production setting, docs/deploy.md,
    the one that compares fairly with PostgreSQL's synchronous commit), or the shared one."""
    if args.redis_aof == "shared":
        yield redis_url()
        return
    with private_server(AOF_FLAGS[args.redis_aof]) as port:
        yield f"redis://127.0.0.1:{port}/0"


@contextlib.asynccontextmanager
async def engine_target(args: argparse.Namespace) -> AsyncIterator[Target]:
    with engine_redis(args) as redis_url:
        async with engine_on(args, redis_url) as target:
            yield target


@contextlib.asynccontextmanager
async def engine_on(args: argparse.Namespace, redis_url: str) -> AsyncIterator[Target]:
    prefix = f"onsale:bench:{uuid.uuid4().hex[:8]}"
    server_dsn = pg_server_dsn()
    ledger_db = f"onsale_bench_ledger_{uuid.uuid4().hex[:8]}" if args.ledger else ""
    if ledger_db:
        await database.create_database(server_dsn, ledger_db)
    stack = LocalStack(
        redis_url=redis_url,
        key_prefix=prefix,
        api_workers=args.workers,
        log_dir=Path(tempfile.mkdtemp(prefix="onsale-burst-")),
        ledger_dsn=database.dsn_for(server_dsn, ledger_db) if ledger_db else "",
    )
    await asyncio.to_thread(stack.start)
    redis = redis_asyncio.from_url(redis_url, decode_responses=True)
    store = Store(redis, prefix=prefix)
    try:
        await asyncio.to_thread(
            stack.create_event, EVENT_ID, args.seats, hold_ttl_ms=args.hold_ttl_ms
        )

        async def check(answers: Counter[str]) -> Verdict:
            return await check_burst(store, EVENT_ID, answers, args.clients, args.seats)

        async def ledger(expected: int) -> dict[str, float]:
            live = await ledger_stats(stack.ledger_dsn, expected)
            if not args.ledger_drain:
                return live
            return {**live, **await ledger_drain(stack, redis, EVENT_ID, prefix, expected)}

        yield Target(
            stack.api_url,
            stack.token_secret,
            check,
            ledger if ledger_db else None,
            stack.admin_token,
            stack.pid("api"),
        )
    finally:
        await asyncio.to_thread(stack.stop)
        if ledger_db:
            await database.drop_database(server_dsn, ledger_db)
        async for key in redis.scan_iter(match=f"{prefix}:*"):
            await redis.delete(key)
        await redis.aclose()


@contextlib.asynccontextmanager
async def pg_target(args: argparse.Namespace) -> AsyncIterator[Target]:
    server_dsn = pg_server_dsn()
    database_name = f"onsale_bench_pg_{uuid.uuid4().hex[:8]}"
    await database.create_database(server_dsn, database_name)
    try:
        dsn = database.dsn_for(server_dsn, database_name)
        await pg_baseline.setup(dsn, EVENT_ID, args.seats, hold_ttl_ms=HOLD_TTL_MS)
        server = pg_baseline.BaselineServer(
            pg_dsn=dsn,
            workers=args.workers,
            log_dir=Path(tempfile.mkdtemp(prefix="onsale-burst-pg-")),
        )
        await asyncio.to_thread(server.start)
        try:

            async def check(answers: Counter[str]) -> Verdict:
                audit = await pg_baseline.audit(dsn, EVENT_ID)
                return check_burst_pg(audit, answers, args.clients, args.seats)

            pid = server.proc.pid if server.proc is not None else 0
            yield Target(server.url, server.token_secret, check, server_pid=pid)
        finally:
            await asyncio.to_thread(server.stop)
    finally:
        await database.drop_database(server_dsn, database_name)


@contextlib.asynccontextmanager
async def bare_target(args: argparse.Namespace) -> AsyncIterator[Target]:
    """The bare JSON+EVALSHA claim (loadtest/bench/bare_app.py) on a Redis of the engine's
    durability: the reference a claim that writes is measured against (issue 33: 10,000
    clients on 10,000 seats within 1.05x of it). It reads no token and keeps no hold: its
    checks are the seats it gave against the answers."""
    prefix = f"onsale:bench:bare:{uuid.uuid4().hex[:8]}"
    with (
        engine_redis(args) as redis_url,
        bare_app.served(redis_url, prefix, args.seats, args.workers) as (url, pid),
    ):

        async def check(answers: Counter[str]) -> Verdict:
            left = await asyncio.to_thread(bare_app.sold, redis_url, prefix)
            held = left["held"]
            counts = {"seats": held + left["free"], "held": held, "holds": held,
                      "distinct_seats_held": held, "holds_matching_seat": held}  # fmt: skip
            return check_burst_pg(counts, answers, args.clients, args.seats)

        yield Target(url, "the bare claim reads no token", check, server_pid=pid)


TARGETS = {"engine": engine_target, "pg": pg_target, "bare": bare_target}
