"""`onsale chaos` (`python -m loadtest.chaos.main`): a seeded whole-system run while processes die.

It starts everything privately on spare loopback ports: one Redis with the persistence the
engine requires (AOF, fsync always; ADR 0009) or, with --cluster, a local Redis Cluster of
three primaries with a replica each; a PostgreSQL of its own for the ledger; the provider
simulator, the API, the worker and the ledger writer as processes. The simulator misbehaves all
along: it declines, fails, answers with a timeout and captures late, captures some declines
anyway, loses callbacks and sends others two or three times, in any order.

At T0 a crowd presses "buy" on an event of 80 seats and its winners pay (the demo's burst and
journeys); buyers then arrive at a steady rate on the flow events and go through the same
journeys. Meanwhile the fault schedule, built from the seed alone and printed first, kills
(kill -9) the API, the worker, the ledger writer, Redis (a cluster primary: a replica takes
over, the old primary comes back as its replica) and PostgreSQL, each restarted after its
seeded delay. An event the writer finds lost or fenced is rebuilt from the ledger as
docs/recovery.md says.

When the load stops everything is healed, the sale settles, the nightly reconciliation runs
twice, and every invariant is checked from Redis, the ledger and the provider's own books
(loadtest/chaos/checks.py). It prints the faults injected, the load held, the
late-capture-to-refund bound and the violations; exit 0 only when there is none."""

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from rich.console import Console

from engine.config.settings import Settings
from engine.model import keys
from engine.store import Store
from loadtest.chaos.checks import Run, Settled, findings, settle, verdict
from loadtest.chaos.faults import Chaos, Servers
from loadtest.chaos.load import Crowd, Sale, flow, t0_burst
from loadtest.chaos.report import report, schedule_table, summary
from loadtest.chaos.schedule import KINDS, Fault, build_schedule
from loadtest.chaos.servers import CrashablePostgres, DurableRedis
from loadtest.demo.run import progress_bars
from loadtest.demo.scenario import PRICE, Burst, seat_map
from loadtest.devstack.cluster import LocalCluster
from loadtest.devstack.stack import QUICK_SETTLE_ENV, LocalStack
from onsale.chaos_command import add_chaos_options

FLOW_POLICIES = ("release_refund", "quarantine")
HEAL_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ChaosConfig:
    seed: int = 1
    duration_s: float = 300.0
    faults: int = 110
    cluster: bool = False
    wait_replicas: int = 0
    clients: int = 2_000  # the T0 crowd
    seats: int = 80  # the T0 event's seats
    flow_rate_per_s: float = 6.0  # buyers arriving on the flow events
    flow_events: int = 3
    flow_seats: int = 1_000  # per flow event
    hold_ttl_ms: int = 8_000
    quarantine_ms: int = 4_000
    lose_redis: bool = False  # Redis comes back empty: the ledger rebuilds by itself
    kinds: tuple[str, ...] = KINDS  # the kinds of fault injected
    log_dir: str = ""
    json_path: str = ""


SHORT = {
    "duration_s": 40.0,
    "faults": 12,
    "clients": 500,
    "flow_rate_per_s": 4.0,
    "flow_events": 2,
    "flow_seats": 300,
    "hold_ttl_ms": 5_000,
    "quarantine_ms": 3_000,
}


def config_from(args: argparse.Namespace) -> ChaosConfig:
    base: dict[str, Any] = dict(SHORT) if args.short else {}
    if args.duration is not None:
        base["duration_s"] = args.duration
    if args.faults is not None:
        base["faults"] = args.faults
    if args.flow_seats is not None:
        base["flow_seats"] = args.flow_seats
    if args.only:
        base["kinds"] = tuple(k.strip() for k in args.only.split(",") if k.strip())
    run = time.strftime("%Y%m%d-%H%M%S")
    log_dir = args.log_dir or str(Path(".services") / "chaos-logs" / f"{run}-seed{args.seed}")
    return ChaosConfig(
        seed=args.seed,
        cluster=args.cluster,
        wait_replicas=args.wait_replicas,
        lose_redis=args.lose_redis,
        log_dir=log_dir,
        json_path=args.json,
        **base,
    )


