"""How the engine's costs grow with the size of an event, measured on one Redis server.

    python -m loadtest.bench.size_cost [--sizes 80,10000,100000,1000000] [--claims 20000]
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
   usec / calls of cmdstat_fcall, and the table shows the median batch (robust to a burst
   of CPU contention); the commands a script runs are counted too, so ZPOPMIN gets its own
   column. Client side: claims/s over the wall time of the batches.
4. sweep: the test clock (Scripts(test_clock=True) reads test_now_ms from the event hash) is
   set past every deadline, then Store.sweep(batch_max=200) runs until nothing is due. Per
   expired hold: the median sweep call's FCALL usec, and the wall time of all sweep calls.
5. the event's audit (docs/invariants.md, over one snapshot) must be clean.

The claim cost must stay flat: the table shows each size's claim usec over the smallest size's.

Caveat: commandstats and used_memory are server-wide, and CONFIG RESETSTAT would disturb every
other client, so the numbers are differences of readings. Another client's FCALL calls mix
into a reading: a batch whose FCALL call count differs from the calls it made is left out of
the median (and counted in the report); other clients' writes move used_memory. Run it on a
quiet server, or with --own-server (same binary, default configuration, no persistence), which
shares only the machine's CPUs."""

import argparse
import asyncio
import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson
import redis
import redis.asyncio as aioredis
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from engine.store import Store
from engine.store.scripts import Scripts
from loadtest.bench.size_cost_measure import SizeResult, measure_size
from loadtest.bench.size_cost_report import print_table
from loadtest.devstack.services import redis_url
from loadtest.devstack.stack import spare_port

STORE_TIMEOUT_S = 60.0  # generous: the audit of a 1M-seat event reads every seat
UNLINK_BATCH = 500
POOL_MAX = 16


def parse_sizes(text: str) -> list[int]:
    sizes = sorted({int(s) for s in text.split(",") if s.strip()})
    if not sizes or sizes[0] < 2:
        raise argparse.ArgumentTypeError("sizes must be integers >= 2")
    return sizes


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
        url = stack.enter_context(own_server()) if args.own_server else redis_url()
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
