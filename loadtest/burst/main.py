"""The lean T0 burst generator: N clients, each on its own connection, opened before T0 and
released together at T0 against one event, every answer and latency recorded.

    python -m loadtest.burst.main [--target engine|pg|bare] [--clients 10000] [--seats 80]
        [--workers 2] [--redis-aof always|everysec|no|shared] [--parties SHARE] [--json out.json]

--target engine (the default) starts the stack (API with --workers uvicorn workers, simulator,
worker) on spare ports and creates the event through the admin API. --target pg creates a private
database on the server of ONSALE_PG_DSN (dropped afterwards), loads the same seats into the
PostgreSQL baseline (loadtest/pg_baseline/server.py) and serves it with --workers uvicorn workers,
configured as `onsale serve`; --target bare the bare JSON+EVALSHA claim (loadtest/bench/bare_app.py)
on a Redis as the engine's (loadtest/burst/targets.py). Then the same burst on each: one connection
per client (a GET /healthz each, kept alive), wait for every connection, release all clients at
once, each sends one best-available claim (with --parties, that share of clients asks for a party of
2 to 6 seats instead). Before the claims, the same clients send one GET /healthz each, all at once:
the trivial burst, on the same server in the same run, that the claim burst is compared with. The
engine runs on a private Redis with AOF `appendfsync always` by default (the production setting; the
baseline's PostgreSQL syncs every commit): --redis-aof picks another policy or the shared server.
After the run, loadtest/devstack/invariants.py checks the target's own state (the engine's audit, or
the baseline's) and the answers."""

import argparse
import asyncio
import random
import resource
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import orjson
import uvloop
from rich.console import Console
from rich.progress import Progress

from api.identity import DemoTokens
from loadtest.burst.client import BurstClient, claim_request
from loadtest.burst.report import ENGINE_COUNTERS, burst_result, print_report
from loadtest.burst.targets import AOF_FLAGS, EVENT_ID, HOLD_TTL_MS, TARGETS, Target
from loadtest.devstack.stack import tree_cpu_s


def party_sizes(clients_n: int, share: float, seed: int = 12) -> list[int]:
    """What each client asks for: 1 seat, or (a `share` of them, drawn from a seeded
    generator) a party of 2 to 6."""
    rng = random.Random(seed)
    return [rng.randint(2, 6) if rng.random() < share else 1 for _ in range(clients_n)]


