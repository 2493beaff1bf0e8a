"""kill -9 of a private Redis: the store reports StoreUnavailable (never a wrong answer) while it
is down, reloads its scripts after NOSCRIPT when it is back, and the sweeper rides it out."""

import asyncio

import httpx
import pytest

from api.app import create_app
from api.settings import ApiSettings
from engine.config.settings import Settings
from engine.model import errors
from engine.model.event_config import EventConfig
from engine.store import Store
from engine.workers.sweeper import Sweeper
from tests.conftest import API_TEST_ENV, seats
from tests.fault.conftest import PrivateRedis
from tests.helpers import wait_until

pytestmark = pytest.mark.redis


async def test_outage_then_noscript_recovery(private_redis: PrivateRedis) -> None:
    settings = Settings(
        redis_url=private_redis.url, redis_timeout_ms=500, redis_connect_timeout_ms=200
    )
    client = settings.redis_client()
    store = Store(client, timeout_s=1.0)  # production scripts, server clock
    await store.scripts.load_all()
    await store.create_event("ev", seats(3), EventConfig(hold_ttl_ms=60_000, quarantine_ms=60_000))
    await store.open_sale("ev")
    assert (await store.claim("ev", "alice", "h1")).listing == "s00000"

    private_redis.kill()
    with pytest.raises(errors.StoreUnavailable):
        await store.claim("ev", "bob", "h2")

    private_redis.start()  # empty: no data, no library
    assert not await store.scripts.loaded()
    with pytest.raises(errors.EventNotFound):  # FCALL -> not found -> loaded -> runs
        await store.claim("ev", "bob", "h2")
    await store.create_event("ev", seats(3), EventConfig(hold_ttl_ms=60_000, quarantine_ms=60_000))
    await store.open_sale("ev")
    assert (await store.claim("ev", "bob", "h2")).listing == "s00000"
    await client.aclose()


async def test_sweeper_survives_an_outage(private_redis: PrivateRedis) -> None:
    settings = Settings(
        redis_url=private_redis.url, redis_timeout_ms=300, redis_connect_timeout_ms=200
    )
    client = settings.redis_client()
    store = Store(client, timeout_s=0.5)
    await store.create_event("ev", seats(2), EventConfig(hold_ttl_ms=50, quarantine_ms=50))
    await store.open_sale("ev")
    sweeper = Sweeper(store, interval_ms=20)
    stop = asyncio.Event()
    task = asyncio.create_task(sweeper.run(stop))
    private_redis.kill()
    await wait_until(lambda: sweeper.stats.errors >= 2)
    private_redis.start()
    await store.create_event("ev", seats(2), EventConfig(hold_ttl_ms=50, quarantine_ms=50))
    await store.open_sale("ev")
    await store.claim("ev", "alice", "h1")
    await wait_until(lambda: sweeper.stats.expired == 1)
    stop.set()
    stats = await asyncio.wait_for(task, 10)
    assert stats.errors >= 2 and stats.expired == 1
    assert (await store.read.availability("ev")).free == 2
    await client.aclose()


async def test_pooled_connections_to_a_restarted_redis_are_replaced_not_failed(
    private_redis: PrivateRedis,
) -> None:
    """Redis restarts while the store is idle: every pooled connection is dead, and the first
    calls after it are answered by the new server, not 503 (reads reconnect through the
    client's retry, script calls are sent once more on a fresh connection)."""
    settings = Settings(
        redis_url=private_redis.url, redis_timeout_ms=1000, redis_connect_timeout_ms=200
    )
    client = settings.redis_client()
    store = Store(client, timeout_s=2.0)
    await store.create_event("ev", seats(40), EventConfig(hold_ttl_ms=60_000, quarantine_ms=60_000))
    await store.open_sale("ev")
    await asyncio.gather(*(store.claim("ev", f"u{i}", f"h{i}") for i in range(20)))
    await asyncio.gather(*(store.read.availability("ev") for _ in range(20)))
    private_redis.kill()
    private_redis.start()  # empty, while nobody was calling
    # The first call after it is a script call on a dead pooled connection, answered by the new
    # server: redis-py (8 and later) finds the closed socket when it takes the connection from
    # the pool and reconnects; an older one, or a socket whose close has not arrived yet, fails
    # on first use and the pipeline sends the batch once more (so 0 or 1 resends, never 503).
    with pytest.raises(errors.Recovering):  # this process sold it: recovering, not "not found"
        await store.claim("ev", "early", "e0")
    assert store.pipeline is not None and store.pipeline.stats.resent <= 1
    await store.create_event("ev", seats(40), EventConfig(hold_ttl_ms=60_000, quarantine_ms=60_000))
    await store.open_sale("ev")
    reads = await asyncio.gather(*(store.read.availability("ev") for _ in range(20)))
    assert {a.free for a in reads} == {40}
    claims = await asyncio.gather(*(store.claim("ev", f"v{i}", f"k{i}") for i in range(20)))
    assert len({c.listing for c in claims}) == 20
    await client.aclose()


async def test_the_api_boots_with_redis_down_and_serves_once_it_is_back(
    private_redis: PrivateRedis,
) -> None:
    """Redis down at boot is an outage like any other: the API starts, answers 503 (readiness
    too) instead of exiting, and serves as soon as Redis answers."""
    private_redis.kill()
    env = {
        "ONSALE_REDIS_URL": private_redis.url,
        "ONSALE_REDIS_TIMEOUT_MS": "300",
        "ONSALE_REDIS_CONNECT_TIMEOUT_MS": "200",
        **API_TEST_ENV,
        "ONSALE_WEBHOOK_SECRET": "whs-Lr5tY8cV2nQ7mX1zK4bD9fH3jP6wS0a",
        "ONSALE_PROVIDER_URL": "http://127.0.0.1:9",
    }
    app = create_app(ApiSettings.from_env(env))
    async with (
        app.router.lifespan_context(app),  # type: ignore[attr-defined]
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as http,
    ):
        assert (await http.get("/readyz")).status_code == 503
        token = (await http.post("/v1/login", json={"login": "ann"})).json()["token"]
        auth = {"Authorization": f"Bearer {token}"}
        down = await http.post("/v1/events/ev/holds", json={}, headers=auth)
        assert (down.status_code, down.json()["error"]["code"]) == (503, "store_unavailable")
        private_redis.start()
        settings = Settings(redis_url=private_redis.url)
        store = Store(settings.redis_client())
        await store.create_event(
            "ev", seats(2), EventConfig(hold_ttl_ms=60_000, quarantine_ms=60_000)
        )
        await store.open_sale("ev")
        assert (await http.get("/readyz")).status_code == 200
        claimed = await http.post("/v1/events/ev/holds", json={}, headers=auth)
        assert claimed.status_code == 201, claimed.text
        await store.client.aclose()
