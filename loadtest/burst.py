"""The lean T0 burst generator: N clients, each on its own connection, opened before T0 and
released together at T0 against a small event, every answer and latency recorded.

    python -m loadtest.burst [--clients 10000] [--seats 80] [--workers 2] [--json out.json]

It starts the stack (API with --workers uvicorn workers, simulator, worker) on spare ports,
creates the event, opens one connection per client (a GET /healthz each, kept alive), waits
for every connection, then releases all clients at once: each sends one claim. After the run,
loadtest/invariants.py checks the engine's state and the answers."""

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import redis.asyncio as redis_asyncio
from itsdangerous import URLSafeTimedSerializer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from engine.stack import LocalStack
from engine.store import Store
from loadtest.invariants import check_burst


class BurstClient:
    def __init__(self, base_url: str, token: str) -> None:
        self.session = aiohttp.ClientSession(
            base_url=base_url,
            connector=aiohttp.TCPConnector(limit=1),
            timeout=aiohttp.ClientTimeout(total=60),
        )
        self.headers = {"Authorization": f"Bearer {token}"}
        self.answer = ""
        self.sent = self.done = 0.0

    async def connect(self) -> None:
        async with self.session.get("/healthz") as r:
            await r.read()

    async def claim(self, event_id: str, key: str) -> None:
        self.sent = time.monotonic()
        try:
            async with self.session.post(
                f"/v1/events/{event_id}/holds",
                json={},
                headers={**self.headers, "Idempotency-Key": key},
            ) as r:
                body = await r.read()
                self.answer = (
                    str(r.status)
                    if r.status < 300
                    else orjson.loads(body)["error"]["code"]
                    if r.status < 500
                    else str(r.status)
                )
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.answer = f"transport:{type(exc).__name__}"
        self.done = time.monotonic()


async def run(args: argparse.Namespace, console: Console) -> int:
    redis_url = os.environ.get("ONSALE_REDIS_URL", "redis://127.0.0.1:6379/0")
    prefix = f"onsale:bench:{uuid.uuid4().hex[:8]}"
    stack = LocalStack(
        redis_url=redis_url,
        key_prefix=prefix,
        api_workers=args.workers,
        log_dir=Path(tempfile.mkdtemp(prefix="onsale-burst-")),
    )
    await asyncio.to_thread(stack.start)
    redis = redis_asyncio.from_url(redis_url, decode_responses=True)
    store = Store(redis, prefix=prefix)
    clients: list[BurstClient] = []
    try:
        admin = {"Authorization": f"Bearer {stack.admin_token}"}
        async with (
            aiohttp.ClientSession(base_url=stack.api_url) as http,
            http.post(
                "/v1/admin/events",
                headers=admin,
                json={
                    "event_id": "burst",
                    "opens_at_ms": 0,
                    "hold_ttl_ms": 600_000,
                    "seats": [{"seat_id": f"s{i}", "rank": i} for i in range(args.seats)],
                },
            ) as r,
        ):
            assert r.status == 201, await r.text()
        signer = URLSafeTimedSerializer(stack.token_secret, salt="onsale-login")
        clients = [
            BurstClient(stack.api_url, str(signer.dumps({"l": f"c{i}"})))
            for i in range(args.clients)
        ]
        with Progress(console=console) as progress:
            task = progress.add_task("opening one connection per client", total=len(clients))
            gate = asyncio.Semaphore(500)

            async def open_one(c: BurstClient) -> None:
                async with gate:
                    await c.connect()
                progress.advance(task)

            await asyncio.gather(*(open_one(c) for c in clients))
        release = asyncio.Event()

        async def fire(n: int, c: BurstClient) -> None:
            await release.wait()
            await c.claim("burst", f"k{n}")

        tasks = [asyncio.create_task(fire(n, c)) for n, c in enumerate(clients)]
        await asyncio.sleep(0.2)  # every task is parked on the gate
        t0 = time.monotonic()
        release.set()
        await asyncio.gather(*tasks)
        answers = Counter(c.answer for c in clients)
        verdict = await check_burst(store, "burst", answers, args.clients, args.seats)
    finally:
        for c in clients:
            await c.session.close()
        await asyncio.to_thread(stack.stop)
        async for key in redis.scan_iter(match=f"{prefix}:*"):
            await redis.delete(key)
        await redis.aclose()
    latencies = sorted((c.done - c.sent) * 1000 for c in clients)
    won = [c.done for c in clients if c.answer == "201"]
    result: dict[str, Any] = {
        "clients": args.clients,
        "seats": args.seats,
        "api_workers": args.workers,
        "answers": dict(answers),
        "last_seat_ms": (max(won) - t0) * 1000 if won else None,
        "all_answered_ms": (max(c.done for c in clients) - t0) * 1000,
        "last_sent_ms": (max(c.sent for c in clients) - t0) * 1000,
        "latency_ms": {
            "p50": statistics.median(latencies),
            "p99": latencies[int(len(latencies) * 0.99) - 1],
            "max": latencies[-1],
        },
        "invariants_ok": verdict.ok,
    }
    t = Table(
        title=f"T0 burst: {args.clients:,} clients, one connection each, "
        f"{args.seats} seats, {args.workers} API worker(s)"
    )
    t.add_column("measure")
    t.add_column("value", justify="right")
    for k, n in sorted(answers.items()):
        t.add_row(f"answer {k}", f"{n:,}")
    t.add_row("last seat held (ms after release)", f"{result['last_seat_ms'] or 0:.0f}")
    t.add_row("last request sent (ms after release)", f"{result['last_sent_ms']:.0f}")
    t.add_row("every client answered (ms after release)", f"{result['all_answered_ms']:.0f}")
    lat = result["latency_ms"]
    t.add_row(
        "latency p50 / p99 / max (ms)", f"{lat['p50']:.0f} / {lat['p99']:.0f} / {lat['max']:.0f}"
    )
    console.print(t)
    checks = Table(title="After the run")
    checks.add_column("check")
    checks.add_column("result")
    checks.add_column("detail")
    for name, ok, detail in verdict.checks:
        checks.add_row(name, "[green]ok[/]" if ok else "[red]VIOLATED[/]", detail)
    console.print(checks)
    if args.json:
        await asyncio.to_thread(
            Path(args.json).write_bytes, orjson.dumps(result, option=orjson.OPT_INDENT_2)
        )
    return 0 if verdict.ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=10_000)
    ap.add_argument("--seats", type=int, default=80)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", default="")
    return asyncio.run(run(ap.parse_args(argv), Console()))


if __name__ == "__main__":
    raise SystemExit(main())
