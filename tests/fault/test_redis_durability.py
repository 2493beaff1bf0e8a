"""kill -9 of Redis during a burst with payments, with the persistence the engine requires
(AOF, appendfsync always): after each restart, every confirmation a client was told is still
CONFIRMED, no seat is sold twice, counters agree, every captured charge is a winner or on its
way to a refund, and the sale goes on."""

import asyncio
import contextlib
import random

import pytest

from engine.config.settings import Settings
from engine.model import errors
from engine.model.event_config import EventConfig
from engine.model.holds import ProviderOutcome
from engine.model.states import HoldState
from engine.store import Store
from tests.conftest import seats
from tests.fault.conftest import PrivateRedis
from tests.helpers import wait_until

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def connect(server: PrivateRedis) -> Store:
    settings = Settings(
        redis_url=server.url, redis_timeout_ms=500, redis_connect_timeout_ms=200, redis_pool_max=64
    )
    return Store(settings.redis_client(), timeout_s=1.0)


async def buyer(store: Store, i: int, told: dict[str, str]) -> None:
    hold, charge = f"h{i}", f"c{i}"
    await store.claim("ev", f"u{i}", hold)
    await store.start_charge("ev", hold, f"u{i}", charge, 100)
    result = await store.apply_outcome(
        "ev", ProviderOutcome(f"pe{i}", charge, f"a{i}", f"pi{i}", "CAPTURED", amount=100)
    )
    told[hold] = result.decision  # what the client (and the provider) were told


async def test_told_confirmations_survive_kill_9(durable_redis: PrivateRedis) -> None:
    store = connect(durable_redis)
    await store.create_event(
        "ev", seats(3000), EventConfig(hold_ttl_ms=600_000, quarantine_ms=60_000)
    )
    await store.open_sale("ev")
    told: dict[str, str] = {}
    rng = random.Random(5)
    next_buyer = 0
    for _round in range(3):

        async def run(first: int, s: Store = store) -> None:
            sem = asyncio.Semaphore(32)

            async def one(i: int) -> None:
                async with sem:
                    # A client that saw an error was promised nothing.
                    with contextlib.suppress(errors.StoreUnavailable):
                        await buyer(s, i, told)

            await asyncio.gather(*(one(i) for i in range(first, first + 600)))

        task = asyncio.create_task(run(next_buyer))
        # Kill mid-burst, after this round told its first sale (a slow start, coverage or a
        # busy machine, must not make the kill land before anything was told).
        sold_before = sum(d == "CONFIRMED" for d in told.values())
        await wait_until(lambda n=sold_before: sum(d == "CONFIRMED" for d in told.values()) > n, 30)
        await asyncio.sleep(rng.uniform(0.05, 0.3))
        durable_redis.kill()
        await task
        next_buyer += 600
        await store.client.aclose()
        durable_redis.start()  # same directory: the AOF is replayed
        store = connect(durable_redis)
        confirmed = [h for h, d in told.items() if d == "CONFIRMED"]
        assert confirmed, "the kill came before any sale: the round proves nothing"
        for hold_id in confirmed:
            assert (await store.read.hold("ev", hold_id)).state == HoldState.CONFIRMED
        report = await store.read.audit("ev")
        assert report.ok, report.violations
        avail = await store.read.availability("ev")
        assert avail.sold >= len(confirmed)
    await store.client.aclose()