def sim_args(cfg: ChaosConfig) -> tuple[str, ...]:
    """The provider's misbehaviour, the demo's rates with more contradictions."""
    return (
        *("--decline-rate", "0.1", "--fail-rate", "0.03", "--late-rate", "0.1"),
        *("--late-delay-ms", str(cfg.hold_ttl_ms + cfg.quarantine_ms // 2)),
        *("--duplicate-rate", "0.3", "--loss-rate", "0.05", "--contradict-rate", "0.3"),
        *("--seed", str(cfg.seed)),
    )


def start_servers(cfg: ChaosConfig, work: Path, console: Console) -> Servers:
    """PostgreSQL, Redis (one, or a cluster) and the stack, all private; stopped on failure."""
    pg = CrashablePostgres(work / "pg")
    pg.start()
    redis, cluster = None, None
    try:
        if cfg.cluster:
            cluster = LocalCluster(work / "cluster")
            cluster.start()
            url = cluster.url
        else:
            redis = DurableRedis(work / "redis")
            redis.start()
            url = redis.url
        # The run's own operator rebuilds what Redis loses, by the runbook (docs/recovery.md);
        # the ledger's automatic rebuild would race it (tests/fault/test_auto_rebuild.py).
        # With --lose-redis nobody is at the keyboard: the ledger process rebuilds (ADR 0037).
        env = {**QUICK_SETTLE_ENV, "ONSALE_AUTO_REBUILD": "1" if cfg.lose_redis else "0"}
        if cfg.wait_replicas:
            env["ONSALE_REDIS_WAIT_REPLICAS"] = str(cfg.wait_replicas)
        stack = LocalStack(
            redis_url=url,
            key_prefix=f"onsale:chaos:{cfg.seed}",
            log_dir=Path(cfg.log_dir),
            sim_args=sim_args(cfg),
            extra_env=env,
            ledger_dsn=pg.dsn,
        )
        console.print(f"[bold]chaos[/]: starting the stack; logs in {stack.log_dir}/")
        stack.start()
    except BaseException:
        stop_servers(Servers(LocalStack("", "", Path(cfg.log_dir)), pg, redis, cluster))
        raise
    return Servers(stack, pg, redis, cluster)


def stop_servers(servers: Servers) -> None:
    servers.stack.stop()
    if servers.cluster is not None:
        servers.cluster.stop()
    if servers.redis is not None:
        servers.redis.stop()
    servers.pg.stop()


def all_alive(servers: Servers) -> bool:
    redis_up = (
        all(n.alive for n in servers.cluster.nodes)
        if servers.cluster is not None
        else servers.redis is not None and servers.redis.alive
    )
    return servers.stack.alive() and redis_up and servers.pg.alive


def event_ids(cfg: ChaosConfig, cluster: LocalCluster | None) -> tuple[str, list[str]]:
    """(the T0 event, the flow events); on a cluster the flow events are spread so that every
    primary serves at least one of them."""
    t0_event = f"t0-s{cfg.seed}"
    if cluster is None:
        return t0_event, [f"flow{i}-s{cfg.seed}" for i in range(cfg.flow_events)]
    flow_events: list[str] = []
    ports: set[int] = set()
    n = 0
    primaries = len(cluster.primary_ports())
    while len(flow_events) < max(cfg.flow_events, primaries):
        n += 1
        event_id = f"flow{n}-s{cfg.seed}"
        port = cluster.owner(keys.slot_of(event_id)).port
        if port not in ports or len(ports) == primaries:
            ports.add(port)
            flow_events.append(event_id)
    return t0_event, flow_events


async def open_events(
    cfg: ChaosConfig, servers: Servers, store: Store
) -> tuple[int, list[str], list[str]]:
    """Create the T0 event (opening at T0, 4 s from now by the Redis clock) and the flow
    events (open now): (T0, the T0 event's seats, every event id)."""
    t0_event, flow_events = event_ids(cfg, servers.cluster)
    seats = seat_map(cfg.seats)
    t0_ms = await store.read.server_time_ms() + 4_000
    common = {"hold_ttl_ms": cfg.hold_ttl_ms, "quarantine_ms": cfg.quarantine_ms}
    create = servers.stack.create_event
    await asyncio.to_thread(
        create, t0_event, seats, opens_at_ms=t0_ms, policy="quarantine", price_minor=PRICE, **common
    )
    for i, event_id in enumerate(flow_events):
        policy = FLOW_POLICIES[i % len(FLOW_POLICIES)]
        await asyncio.to_thread(
            create, event_id, seat_map(cfg.flow_seats), policy=policy, price_minor=PRICE, **common
        )
    return t0_ms, [s["seat_id"] for s in seats], [t0_event, *flow_events]


async def play(cfg: ChaosConfig, schedule: list[Fault], servers: Servers, console: Console) -> int:
    """The sale under faults, the healing, the checks and the report."""
    stack = servers.stack
    client = Settings.from_env(stack.env()).redis_client()
    store = Store(client, prefix=stack.key_prefix, timeout_s=5.0)
    try:
        t0_ms, seats, events = await open_events(cfg, servers, store)
        sale = Sale(
            burst_event=events[0],
            burst_seats=seats,
            clients=cfg.clients,
            flow_events=events[1:],
            flow_rate_per_s=cfg.flow_rate_per_s,
            hold_ttl_ms=cfg.hold_ttl_ms,
            quarantine_ms=cfg.quarantine_ms,
            token_secret=stack.token_secret,
            seed=cfg.seed,
        )
        now_ms = await store.read.server_time_ms()
        t0 = time.monotonic() + (t0_ms - now_ms) / 1000
        chaos = Chaos(servers, events, t0, lose_redis=cfg.lose_redis)
        connector = aiohttp.TCPConnector(limit=200)
        timeout = aiohttp.ClientTimeout(total=10)
        async with aiohttp.ClientSession(
            base_url=stack.api_url, connector=connector, timeout=timeout
        ) as http:
            crowd = Crowd(http)
            clocks = (t0_ms, now_ms)
            burst, end = await under_faults(
                cfg, chaos, schedule, crowd, sale, clocks, store, console
            )
        run = Run(
            events=events,
            price=PRICE,
            seen=crowd.seen,
            end=end,
            faults_planned=len(schedule),
            faults_done=sum(i.back_s >= 0 for i in chaos.injected),
            recoveries=len(chaos.recoveries),
            single_redis=servers.cluster is None,
            alive=all_alive(servers),
            lost_redis=cfg.lose_redis,
            unhealed=tuple(r.event_id for r in chaos.recoveries if not r.ok),
            sizes=((events[0], cfg.seats), *((e, cfg.flow_seats) for e in events[1:])),
        )
        checks = await verdict(store, servers.pg.dsn, run, Path(cfg.log_dir))
    finally:
        await client.aclose()
    noticed = findings(run, Counter(u.name for u in chaos.unplanned))
    figures = summary(asdict(cfg), schedule, chaos, crowd.seen, burst, end, checks, noticed)
    if cfg.json_path:
        body = orjson.dumps(figures, option=orjson.OPT_INDENT_2)
        await asyncio.to_thread(Path(cfg.json_path).write_bytes, body)
    return report(console, figures, cfg.duration_s)


async def under_faults(
    cfg: ChaosConfig,
    chaos: Chaos,
    schedule: list[Fault],
    crowd: Crowd,
    sale: Sale,
    clocks: tuple[int, int],
    store: Store,
    console: Console,
) -> tuple[Burst, Settled]:
    """The burst and the flow while the schedule runs; then heal, settle and reconcile.
    `clocks`: (T0, now) by the Redis clock, in ms."""
    stop = asyncio.Event()
    with progress_bars(console) as progress:
        done = progress.add_task("faults injected and healed", total=len(schedule))
        helpers = [
            asyncio.create_task(chaos.supervise(stop)),
            asyncio.create_task(
                chaos.watch_rebuilds(store, stop) if cfg.lose_redis else chaos.operate(store, stop)
            ),
        ]
        injector = asyncio.create_task(
            chaos.run_schedule(schedule, lambda _record: progress.advance(done))
        )
        burst = asyncio.create_task(t0_burst(crowd, sale, *clocks, progress))
        try:
            await asyncio.sleep(max(0.0, chaos.t0 - time.monotonic()))
            await flow(crowd, sale, chaos.t0 + cfg.duration_s, progress)
            played = await burst
            await injector
            healing = progress.add_task("healing, settling, reconciling twice", total=None)
            await heal(chaos, store)
            end = await settle(chaos.servers.stack, store, chaos.events, Path(cfg.log_dir))
            progress.update(healing, total=1, completed=1)
        finally:
            stop.set()
            for task in (injector, burst):
                task.cancel()
            await asyncio.gather(*helpers, injector, burst, return_exceptions=True)
    return played, end


async def heal(chaos: Chaos, store: Store) -> None:
    """Until every process and server runs (the supervisor starts what is down), a cluster says
    ok, and no event is being recovered."""
    deadline = time.monotonic() + HEAL_TIMEOUT_S
    servers = chaos.servers
    while time.monotonic() < deadline:
        if not chaos.down and all_alive(servers):
            break
        await asyncio.sleep(0.5)
    if servers.cluster is not None:
        await asyncio.to_thread(servers.cluster.wait_ok, max(1.0, deadline - time.monotonic()))
    while time.monotonic() < deadline:
        recovering = [e for e in chaos.events if await store.read.recovering(e)]
        if not recovering:
            return
        await asyncio.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loadtest.chaos.main",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_chaos_options(parser)
    args = parser.parse_args(argv)
    if args.wait_replicas and not args.cluster:
        parser.error("--wait-replicas needs --cluster (one Redis has no replica to wait for)")
    cfg = config_from(args)
    console = Console()
    if args.lose_redis and args.cluster:
        parser.error("--lose-redis is for one Redis (a cluster fails over to a replica)")
    try:
        schedule = build_schedule(cfg.seed, cfg.duration_s, cfg.faults, cfg.kinds)
    except ValueError as exc:
        parser.error(str(exc))
    console.print(schedule_table(cfg.seed, schedule, cfg.cluster))
    work = Path(tempfile.mkdtemp(prefix="onsale-chaos-"))
    os.chmod(work, 0o755)  # PostgreSQL runs as its own user under it
    try:
        servers = start_servers(cfg, work, console)
        try:
            return asyncio.run(play(cfg, schedule, servers, console))
        finally:
            stop_servers(servers)
    except KeyboardInterrupt:
        return 130
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
