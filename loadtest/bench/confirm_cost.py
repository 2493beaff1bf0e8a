"""What telling a sale only once the ledger holds it costs (ADR 0016), measured side by side.

    python -m loadtest.bench.confirm_cost [--sales 200] [--concurrency 20]

The API in process (ASGI, no sockets) on the Redis of ONSALE_REDIS_URL and a throwaway ledger
database on ONSALE_PG_DSN's server, with the ledger writer running beside it as the worker would
(`ONSALE_LEDGER_IDLE_MS`, 100 ms). The same purchase twice, once per ONSALE_CONFIRM_AFTER: a
buyer holds a seat and has a charge in flight; the provider's capture callback arrives; we time
(a) until the callback is acknowledged 200 and (b) until the buyer reads CONFIRMED. Claims are
timed too: the claim path must not change."""

import argparse
import asyncio
import os
import secrets
import statistics
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import httpx
import orjson
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from api.app import create_app
from api.settings import ApiSettings
from engine.model import keys
from engine.model.event_config import EventConfig
from engine.model.holds import SeatSpec
from engine.model.signing import HEADER, sign
from engine.store import Store
from loadtest.devstack.scratch import store_and_ledger
from persistence.writer import LedgerWriter

SECRET = "whsec-confirm-cost-0123456789abcdef"
PRICE = 4500


@asynccontextmanager
async def api(prefix: str, confirm_after: str) -> AsyncIterator[httpx.AsyncClient]:
    env = {
        **os.environ,
        "ONSALE_KEY_PREFIX": prefix,
        "ONSALE_DEMO_LOGIN": "1",
        "ONSALE_TOKEN_SECRET": secrets.token_urlsafe(32),
        "ONSALE_ADMIN_TOKEN": secrets.token_urlsafe(32),
        "ONSALE_WEBHOOK_SECRET": SECRET,
        "ONSALE_PROVIDER_URL": "http://127.0.0.1:9",
        "ONSALE_CONFIRM_AFTER": confirm_after,
        # Every buyer logs in from the one in-process client address: no per-address limit.
        "ONSALE_ADDRESS_PER_S": "0",
    }
    app = create_app(ApiSettings.from_env(env))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as http,
    ):
        yield http


def capture(event_id: str, charge_id: str, n: int) -> tuple[bytes, dict[str, str]]:
    body = orjson.dumps(
        {
            "id": f"evt-{n}",
            "type": "charge.captured",
            "data": {
                "attempt_id": f"att-{charge_id.rsplit('~', 1)[1]}",
                "intent_id": f"pi-{charge_id.rsplit('~', 1)[1]}",
                "idempotency_key": charge_id,
                "amount": PRICE,
                "currency": "EUR",
                "status": "captured",
                "metadata": {"event_id": event_id, "charge_id": charge_id},
            },
        }
    )
    return body, {HEADER: sign(SECRET, body, int(time.time())), "Content-Type": "application/json"}


async def one_sale(
    http: httpx.AsyncClient, store: Store, event_id: str, n: int, times: dict[str, list[float]]
) -> None:
    login = f"b{n}"
    token = (await http.post("/v1/login", json={"login": login})).json()["token"]
    auth = {"Authorization": f"Bearer {token}"}
    began = time.perf_counter()
    claimed = await http.post(f"/v1/events/{event_id}/holds", json={}, headers=auth)
    times["claim"].append((time.perf_counter() - began) * 1000)
    assert claimed.status_code == 201, claimed.text
    hold_id = claimed.json()["hold_id"]
    charge_id = keys.charge_key(event_id, hold_id, login, "k")
    await store.start_charge(event_id, hold_id, login, charge_id, PRICE)
    body, headers = capture(event_id, charge_id, n)
    began = time.perf_counter()
    for _attempt in range(100):  # a provider retrying a 503
        r = await http.post("/v1/provider/callbacks", content=body, headers=headers)
        if r.status_code == 200:
            break
        assert r.status_code == 503, r.text
    times["callback acknowledged"].append((time.perf_counter() - began) * 1000)
    while True:
        r = await http.get(f"/v1/events/{event_id}/holds/{hold_id}", headers=auth)
        assert r.status_code == 200, r.text
        if r.json()["state"] == "CONFIRMED":
            break
        await asyncio.sleep(0.01)
    times["buyer reads CONFIRMED"].append((time.perf_counter() - began) * 1000)


async def run_mode(
    store: Store, pool: asyncpg.Pool, mode: str, sales: int, concurrency: int, progress: Progress
) -> dict[str, list[float]]:
    event_id = f"cc-{mode}-{uuid.uuid4().hex[:6]}"
    seats = [SeatSpec(f"s{i}", i, "A") for i in range(sales)]
    await store.create_event(
        event_id, seats, EventConfig(hold_ttl_ms=600_000, quarantine_ms=600_000)
    )
    await store.open_sale(event_id)
    times: dict[str, list[float]] = {
        "claim": [],
        "callback acknowledged": [],
        "buyer reads CONFIRMED": [],
    }
    writer = LedgerWriter(store.client, pool, prefix=store.prefix, consumer=f"cc-{mode}")
    stop = asyncio.Event()
    running = asyncio.create_task(writer.run(stop, idle_s=0.1))
    task = progress.add_task(f"ONSALE_CONFIRM_AFTER={mode}", total=sales)
    gate = asyncio.Semaphore(concurrency)

    async def sale(n: int) -> None:
        async with gate:
            await one_sale(http, store, event_id, n, times)
            progress.advance(task)

    async with api(store.prefix, mode) as http:
        await asyncio.gather(*(sale(n) for n in range(sales)))
    stop.set()
    await running
    return times


def row(values: list[float]) -> str:
    q = statistics.quantiles(values, n=100)
    return f"{statistics.median(values):.1f} / {q[94]:.1f} / {q[98]:.1f} / {max(values):.1f}"


async def main_async(sales: int, concurrency: int) -> None:
    console = Console()
    async with store_and_ledger("confirm_cost") as (store, pool):
        results = {}
        with Progress(console=console) as progress:
            for mode in ("redis", "ledger"):
                results[mode] = await run_mode(store, pool, mode, sales, concurrency, progress)
    table = Table(title=f"{sales} sales, {concurrency} at a time (ms: p50 / p95 / p99 / max)")
    table.add_column("measured")
    for mode in results:
        table.add_column(f"told after: {mode}")
    for name in results["redis"]:
        table.add_row(name, *(row(results[mode][name]) for mode in results))
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sales", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main_async(args.sales, args.concurrency))


if __name__ == "__main__":
    main()