async def release_burst(
    target: Target,
    clients_n: int,
    console: Console,
    timeout_s: float = 60.0,
    sizes: list[int] | None = None,
    trivial: list[float] | None = None,
    cpu: dict[str, float] | None = None,
) -> tuple[list[BurstClient], float]:
    """Open one connection per client (each answers one GET /healthz, so the server has
    accepted it), then write every client's claim in one pass and wait for all answers.
    `sizes`: each client's party size (None: one seat each). `trivial`: when given, first the
    same burst of GET /healthz on the same connections, its every-answered time appended (ms).
    `cpu`: filled with the server's CPU seconds in each burst ("trivial", "claims").
    Returns the clients (answers and timings) and the release instant (time.monotonic())."""
    tokens = DemoTokens(target.token_secret, ttl_s=3_600)
    url = urlsplit(target.api_url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    loop = asyncio.get_running_loop()
    clients: list[BurstClient] = []
    health = f"GET /healthz HTTP/1.1\r\nHost: {url.netloc}\r\n\r\n".encode()
    try:
        with Progress(console=console) as progress:
            task = progress.add_task("opening one connection per client", total=clients_n)
            gate = asyncio.Semaphore(500)

            async def open_one() -> BurstClient:
                async with gate:
                    _transport, c = await loop.create_connection(BurstClient, host, port)
                    clients.append(c)
                    status, _body = await asyncio.wait_for(c.send(health), timeout_s)
                    assert status == 200, status
                progress.advance(task)
                return c

            await asyncio.gather(*(open_one() for _ in range(clients_n)))
        sizes = sizes or [1] * clients_n
        requests = [
            claim_request(url.netloc, EVENT_ID, tokens.issue(f"c{n}"), f"k{n}", sizes[n])
            for n in range(clients_n)
        ]
        await asyncio.sleep(0.2)  # let the servers settle after the connection storm
        cpu = {} if cpu is None else cpu
        if trivial is not None:  # the same burst of a trivial request first, on the same server
            before = tree_cpu_s(target.server_pid)
            trivial.append(await trivial_burst(clients, health, timeout_s))
            cpu["trivial"] = tree_cpu_s(target.server_pid) - before
            await asyncio.sleep(0.2)
        before = tree_cpu_s(target.server_pid)
        t0 = time.monotonic()
        # Every claim is written in this one synchronous pass; the answers are awaited after.
        sent = [c.send(raw) for c, raw in zip(clients, requests, strict=True)]
        await asyncio.gather(
            *(c.answer_of(f, timeout_s) for c, f in zip(clients, sent, strict=True))
        )
        cpu["claims"] = tree_cpu_s(target.server_pid) - before
        return clients, t0
    finally:
        for c in clients:
            c.close()


async def engine_counters(target: Target) -> dict[str, float]:
    """What the engine's processes counted during the run (their /metrics, summed)."""
    headers = {"Authorization": f"Bearer {target.admin_token}"}
    async with httpx.AsyncClient(base_url=target.api_url, timeout=10) as client:
        text = (await client.get("/metrics", headers=headers)).text
    found = dict.fromkeys(ENGINE_COUNTERS, 0.0)
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in found:
            found[name] += float(value)
    return found


async def trivial_burst(clients: list[BurstClient], raw: bytes, timeout_s: float) -> float:
    """Every client sends the trivial request at once: ms until the last answer."""
    t0 = time.monotonic()
    sent = [c.send(raw) for c in clients]
    await asyncio.gather(*(c.answer_of(f, timeout_s) for c, f in zip(clients, sent, strict=True)))
    bad = Counter(c.answer for c in clients if c.answer != "200")
    assert not bad, f"the trivial burst was not all 200: {dict(bad)}"
    return (max(c.done for c in clients) - t0) * 1000


async def run(args: argparse.Namespace, console: Console) -> int:
    async with TARGETS[args.target](args) as target:
        sizes = party_sizes(args.clients, args.parties)
        trivial: list[float] = []
        cpu: dict[str, float] = {}
        clients, t0 = await release_burst(
            target, args.clients, console, sizes=sizes, trivial=trivial, cpu=cpu
        )
        answers = Counter(c.answer for c in clients)
        verdict = await target.check(answers)
        counted = await engine_counters(target) if target.admin_token else None
        ledger = None
        if target.ledger is not None:
            with console.status("waiting for every hold to expire and reach the ledger"):
                ledger = await target.ledger(answers["201"])
            verdict.checks.append(
                (
                    "ledger: every hold's terminal decision recorded",
                    ledger["expired_rows"] == ledger["expected"],
                    f"{ledger['expired_rows']:.0f} of {ledger['expected']:.0f}",
                )
            )
    result = burst_result(args, clients, t0, verdict, ledger)
    result["engine"] = counted
    result["trivial_all_answered_ms"] = trivial[0]
    result["vs_trivial"] = result["all_answered_ms"] / max(trivial[0], 1e-9)
    # What each request cost the API's processes (CPU, µs): steadier than the times above,
    # which also carry the load generator and Redis sharing the same cores.
    result["api_cpu_us"] = {k: v / args.clients * 1e6 for k, v in cpu.items()}
    result["cpu_vs_trivial"] = cpu["claims"] / max(cpu["trivial"], 1e-9)
    print_report(console, args, result, verdict)
    if args.json:
        await asyncio.to_thread(
            Path(args.json).write_bytes, orjson.dumps(result, option=orjson.OPT_INDENT_2)
        )
    return 0 if verdict.ok else 1


def add_redis_aof(ap: argparse.ArgumentParser) -> None:
    """The engine's Redis in a tool's run (this one and loadtest/bench/claim_rate.py)."""
    ap.add_argument(
        "--redis-aof",
        choices=(*AOF_FLAGS, "shared"),
        default="always",
        help="the engine on a private Redis with this AOF fsync policy (always: the production "
        "setting, what compares fairly with PostgreSQL's synchronous commit), or on the shared "
        "server of ONSALE_REDIS_URL as it is",
    )


def positive(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def raise_open_files_limit(needed: int) -> None:
    """One socket per client here, and as many in the servers (started from this process, so
    they inherit the limit): lift the soft limit to the hard one, or say why the run will fail."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        if target < needed:
            Console().print(
                f"[yellow]open files limit {target} < {needed} needed: raise it (ulimit -n)"
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m loadtest.burst.main",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--target", choices=sorted(TARGETS), default="engine")
    ap.add_argument("--clients", type=positive, default=10_000)
    ap.add_argument("--seats", type=positive, default=80)
    ap.add_argument("--workers", type=positive, default=2)
    ap.add_argument("--json", default="")
    ap.add_argument(
        "--ledger",
        action="store_true",
        help="engine: run the ledger writer too; after the burst, every hold expires at once "
        "(set --hold-ttl-ms short) and the ledger's rows/s and lag are measured",
    )
    ap.add_argument("--hold-ttl-ms", type=positive, default=HOLD_TTL_MS)
    ap.add_argument(
        "--ledger-drain",
        action="store_true",
        help="with --ledger: then also the writer's own pace on a backlog (writer stopped while "
        "a second round of holds expires, then started)",
    )
    add_redis_aof(ap)
    ap.add_argument(
        "--parties",
        type=float,
        default=0.0,
        help="engine: the share of clients (0 to 1) asking for a party of 2 to 6 seats",
    )
    args = ap.parse_args(argv)
    if args.parties and args.target != "engine":
        ap.error("--parties needs --target engine (the baseline sells one seat per claim)")
    raise_open_files_limit(args.clients + 1024)
    return uvloop.run(run(args, Console()))


if __name__ == "__main__":
    raise SystemExit(main())
