"""A sale is told only once the ledger holds it (ADR 0016): the buyer reads CONFIRMING and the
provider's capture callback is answered 503 (it retries) until the ledger writer has committed
the sale's records; then CONFIRMED and 200. The API in process on real Redis and PostgreSQL."""

import time
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import orjson
import pytest

from api.app import create_app
from api.settings import ApiSettings
from engine.model import keys
from engine.model.ledger_progress import LEDGER_GROUP as GROUP
from engine.model.signing import HEADER, sign
from engine.store import Store
from persistence.writer import LedgerWriter
from tests.conftest import API_TEST_ENV, REDIS_URL, Sale, open_sale
from tests.pg import migrated_pool

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

SECRET = "whsec-durable-test-0123456789abcdef"
PRICE = 4500


@pytest.fixture
async def pool() -> AsyncIterator[asyncpg.Pool]:
    async with migrated_pool() as p:
        yield p


def api_env(store: Store, confirm_after: str) -> dict[str, str]:
    return {
        "ONSALE_REDIS_URL": REDIS_URL,
        "ONSALE_KEY_PREFIX": store.prefix,
        **API_TEST_ENV,
        "ONSALE_WEBHOOK_SECRET": SECRET,
        "ONSALE_PROVIDER_URL": "http://127.0.0.1:9",
        "ONSALE_CONFIRM_AFTER": confirm_after,
        "ONSALE_DURABLE_WAIT_MS": "200",
    }


class Buyer:
    """The API in process, one buyer who holds h1 and whose charge is CHARGING."""

    def __init__(self, http: httpx.AsyncClient, sale: Sale, charge_id: str, token: str) -> None:
        self.http, self.sale, self.charge_id = http, sale, charge_id
        self.auth = {"Authorization": f"Bearer {token}"}

    async def state(self) -> str:
        r = await self.http.get(f"/v1/events/{self.sale.event_id}/holds/h1", headers=self.auth)
        assert r.status_code == 200, r.text
        return str(r.json()["state"])

    async def metric(self, name: str) -> float:
        admin = {"Authorization": f"Bearer {API_TEST_ENV['ONSALE_ADMIN_TOKEN']}"}
        text = (await self.http.get("/metrics", headers=admin)).text
        line = next(row for row in text.splitlines() if row.startswith(name + "{"))
        assert f'event="{self.sale.event_id}"' in line, line
        return float(line.rsplit(" ", 1)[1])

    async def capture_callback(self) -> httpx.Response:
        body = orjson.dumps(
            {
                "id": "evt-capture-1",
                "type": "charge.captured",
                "data": {
                    "attempt_id": "att-1",
                    "intent_id": "pi-1",
                    "idempotency_key": self.charge_id,
                    "amount": PRICE,
                    "currency": "EUR",
                    "status": "captured",
                    "metadata": {"event_id": self.sale.event_id, "charge_id": self.charge_id},
                },
            }
        )
        headers = {HEADER: sign(SECRET, body, int(time.time())), "Content-Type": "application/json"}
        return await self.http.post("/v1/provider/callbacks", content=body, headers=headers)


async def paying_buyer(store: Store, confirm_after: str) -> AsyncIterator[Buyer]:
    sale = await open_sale(store, 2)
    await store.claim(sale.event_id, "ann", "h1")
    charge_id = keys.charge_key(sale.event_id, "h1", "ann", "k")
    await store.start_charge(sale.event_id, "h1", "ann", charge_id, PRICE)
    app = create_app(ApiSettings.from_env(api_env(store, confirm_after)))
    async with (
        app.router.lifespan_context(app),  # type: ignore[attr-defined]
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as http,
    ):
        r = await http.post("/v1/login", json={"login": "ann"})
        yield Buyer(http, sale, charge_id, r.json()["token"])


@pytest.fixture
async def buyer(real_store: Store) -> AsyncIterator[Buyer]:
    async for b in paying_buyer(real_store, "ledger"):
        yield b


async def drain(writer: LedgerWriter, event_id: str) -> None:
    while await writer.step(event_id):
        pass


