"""The sold-out memory when its subscription breaks (ADR 0012), on a private Redis: a killed
subscriber connection or a killed server stops every answer from memory at once, a restock
published while nobody listened cannot leave a stale memory behind, and the listener comes
back by itself."""

import pytest
import redis.asyncio as aioredis

from engine.config.settings import Settings
from engine.gate.claims import GatedClaims
from engine.gate.soldout import SoldOutMemory
from engine.model import errors
from engine.model.event_config import EventConfig
from engine.store import Store
from tests.conftest import seats
from tests.fault.conftest import PrivateRedis
from tests.helpers import wait_until

pytestmark = pytest.mark.redis


async def setup(server: PrivateRedis) -> tuple[Store, SoldOutMemory, "aioredis.Redis"]:
    settings = Settings(redis_url=server.url, redis_timeout_ms=500, redis_connect_timeout_ms=200)
    client = settings.redis_client()
    store = Store(client, timeout_s=1.0)
    memory = SoldOutMemory(client, store.prefix, ttl_s=30.0)
    await memory.start()
    await wait_until(lambda: memory.listening)
    await store.create_event("ev", seats(1), EventConfig(hold_ttl_ms=60_000, quarantine_ms=60_000))
    await store.open_sale("ev")
    await store.claim("ev", "winner", "w1")
    return store, memory, client


async def remembered(store: Store, memory: SoldOutMemory, login: str) -> None:
    claims = GatedClaims(store, memory)
    before = memory.stats.entered
    with pytest.raises(errors.SoldOut):
        await claims.claim("ev", login, f"{login}-1")
    await wait_until(lambda: memory.stats.entered > before)
    answered = memory.stats.answered
    with pytest.raises(errors.SoldOut):
        await claims.claim("ev", login, f"{login}-2")
    assert memory.stats.answered == answered + 1


async def test_killed_subscriber_stops_memory_and_missed_restock_is_harmless(
    private_redis: PrivateRedis,
) -> None:
    store, memory, client = await setup(private_redis)
    claims = GatedClaims(store, memory)
    await remembered(store, memory, "late")
    admin = aioredis.from_url(private_redis.url, decode_responses=True)
    subscribed = memory.stats.subscriptions
    assert await admin.client_kill_filter(_type="pubsub") == 1
    # The listener notices: it stops, or the client reconnects and resubscribes at once; either
    # way everything remembered is forgotten.
    await wait_until(
        lambda: not memory.listening or memory.stats.subscriptions > subscribed, timeout_s=2.0
    )
    # While nobody listens, a seat comes back: its restock message is lost.
    await store.release("ev", "w1", "winner")
    answered = memory.stats.answered
    got = await claims.claim("ev", "second", "s1")  # asks Redis: not refused from memory
    assert got.listing == "s00000" and memory.stats.answered == answered
    await wait_until(lambda: memory.listening, timeout_s=5.0)  # re-subscribed by itself
    await remembered(store, memory, "third")  # and remembering again
    await memory.stop()
    await admin.aclose()
    await client.aclose()


async def test_killed_server_answers_unavailable_not_sold_out(
    private_redis: PrivateRedis,
) -> None:
    store, memory, client = await setup(private_redis)
    claims = GatedClaims(store, memory)
    await remembered(store, memory, "late")
    private_redis.kill()
    await wait_until(lambda: not memory.listening, timeout_s=2.0)
    with pytest.raises(errors.StoreUnavailable):
        await claims.claim("ev", "late", "late-3")
    private_redis.start()
    await wait_until(lambda: memory.listening, timeout_s=15.0)
    await memory.stop()
    await client.aclose()
