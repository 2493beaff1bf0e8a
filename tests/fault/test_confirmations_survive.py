"""No confirmation a buyer read is ever lost (ADR 0016, 0017). Twenty buyers pay through the
API at once; Redis (no persistence) is killed 0, 20, 50 or 100 ms after the fifth buyer read
CONFIRMED, and comes back empty or from a snapshot older than every sale; in one run the
ledger writer is down for a second before the loss. Then the writer notices, the event is
rebuilt, and every hold a buyer read CONFIRMED is CONFIRMED, with the audit clean."""

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import asyncpg
import httpx
import orjson
import pytest

from api.app import create_app
from api.settings import ApiSettings
from engine.model import keys
from engine.model.event_config import EventConfig
from engine.model.signing import HEADER, sign
from engine.model.states import HoldState
from engine.store import Store
from persistence.rebuild import rebuild
from persistence.writer import LedgerWriter
from tests.conftest import API_TEST_ENV, seats
from tests.fault.conftest import PrivateRedis
from tests.fault.test_redis_durability import connect

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]

SECRET = "whsec-survive-test-0123456789abcdef"
BUYERS, KILL_AFTER_CONFIRMATIONS = 20, 5


class Sale:
    """The API in process on the private Redis; what each buyer read."""

    def __init__(self, http: httpx.AsyncClient, store: Store) -> None:
        self.http, self.store = http, store
        self.read_confirmed: list[str] = []
        self.confirmed_enough = asyncio.Event()
        self.lost = asyncio.Event()  # Redis is being killed: buyers stop asking

    async def buyer(self, i: int) -> None:
        login, hold_id = f"u{i}", f"h{i}"
        token = (await self.http.post("/v1/login", json={"login": login})).json()["token"]
        auth = {"Authorization": f"Bearer {token}"}
        await self.store.claim("ev", login, hold_id)
        charge_id = keys.charge_key("ev", hold_id, login, "k")
        await self.store.start_charge("ev", hold_id, login, charge_id, 100)
        body, headers = capture(charge_id, i)
        for _ in range(200):  # a provider retrying 503s
            r = await self.http.post("/v1/provider/callbacks", content=body, headers=headers)
            if r.status_code == 200 or self.lost.is_set():
                break
            await asyncio.sleep(0.01)
        while not self.lost.is_set():
            r = await self.http.get(f"/v1/events/ev/holds/{hold_id}", headers=auth)
            if r.status_code == 200 and r.json()["state"] == "CONFIRMED":
                self.read_confirmed.append(hold_id)
                if len(self.read_confirmed) >= KILL_AFTER_CONFIRMATIONS:
                    self.confirmed_enough.set()
                return
            await asyncio.sleep(0.005)


def capture(charge_id: str, i: int) -> tuple[bytes, dict[str, str]]:
    body = orjson.dumps(
        {
            "id": f"evt-{i}",
            "type": "charge.captured",
            "data": {
                "attempt_id": f"att-{i}",
                "intent_id": f"pi-{i}",
                "idempotency_key": charge_id,
                "amount": 100,
                "currency": "EUR",
                "status": "captured",
                "metadata": {"event_id": "ev", "charge_id": charge_id},
            },
        }
    )
    return body, {HEADER: sign(SECRET, body, int(time.time())), "Content-Type": "application/json"}


@contextlib.asynccontextmanager
async def api(server: PrivateRedis) -> AsyncIterator[httpx.AsyncClient]:
    env = {
        "ONSALE_REDIS_URL": server.url,
        "ONSALE_REDIS_TIMEOUT_MS": "300",
        **API_TEST_ENV,
        "ONSALE_WEBHOOK_SECRET": SECRET,
        "ONSALE_PROVIDER_URL": "http://127.0.0.1:9",
        "ONSALE_CONFIRM_AFTER": "ledger",
        "ONSALE_DURABLE_WAIT_MS": "100",
    }
    app = create_app(ApiSettings.from_env(env))
    async with (
        app.router.lifespan_context(app),  # type: ignore[attr-defined]
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as http,
    ):
        yield http


@pytest.mark.parametrize(
    ("loss", "after_ms", "writer_pause_s"),
    [*((loss, ms, 0.0) for loss in ("empty", "snapshot") for ms in (0, 20, 50, 100)),
     ("empty", 0, 1.0)],
)  # fmt: skip
async def test_no_confirmation_a_buyer_read_is_lost(
    private_redis: PrivateRedis,
    pool: asyncpg.Pool,
    opened: list[Store],
    loss: str,
    after_ms: int,
    writer_pause_s: float,
) -> None:
    store = connect(private_redis)
    opened.append(store)
    await store.create_event(
        "ev", seats(BUYERS), EventConfig(hold_ttl_ms=600_000, quarantine_ms=60_000)
    )
    await store.open_sale("ev")
    writer = LedgerWriter(store.client, pool, prefix=store.prefix, consumer="w")
    await writer.step("ev")  # the event is in the ledger before anything is sold
    await store.client.save()  # the snapshot a lagging replica would hold
    stop = asyncio.Event()
    writing = asyncio.create_task(writer.run(stop, idle_s=0.02))
    async with api(private_redis) as http:
        sale = Sale(http, store)
        buyers = [asyncio.create_task(sale.buyer(i)) for i in range(BUYERS)]
        await asyncio.wait_for(sale.confirmed_enough.wait(), 20)
        if writer_pause_s:
            stop.set()
            await writing
            await asyncio.sleep(writer_pause_s)  # confirmations decided now are never read
        await asyncio.sleep(after_ms / 1000)
        sale.lost.set()
        if loss == "empty":
            (private_redis.workdir / "dump.rdb").unlink()
        private_redis.kill()
        private_redis.start()
        await asyncio.wait_for(asyncio.gather(*buyers, return_exceptions=True), 30)
        told = list(sale.read_confirmed)  # every CONFIRMED a buyer read, up to the kill
    if not stop.is_set():
        stop.set()
        await writing
    noticed = await LedgerWriter(
        store.client, pool, prefix=store.prefix, consumer="x"
    ).fencer.check()
    if loss == "empty":
        assert noticed.lost == ["ev"]
    else:  # fenced by this check, or already by the running writer's own periodic check
        assert noticed.fenced in ([], ["ev"])
        assert (await store.read.event_fields("ev", "status"))[0] == "fenced"
    async with pool.acquire() as conn:
        await rebuild(store, conn, "ev", force=loss == "snapshot")
    assert len(told) >= KILL_AFTER_CONFIRMATIONS
    for hold_id in told:
        assert (await store.read.hold("ev", hold_id)).state == HoldState.CONFIRMED, hold_id
    report = await store.read.audit("ev")
    assert report.ok, report.violations
