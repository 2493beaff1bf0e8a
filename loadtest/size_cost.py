"""How the engine's costs grow with the size of an event, measured on one Redis server.

    python -m loadtest.size_cost [--sizes 80,10000,100000,1000000] [--claims 20000]
                                 [--json out.json] [--own-server]

For each size N, one event under a private key prefix of ONSALE_REDIS_URL (every key of the
prefix is unlinked afterwards), or of a private redis-server on a spare port with --own-server:

1. seats: Store.create_event with N seats (rank i, 1,000 seats per section, sent in chunks of
   SEATS_CHUNK_MAX), then open_sale. Bytes per seat, read two ways: the INFO memory
   used_memory delta / N, and the delta of the event keys' own MEMORY USAGE (SAMPLES 0) / N.
   used_memory also moves with client buffers (a few hundred KB either way), which swamps a
   small event; the key sum does not (it leaves out the keyspace's per-key overhead).
2. holds: L = min(--claims, N // 2) logins each claim the best seat with a fresh hold. The
   delta / L = bytes per live hold (both ways): its JSON in the holds hash, its deadline, login
   and owner entries, net of the free-set entry its seat leaves. Half the seats stay free, so
   the free set never empties (an empty one would add a restock PUBLISH to the steps below).
3. claims, the same work at every size: --claims steps, each a best-available claim with a new
   hold id by one of the L logins, round robin. That login already holds a seat, so the script
   releases the old hold (its seat goes back to the free zset, one outbox record) and pops the
   best free seat (ZPOPMIN, O(log N)); every step succeeds. Sent with asyncio.gather in batches
   of CLAIM_BATCH (the Store auto-pipelines them), with the production scripts (server clock).
   Redis side: INFO commandstats is read before and after every batch; each batch gives
   usec / calls of cmdstat_evalsha, and the table shows the median batch (robust to a burst
   of CPU contention); the commands a script runs are counted too, so ZPOPMIN gets its own
   column. Client side: claims/s over the wall time of the batches.
4. sweep: the test clock (Scripts(test_clock=True) reads test_now_ms from the event hash) is
   set past every deadline, then Store.sweep(batch_max=200) runs until nothing is due. Per
   expired hold: the median sweep call's EVALSHA usec, and the wall time of all sweep calls.
5. the event's audit (docs/invariants.md, over one snapshot) must be clean.

The claim cost must stay flat: the table shows each size's claim usec over the smallest size's.

Caveat: commandstats and used_memory are server-wide, and CONFIG RESETSTAT would disturb every
other client, so the numbers are differences of readings. Another client's EVALSHA calls mix
into a reading: a batch whose EVALSHA call count differs from the calls it made is left out of
the median (and counted in the report); other clients' writes move used_memory. Run it on a
quiet server, or with --own-server (same binary, default configuration, no persistence), which
shares only the machine's CPUs."""

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson
import redis
import redis.asyncio as aioredis
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from engine import keys
from engine.holds import Claimed, SeatSpec
from engine.scripts import Scripts
from engine.store import Store
from loadtest.stack import spare_port

HOLD_TTL_MS = 3_600_000  # no hold ends by the server clock during a run; the sweep moves time
QUARANTINE_MS = 60_000
CLAIM_BATCH = 500  # claims in flight at once
SWEEP_BATCH_MAX = 200
SWEEP_CALLS_MAX = 1_000_000  # a sweep that never finishes is a bug, not a slow run
SECTION_SEATS = 1_000
PROGRESS_STEP = 1_000  # seats between progress bar updates
STORE_TIMEOUT_S = 60.0  # generous: the audit of a 1M-seat event reads every seat
LAZYFREE_WAIT_S = 60.0
UNLINK_BATCH = 500
POOL_MAX = 16

T = TypeVar("T")
Stats = dict[str, tuple[int, int]]  # command -> (calls, usec)


@dataclass(frozen=True, slots=True)
class Sample:
    """One measured step: `made` EVALSHA calls sent, `units` things done (claims, holds)."""

    made: int
    units: int
    commands: Stats  # what the server counted meanwhile, by command

    @property
    def calls(self) -> int:
        return self.commands.get("evalsha", (0, 0))[0]

    @property
    def usec(self) -> int:
        return self.commands.get("evalsha", (0, 0))[1]

    @property
    def clean(self) -> bool:
        """No other client's EVALSHA fell in this step."""
        return self.calls == self.made