async def test_the_sale_is_told_only_once_the_ledger_holds_it(
    buyer: Buyer, real_store: Store, pool: asyncpg.Pool
) -> None:
    event_id = buyer.sale.event_id
    first = await buyer.capture_callback()
    assert first.status_code == 503, first.text  # no writer yet: the provider must retry
    assert first.json()["error"]["code"] == "not_yet_durable"
    assert first.headers["Retry-After"] == "1"
    assert (await real_store.read.hold(event_id, "h1")).state == "CONFIRMED"  # decided
    assert await buyer.state() == "CONFIRMING"  # ... but not told

    # A writer takes the batch and dies before its commit: still not durable.
    outbox = keys.event_key(event_id, "outbox", real_store.prefix)
    await real_store.client.xgroup_create(outbox, GROUP, id="0", mkstream=True)
    await real_store.client.xreadgroup(GROUP, "dead", {outbox: ">"}, count=1000)
    assert await buyer.state() == "CONFIRMING"
    assert (await buyer.capture_callback()).status_code == 503
    behind = await buyer.metric("onsale_ledger_behind_entries")
    assert behind == len(await real_store.read.outbox(event_id)) > 0  # the lag shows, from Redis

    writer = LedgerWriter(
        real_store.client, pool, prefix=real_store.prefix, consumer="live", claim_idle_ms=0
    )
    await drain(writer, event_id)
    assert await buyer.state() == "CONFIRMED"
    assert await buyer.metric("onsale_ledger_behind_entries") == 0
    again: dict[str, Any] = (await buyer.capture_callback()).json()
    assert (again["decision"], again["duplicate"]) == ("CONFIRMED", True)
    async with pool.acquire() as conn:
        row = await conn.fetchrow("select state, winner from holds where hold_id = 'h1'")
    assert (row["state"], row["winner"]) == ("CONFIRMED", buyer.charge_id)


async def test_without_a_ledger_the_sale_is_told_at_once(real_store: Store) -> None:
    async for b in paying_buyer(real_store, "redis"):
        r = await b.capture_callback()
        assert r.status_code == 200 and r.json()["decision"] == "CONFIRMED"
        assert await b.state() == "CONFIRMED"


async def test_a_sale_the_ledger_refused_is_never_told(
    buyer: Buyer, real_store: Store, pool: asyncpg.Pool
) -> None:
    """The ledger already holds another sale of the seat (say, from before a Redis that went
    back in time): it refuses this one, and the buyer never reads CONFIRMED."""
    event_id = buyer.sale.event_id
    seat = (await real_store.read.hold(event_id, "h1")).listing
    async with pool.acquire() as conn:
        await conn.execute("insert into events (event_id) values ($1)", event_id)
        await conn.execute(
            "insert into holds (event_id, hold_id, seat_id, login, state, winner, policy,"
            " decided_at_ms, stream_ms, stream_seq) values ($1, 'other', $2, 'zed',"
            " 'CONFIRMED', 'cz', 'quarantine', 1, 1, 0)",
            event_id,
            seat,
        )
    assert (await buyer.capture_callback()).status_code == 503
    writer = LedgerWriter(real_store.client, pool, prefix=real_store.prefix, consumer="w")
    await drain(writer, event_id)
    assert writer.stats.alerts >= 1
    assert await buyer.state() == "CONFIRMING"
    assert (await buyer.capture_callback()).status_code == 503


async def test_the_ledger_lag_counts_only_entries_after_the_last_delivered_one(
    real_store: Store,
) -> None:
    """A promoted replica (or a restarted server) can report a consumer group's lag for a
    stream whose last entry the group has delivered (its entries-read count is lost): the
    ledger's position reads no entry behind then, and counts the real ones once more come."""
    sale = await open_sale(real_store, 5)
    for i in range(3):  # three decisions in the outbox
        await real_store.claim(sale.event_id, f"u{i}", f"h{i}")
        await real_store.release(sale.event_id, f"h{i}", f"u{i}")
    stream = keys.event_key(sale.event_id, "outbox", real_store.prefix)
    await real_store.client.xgroup_create(stream, GROUP, id="$")  # everything delivered
    # What a promoted replica says: delivered up to the last entry, but entries-read lost.
    await real_store.client.execute_command("XGROUP", "SETID", stream, GROUP, "$", "ENTRIESREAD", 1)
    [group] = await real_store.client.xinfo_groups(stream)
    assert int(group["lag"]) > 0  # Redis's own figure is wrong here
    progress = await real_store.read.ledger_progress(sale.event_id)
    assert (progress.behind, progress.oldest_ms) == (0, 0)
    await real_store.claim(sale.event_id, "u9", "h9")  # a new decision: really behind now
    await real_store.release(sale.event_id, "h9", "u9")
    progress = await real_store.read.ledger_progress(sale.event_id)
    assert progress.behind >= 1 and progress.oldest_ms > 0
