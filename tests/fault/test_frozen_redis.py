"""A frozen Redis (SIGSTOP of a private server: its connections stay open, nothing answers) costs
a claim one ONSALE_REDIS_TIMEOUT_MS, not two stacked: the wait for a pooled connection or a
pipeline slot and the command itself share one deadline. Claims arrive while earlier ones are
still stuck (more of them than the pool and the pipeline's in-flight batches); each answers
StoreUnavailable (the API's 503 store_unavailable) within the bound, and claims succeed again
once the server is thawed."""

import asyncio
import contextlib
import signal
import time
from collections.abc import Iterator

import pytest

from engine.config.settings import Settings
from engine.model import errors
from engine.store import Store
from tests.conftest import new_prefix, open_sale
from tests.fault.conftest import PrivateRedis

pytestmark = pytest.mark.redis

TIMEOUT_MS = 500
POOL_MAX = 4
WAVES = 12  # one wave of claims every WAVE_GAP_S: they keep arriving while the first are stuck
WAVE_SIZE = 3
WAVE_GAP_S = 0.08
SLACK = 1.3  # scheduling on a loaded machine; the bound itself is one timeout


@contextlib.contextmanager
def frozen(server: PrivateRedis) -> Iterator[None]:
    assert server.proc is not None
    server.proc.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        server.proc.send_signal(signal.SIGCONT)


async def timed_claim(store: Store, event_id: str, n: int, delay_s: float) -> float:
    """Seconds a claim waited for its StoreUnavailable (any other outcome fails the test)."""
    await asyncio.sleep(delay_s)
    started = time.monotonic()
    with pytest.raises(errors.StoreUnavailable):
        await store.claim(event_id, f"u{n}", f"h{n}")
    return time.monotonic() - started


@pytest.mark.parametrize("autopipeline", [True, False], ids=["autopipeline", "single-calls"])
async def test_a_claim_waits_one_timeout_on_a_frozen_redis(
    private_redis: PrivateRedis, autopipeline: bool
) -> None:
    settings = Settings(
        redis_url=private_redis.url,
        redis_timeout_ms=TIMEOUT_MS,
        redis_connect_timeout_ms=200,
        redis_pool_max=POOL_MAX,
        redis_autopipeline=autopipeline,
    )
    client = settings.redis_client()
    timeout_s = TIMEOUT_MS / 1000
    store = Store(client, prefix=new_prefix(), timeout_s=timeout_s, autopipeline=autopipeline)
    try:
        assert await store.boot()
        sale = await open_sale(store, 200)
        await asyncio.gather(*(store.claim(sale.event_id, f"w{i}", f"w{i}") for i in range(8)))
        with frozen(private_redis):
            waits = await asyncio.gather(
                *(
                    timed_claim(store, sale.event_id, w * WAVE_SIZE + i, w * WAVE_GAP_S)
                    for w in range(WAVES)
                    for i in range(WAVE_SIZE)
                )
            )
        print(f"\nfrozen redis, {len(waits)} claims: longest wait {max(waits):.3f}s")
        assert max(waits) <= timeout_s * SLACK, sorted(waits)[-5:]
        thawed = await store.claim(sale.event_id, "after", "after")
        assert not thawed.replay
        # A stuck claim ran when the server woke, or runs now; either way once.
        first = await store.claim(sale.event_id, "u0", "h0")
        again = await store.claim(sale.event_id, "u0", "h0")
        assert again.replay and (again.hold_id, again.listing) == (first.hold_id, first.listing)
    finally:
        await client.aclose()