@dataclass
class Phase:
    samples: list[Sample] = field(default_factory=list)
    wall_s: float = 0.0

    def measured(self) -> list[Sample]:
        """The steps nobody else mixed into, or every step when there is none."""
        rows = [s for s in self.samples if s.units > 0]
        return [s for s in rows if s.clean] or rows

    def usec_per_unit(self) -> float:
        """The median step's EVALSHA usec per unit."""
        return statistics.median(s.usec / s.units for s in self.measured())

    def usec_per_unit_mean(self) -> float:
        rows = self.measured()
        return sum(s.usec for s in rows) / max(1, sum(s.units for s in rows))

    def per_unit(self) -> dict[str, tuple[float, float]]:
        """(calls, usec) per unit of every command counted in the measured steps."""
        rows = self.measured()
        units = max(1, sum(s.units for s in rows))
        names = {name for s in rows for name in s.commands}
        return {
            name: (
                sum(s.commands.get(name, (0, 0))[0] for s in rows) / units,
                sum(s.commands.get(name, (0, 0))[1] for s in rows) / units,
            )
            for name in sorted(names)
        }

    @property
    def units(self) -> int:
        return sum(s.units for s in self.samples)

    @property
    def clean_steps(self) -> int:
        return sum(s.clean for s in self.samples)

    @property
    def foreign_calls(self) -> int:
        return sum(s.calls - s.made for s in self.samples)


@dataclass
class SizeResult:
    size: int
    seats_load_s: float
    bytes_per_seat: float  # used_memory
    key_bytes_per_seat: float  # MEMORY USAGE of the event's keys
    logins: int
    bytes_per_hold: float
    key_bytes_per_hold: float
    first_claim_usec: float
    claims: int
    claim_usec: float  # median batch
    claim_usec_mean: float
    claim_zpopmin_usec: float
    claims_per_s: float
    # What each claim step leaves behind: the released hold's JSON and its outbox record.
    key_bytes_per_claim_step: float
    sweep_expired: int
    sweep_calls: int
    sweep_usec_per_hold: float  # median sweep call
    sweep_usec_per_hold_mean: float
    sweep_wall_usec_per_hold: float
    audit_ok: bool
    audit_violations: list[str]
    # EVALSHA calls counted by the server that this run did not make (another client), and
    # the claim batches free of them (the medians use only those, when there are any).
    foreign_evalsha_calls: int
    claim_batches: int
    claim_batches_clean: int
    claim_ratio: float = 1.0
    # Per claim step: calls and usec of each command the claim script runs.
    claim_commands: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Memory:
    used: int  # INFO memory used_memory: the whole server
    keys: int  # MEMORY USAGE SAMPLES 0 summed over the event's keys

    def per(self, before: "Memory", n: int) -> tuple[float, float]:
        return (self.used - before.used) / n, (self.keys - before.keys) / n


def parse_sizes(text: str) -> list[int]:
    sizes = sorted({int(s) for s in text.split(",") if s.strip()})
    if not sizes or sizes[0] < 2:
        raise argparse.ArgumentTypeError("sizes must be integers >= 2")
    return sizes


async def command_stats(client: "aioredis.Redis") -> Stats:
    """(calls, usec) per command since the server's last stats reset."""
    raw: dict[str, Any] = await client.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"])) for name, v in raw.items()
    }


async def measured(
    client: "aioredis.Redis",
    phase: Phase,
    made: int,
    step: Awaitable[T],
    units: Callable[[T], int] | None = None,
) -> T:
    """Await `step` between two commandstats readings; nothing else of ours is in flight."""
    before = await command_stats(client)
    started = time.perf_counter()
    out = await step
    phase.wall_s += time.perf_counter() - started
    after = await command_stats(client)
    delta: Stats = {}
    for name, (calls, usec) in after.items():
        calls0, usec0 = before.get(name, (0, 0))
        if calls > calls0 and name != "info":
            delta[name] = (calls - calls0, usec - usec0)
    phase.samples.append(Sample(made, made if units is None else units(out), delta))
    return out


async def memory(store: Store, event_id: str) -> Memory:
    async with store.client.pipeline(transaction=False) as pipe:
        for key in store.keys(event_id):
            pipe.memory_usage(key, samples=0)
        sizes = await pipe.execute()
    info: dict[str, Any] = await store.client.info("memory")
    return Memory(int(info["used_memory"]), sum(int(n or 0) for n in sizes))


