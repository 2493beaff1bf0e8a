"""A burst of signed provider callbacks, all at once, beside a trivial POST burst of the same
size on the same route, in one run (docs/benchmarks.md).

    python -m loadtest.bench.callback_burst [--callbacks 1000] [--workers 2] [--rounds 2]
        [--outcome declined|captured] [--json F]

One stack (API with `--workers` processes, worker, a provider simulator that delivers none of
its own callbacks: `--loss-rate 1`), sales answered once Redis decided
(`ONSALE_CONFIRM_AFTER=redis`, no ledger wait). `--callbacks` buyers each claim a seat and start
a charge; the simulator's record of each attempt is read back, and each charge's outcome is
signed as the simulator signs it.
Then, per round, two bursts of that many requests, every one on its own connection, sent at once:
the same bodies with a wrong signature (401 `bad_signature`: the route's least work, the
"trivial POST" reference), and the signed callbacks (each decides its charge: DECLINED or
CAPTURED). A round's second signed burst is the same callbacks again: duplicates, answered from
the record. Reported per burst: every answer's status, and the time from the burst's start to
each answer (p50, p99, the last), and the API processes' CPU per request."""

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import orjson
from rich.console import Console
from rich.progress import track
from rich.table import Table

from api.identity import DemoTokens
from engine.model.signing import HEADER, sign
from loadtest.bench.cpu_meter import group_cpu_s
from loadtest.devstack.stack import LocalStack

EVENT = "cbburst"
STATUS = {"declined": "charge.declined", "captured": "charge.captured"}
SETUP_CONCURRENCY = 32


async def setup(stack: LocalStack, n: int, outcome: str) -> list[bytes]:
    """`n` holds, each with a charge started; the outcome message of each (unsigned body)."""
    tokens = DemoTokens(stack.token_secret, ttl_s=3_600)
    gate = asyncio.Semaphore(SETUP_CONCURRENCY)
    async with (
        httpx.AsyncClient(base_url=stack.api_url, timeout=60) as api,
        httpx.AsyncClient(base_url=stack.sim_url, timeout=60) as sim,
    ):

        async def one(i: int) -> bytes:
            auth = {"Authorization": f"Bearer {tokens.issue(f'cb{i}')}"}
            async with gate:
                r = await api.post(f"/v1/events/{EVENT}/holds", json={}, headers=auth)
                assert r.status_code == 201, r.text
                hold = r.json()["hold_id"]
                r = await api.post(
                    f"/v1/events/{EVENT}/holds/{hold}/charges", json={}, headers=auth
                )
                assert r.status_code == 202, r.text
                r = await sim.get(f"/v1/test/keys/{r.json()['charge_id']}")
                assert r.status_code == 200, r.text
            data: dict[str, Any] = {**r.json(), "status": outcome}
            message = {
                "id": f"evt_burst_{uuid.uuid4().hex}",
                "type": STATUS[outcome],
                "created": int(time.time()),
                "data": data,
            }
            return orjson.dumps(message)

        return list(await asyncio.gather(*(one(i) for i in range(n))))


async def burst(url: str, requests: list[tuple[bytes, dict[str, str]]]) -> dict[str, Any]:
    """Every request on its own connection, all sent at once (each waits for its connection,
    then for its answer): the answers' statuses and times from the burst's start."""
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        began = time.perf_counter()

        async def one(body: bytes, headers: dict[str, str]) -> tuple[int, float]:
            async with session.post(url, data=body, headers=headers) as r:
                await r.read()
                return r.status, time.perf_counter() - began

        answers = await asyncio.gather(*(one(b, h) for b, h in requests))
    times = sorted(t for _s, t in answers)
    return {
        "statuses": dict(Counter(str(s) for s, _t in answers)),
        "p50_ms": statistics.median(times) * 1000,
        "p99_ms": times[max(0, int(len(times) * 0.99) - 1)] * 1000,
        "last_ms": times[-1] * 1000,
    }


def signed(secret: str, bodies: list[bytes], forged: bool) -> list[tuple[bytes, dict[str, str]]]:
    now = int(time.time())
    key = "not-the-secret" if forged else secret
    return [(b, {HEADER: sign(key, b, now), "Content-Type": "application/json"}) for b in bodies]


def measured(
    stack: LocalStack, url: str, requests: list[tuple[bytes, dict[str, str]]]
) -> dict[str, Any]:
    api = [stack.pid("api")]
    before = group_cpu_s(api)
    row = asyncio.run(burst(url, requests))
    return row | {"api_us": (group_cpu_s(api) - before) * 1e6 / len(requests)}


def run(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    stack = LocalStack(
        redis_url=args.redis_url,
        key_prefix=f"onsale:bench:{uuid.uuid4().hex[:8]}",
        log_dir=Path(tempfile.mkdtemp()),
        api_workers=args.workers,
        sim_args=("--loss-rate", "1", "--decline-rate", "0", "--fail-rate", "0"),
        extra_env={"ONSALE_CLAIMS_PER_S": "0", "ONSALE_CHARGES_PER_S": "0"},
    )
    stack.start()
    rows: dict[str, dict[str, Any]] = {}
    try:
        stack.create_event(EVENT, args.callbacks, hold_ttl_ms=600_000)
        bodies = asyncio.run(setup(stack, args.callbacks, args.outcome))
        url = f"{stack.api_url}/v1/provider/callbacks"
        for r in track(range(args.rounds), description="bursts"):
            rows[f"trivial {r + 1}"] = measured(
                stack, url, signed(stack.webhook_secret, bodies, True)
            )
            name = "callbacks" if r == 0 else f"duplicates {r}"
            rows[name] = measured(stack, url, signed(stack.webhook_secret, bodies, False))
    finally:
        stack.stop()
    return rows


def report(args: argparse.Namespace, rows: dict[str, dict[str, Any]]) -> None:
    t = Table(
        title=f"{args.callbacks:,} signed {args.outcome.upper()} callbacks at once, "
        f"{args.workers} API processes, each on its own connection"
    )
    for col in ("burst", "answers", "p50 ms", "p99 ms", "last ms", "API CPU µs/request"):
        t.add_column(col, justify="left" if col in ("burst", "answers") else "right")
    for name, row in rows.items():
        statuses = ", ".join(f"{n} x {s}" for s, n in sorted(row["statuses"].items()))
        t.add_row(
            name, statuses, f"{row['p50_ms']:,.0f}", f"{row['p99_ms']:,.0f}",
            f"{row['last_ms']:,.0f}", f"{row['api_us']:,.0f}",
        )  # fmt: skip
    Console().print(t)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--callbacks", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--outcome", choices=tuple(STATUS), default="declined")
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    rows = run(args)
    report(args, rows)
    if args.json:
        Path(args.json).write_bytes(orjson.dumps({"outcome": args.outcome, "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