async def settle_lazyfree(client: "aioredis.Redis") -> None:
    """Wait until the server has freed what UNLINK handed to its background thread, so a
    memory reading is not lowered by an earlier size being freed meanwhile."""
    deadline = time.monotonic() + LAZYFREE_WAIT_S
    while time.monotonic() < deadline:
        info: dict[str, Any] = await client.info("memory")
        if int(info.get("lazyfree_pending_objects", 0)) == 0:
            return
        await asyncio.sleep(0.05)
    raise TimeoutError("Redis did not finish freeing the previous event")


async def drop_prefix(client: "aioredis.Redis", prefix: str) -> int:
    """UNLINK every key of the prefix (SCAN in batches; big keys are freed in the background)."""
    dropped = 0
    batch: list[str] = []
    async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        batch.append(key)
        if len(batch) >= UNLINK_BATCH:
            dropped += await client.unlink(*batch)
            batch = []
    if batch:
        dropped += await client.unlink(*batch)
    return dropped


def seat_specs(n: int, progress: Progress, task: TaskID) -> Iterator[SeatSpec]:
    """The seats, advancing the progress bar as create_event consumes them."""
    for i in range(n):
        if i % PROGRESS_STEP == 0:
            progress.update(task, completed=i)
        yield SeatSpec(f"s{i}", float(i), f"S{i // SECTION_SEATS}")
    progress.update(task, completed=n)


async def claims(
    client: "aioredis.Redis",
    n: int,
    call: Callable[[int], Awaitable[Claimed]],
    progress: Progress,
    task: TaskID,
) -> Phase:
    """Run call(0..n-1), CLAIM_BATCH at a time, each batch measured; every claim must be a
    new, successful one (a refusal raises)."""
    phase = Phase()
    for start in range(0, n, CLAIM_BATCH):
        batch = range(start, min(n, start + CLAIM_BATCH))
        done = await measured(client, phase, len(batch), asyncio.gather(*(call(i) for i in batch)))
        assert not any(c.replay for c in done), "a claim was answered as a replay"
        progress.advance(task, len(batch))
    return phase


async def sweep_all(
    store: Store, event_id: str, expected: int, progress: Progress, task: TaskID
) -> Phase:
    """Store.sweep until nothing is due, each call measured by the holds it expired."""
    phase = Phase()
    due = True
    while due:
        assert len(phase.samples) < SWEEP_CALLS_MAX, "the sweep does not finish"
        swept = await measured(
            store.client,
            phase,
            1,
            store.sweep(event_id, batch_max=SWEEP_BATCH_MAX),
            units=lambda r: r.expired,
        )
        due = swept.remaining_due > 0
        progress.update(task, completed=phase.units)
    assert phase.units == expected, f"swept {phase.units} holds, {expected} were live"
    return phase


async def measure_size(
    store: Store, sweep_store: Store, size: int, claims_n: int, progress: Progress
) -> SizeResult:
    client = store.client
    event_id = f"size-{size}"
    logins = max(1, min(claims_n, size // 2))
    label = f"{size:>9,}"

    # 1. seats
    task = progress.add_task(f"{label} seats", total=size)
    await settle_lazyfree(client)
    mem0 = await memory(store, event_id)
    started = time.perf_counter()
    added = await store.create_event(
        event_id,
        seat_specs(size, progress, task),
        hold_ttl_ms=HOLD_TTL_MS,
        quarantine_ms=QUARANTINE_MS,
    )
    load_s = time.perf_counter() - started
    mem1 = await memory(store, event_id)
    assert added == size, f"created {added} seats of {size}"
    await store.open_sale(event_id)

    # 2. one live hold per login
    task = progress.add_task(f"{label} first holds", total=logins)
    mem2 = await memory(store, event_id)
    first = await claims(
        client, logins, lambda i: store.claim(event_id, f"u{i}", f"f{i}"), progress, task
    )
    mem3 = await memory(store, event_id)

    # 3. measured claims: each login gives up its hold for the best free seat
    task = progress.add_task(f"{label} claims", total=claims_n)
    steps = await claims(
        client,
        claims_n,
        lambda i: store.claim(event_id, f"u{i % logins}", f"c{i}"),
        progress,
        task,
    )
    mem4 = await memory(store, event_id)

    # 4. sweep every live hold, the test clock past their deadlines
    task = progress.add_task(f"{label} sweep", total=logins)
    now_ms = await store.read.server_time_ms()
    await client.hset(
        keys.event_key(event_id, "event", store.prefix), "test_now_ms", now_ms + HOLD_TTL_MS + 1
    )
    sweep = await sweep_all(sweep_store, event_id, logins, progress, task)

    report = await store.read.audit(event_id)

    per_seat = mem1.per(mem0, size)
    per_hold = mem3.per(mem2, logins)
    commands = steps.per_unit()
    zpopmin_calls, zpopmin_usec = commands.get("zpopmin", (0.0, 0.0))
    return SizeResult(
        size=size,
        seats_load_s=load_s,
        bytes_per_seat=per_seat[0],
        key_bytes_per_seat=per_seat[1],
        logins=logins,
        bytes_per_hold=per_hold[0],
        key_bytes_per_hold=per_hold[1],
        first_claim_usec=first.usec_per_unit(),
        claims=claims_n,
        claim_usec=steps.usec_per_unit(),
        claim_usec_mean=steps.usec_per_unit_mean(),
        claim_zpopmin_usec=zpopmin_usec / zpopmin_calls if zpopmin_calls else 0.0,
        claims_per_s=claims_n / steps.wall_s,
        key_bytes_per_claim_step=mem4.per(mem3, claims_n)[1],
        sweep_expired=sweep.units,
        sweep_calls=len(sweep.samples),
        sweep_usec_per_hold=sweep.usec_per_unit(),
        sweep_usec_per_hold_mean=sweep.usec_per_unit_mean(),
        sweep_wall_usec_per_hold=sweep.wall_s * 1e6 / sweep.units,
        audit_ok=report.ok,
        audit_violations=[str(v) for v in report.violations[:5]],
        foreign_evalsha_calls=first.foreign_calls + steps.foreign_calls + sweep.foreign_calls,
        claim_batches=len(steps.samples),
        claim_batches_clean=steps.clean_steps,
        # Every command of the claim script runs at least once per claim; rarer ones in the
        # readings are other clients'.
        claim_commands={
            name: {"calls": calls, "usec": usec}
            for name, (calls, usec) in commands.items()
            if name != "evalsha" and calls >= 0.5
        },
    )


def redis_client(url: str) -> "aioredis.Redis":
    pool = aioredis.BlockingConnectionPool.from_url(
        url,
        decode_responses=True,
        max_connections=POOL_MAX,
        timeout=STORE_TIMEOUT_S,  # wait for a free connection
        socket_timeout=STORE_TIMEOUT_S,
        socket_connect_timeout=5.0,
    )
    return aioredis.Redis.from_pool(pool)


@contextlib.contextmanager
def own_server() -> Iterator[str]:
    """A private redis-server on a spare port, no persistence; stopped and removed after."""
    workdir = tempfile.mkdtemp(prefix="onsale-size-")
    port = spare_port()
    proc = subprocess.Popen(
        [
            "redis-server",
            *("--port", str(port), "--bind", "127.0.0.1", "--dir", workdir),
            *("--save", "", "--appendonly", "no"),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        url = f"redis://127.0.0.1:{port}/0"
        probe = redis.Redis.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)
        try:
            for _ in range(100):
                with contextlib.suppress(redis.ConnectionError):
                    if probe.ping():
                        break
                time.sleep(0.05)
            else:
                raise RuntimeError(f"redis-server on port {port} did not answer")
        finally:
            probe.close()
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


async def server_facts(client: "aioredis.Redis") -> dict[str, str]:
    """What decides the numbers besides the engine: version and small-key encodings."""
    info: dict[str, Any] = await client.info("server")
    facts = {"redis_version": str(info["redis_version"])}
    for name in ("zset-max-listpack-entries", "hash-max-listpack-entries"):
        reply = await client.config_get(name)
        facts[name] = str(reply.get(name))
    return facts


async def run(
    args: argparse.Namespace, url: str, console: Console
) -> tuple[list[SizeResult], dict[str, str]]:
    prefix = f"onsale:bench:{uuid.uuid4().hex[:12]}"
    client = redis_client(url)
    results: list[SizeResult] = []
    try:
        facts = await server_facts(client)
        store = Store(client, prefix=prefix, timeout_s=STORE_TIMEOUT_S)
        sweep_store = Store(
            client,
            scripts=Scripts(client, test_clock=True),
            prefix=prefix,
            timeout_s=STORE_TIMEOUT_S,
        )
        await store.scripts.load_all()  # loaded before any reading
        await sweep_store.scripts.load_all()
        # Open the pool's connections now: a connection opened mid-phase is client memory.
        await asyncio.gather(*(client.ping() for _ in range(POOL_MAX)))
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=console) as progress:
            for size in args.sizes:
                results.append(await measure_size(store, sweep_store, size, args.claims, progress))
                await drop_prefix(client, prefix)
    finally:
        await drop_prefix(client, prefix)
        await client.aclose()
    base = results[0].claim_usec
    for r in results:
        r.claim_ratio = r.claim_usec / base
    return results, facts


def print_table(results: list[SizeResult], claims_n: int, console: Console) -> None:
    t = Table(
        title=f"cost by event size: {claims_n:,} claim steps per size (a login trades its hold "
        f"for the best free seat), {CLAIM_BATCH} in flight; µs from INFO commandstats"
    )
    for col in (
        "seats",
        "bytes/seat\nused_memory\n/ keys",
        "bytes/hold\nused_memory\n/ keys",
        "claim µs\n(median\nbatch)",
        "ZPOPMIN\nµs",
        "claims/s\n(client)",
        "sweep µs\n/ expired\nhold",
        "sweep wall\nµs / expired\nhold",
        "claim µs /\nsmallest\nsize's",
    ):
        t.add_column(col, justify="right")
    for r in results:
        t.add_row(
            f"{r.size:,}",
            f"{r.bytes_per_seat:,.0f} / {r.key_bytes_per_seat:,.0f}",
            f"{r.bytes_per_hold:,.0f} / {r.key_bytes_per_hold:,.0f}",
            f"{r.claim_usec:.1f}{'' if r.claim_batches_clean else ' *'}",
            f"{r.claim_zpopmin_usec:.2f}",
            f"{r.claims_per_s:,.0f}",
            f"{r.sweep_usec_per_hold:.1f}",
            f"{r.sweep_wall_usec_per_hold:.1f}",
            f"{r.claim_ratio:.2f}",
        )
    console.print(t)
    console.print(
        "bytes: the INFO used_memory delta (moves with client buffers too) / the delta of the "
        "event keys' MEMORY USAGE; a hold is net of its seat's free-set entry. * no claim batch "
        "free of other clients' EVALSHA calls"
    )
    for r in results:
        if r.foreign_evalsha_calls:
            console.print(
                f"[yellow]size {r.size:,}: {r.foreign_evalsha_calls:,} EVALSHA calls by other "
                f"clients; {r.claim_batches_clean} of {r.claim_batches} claim batches were free "
                "of them (the medians use those; with none, every number includes other "
                "clients' work); used_memory may be off too (use a quiet server or "
                "--own-server)[/]"
            )
        audit = "clean" if r.audit_ok else "VIOLATED: " + "; ".join(r.audit_violations)
        console.print(f"size {r.size:,}: audit {audit}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--sizes", type=parse_sizes, default=parse_sizes("80,10000,100000,1000000"))
    ap.add_argument("--claims", type=int, default=20_000, help="measured claim steps per size")
    ap.add_argument("--json", default="", help="write the results here")
    ap.add_argument(
        "--own-server",
        action="store_true",
        help="run on a private redis-server, not the shared one",
    )
    args = ap.parse_args()
    if args.claims < 1:
        print("--claims must be >= 1", file=sys.stderr)
        return 2
    if args.own_server and shutil.which("redis-server") is None:
        print("--own-server needs redis-server on PATH", file=sys.stderr)
        return 2
    console = Console()
    with contextlib.ExitStack() as stack:
        if args.own_server:
            url = stack.enter_context(own_server())
        else:
            url = os.environ.get("ONSALE_REDIS_URL", "redis://127.0.0.1:6379/0")
        results, facts = asyncio.run(run(args, url, console))
    print_table(results, args.claims, console)
    if args.json:
        report = {
            "claims": args.claims,
            "own_server": args.own_server,
            "server": facts,
            "sizes": [asdict(r) for r in results],
        }
        Path(args.json).write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    return 0 if all(r.audit_ok for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
