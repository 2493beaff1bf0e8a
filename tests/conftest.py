"""Shared fixtures. Every test gets its own key prefix (onsale:test:<random>) and deletes its
keys afterwards, so tests never see leftovers and can share one Redis with anything else."""

import os
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import fakeredis
import pytest
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from engine.model.event_config import EventConfig
from engine.model.holds import SeatSpec
from engine.model.states import LatePolicy, ReversalPolicy
from engine.store import Store
from engine.store.scripts import Scripts
from loadtest.devstack.cluster import LocalCluster

REDIS_URL = os.environ.get("ONSALE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

# What an API booted from its environment in a test needs besides Redis and the provider: the
# demo login, and secrets strong enough for boot's check (weak ones are refused).
API_TEST_ENV = {
    "ONSALE_DEMO_LOGIN": "1",
    "ONSALE_TOKEN_SECRET": "tok-Zq8fT3mWc1xLp6vRb9nKy4hGd7sJa2E",
    "ONSALE_ADMIN_TOKEN": "adm-Hx4kP9sQe2vN7wB1cT6yM3rJ8uF5gL0",
}


@dataclass
class Sale:
    """A store plus one open event, with the test clock at hand."""

    store: Store
    event_id: str

    async def at(self, now_ms: int) -> None:
        """Freeze the test clock of this event at `now_ms` (scripts built with test_clock)."""
        assert self.store.scripts.test_clock, "needs a store built with the test clock"
        await self.store.client.hset(self.store.keys(self.event_id)[0], "test_now_ms", now_ms)

    async def audit_ok(self) -> None:
        report = await self.store.read.audit(self.event_id)
        assert report.ok, report.violations


def seats(n: int, section: str = "A") -> list[SeatSpec]:
    return [SeatSpec(f"s{i:05d}", float(i), section) for i in range(n)]


async def open_sale(
    store: Store,
    n_seats: int,
    *,
    hold_ttl_ms: int = 480_000,
    quarantine_ms: int = 900_000,
    policy: LatePolicy = LatePolicy.QUARANTINE,
    event_id: str | None = None,
    now_ms: int | None = None,
    reversal_policy: ReversalPolicy = ReversalPolicy.MANUAL,
) -> Sale:
    event_id = event_id or f"ev-{uuid.uuid4().hex[:8]}"
    await store.create_event(
        event_id,
        seats(n_seats),
        EventConfig(
            hold_ttl_ms=hold_ttl_ms,
            quarantine_ms=quarantine_ms,
            policy=policy,
            reversal_policy=reversal_policy,
        ),
    )
    sale = Sale(store, event_id)
    if now_ms is not None:
        await sale.at(now_ms)
    await store.open_sale(event_id)
    return sale


def new_prefix() -> str:
    return f"onsale:test:{uuid.uuid4().hex[:12]}"


async def _drop_prefix(client: "aioredis.Redis", prefix: str) -> None:
    async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
        await client.delete(key)


@pytest.fixture
def redis_url() -> str:
    return REDIS_URL


def _real_client() -> "aioredis.Redis":
    return aioredis.from_url(
        REDIS_URL,
        decode_responses=True,
        socket_timeout=10,
        socket_connect_timeout=5,
        max_connections=512,
    )


async def _real_store() -> tuple[Store, "aioredis.Redis"]:
    client = _real_client()
    try:
        await client.ping()
    except Exception as exc:  # an environment problem: say so loudly, never skip
        pytest.fail(f"Redis at {REDIS_URL} not reachable ({exc!r}); run `make test`")
    store = Store(client, scripts=Scripts(client, test_clock=True), prefix=new_prefix())
    await store.scripts.load_all()
    return store, client


def _fake_store() -> tuple[Store, "aioredis.Redis"]:
    client = fakeredis.aioredis.FakeRedis(server=fakeredis.FakeServer(), decode_responses=True)
    return Store(client, scripts=Scripts(client, test_clock=True), prefix=new_prefix()), client


@pytest.fixture
async def real_store() -> AsyncIterator[Store]:
    """A store on real Redis with the test clock, under a private prefix."""
    store, client = await _real_store()
    yield store
    await _drop_prefix(client, store.prefix)
    await client.aclose()


@pytest.fixture
async def fake_store() -> AsyncIterator[Store]:
    """A store on fakeredis (Lua 5.1 via lupa) with the test clock: no network."""
    store, client = _fake_store()
    yield store
    await client.aclose()


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[str]:
    """The URL of a Redis Cluster: ONSALE_TEST_REDIS_CLUSTER_URL when set, else a private one
    (3 primaries, 1 replica each) started once for the session on spare ports."""
    given = os.environ.get("ONSALE_TEST_REDIS_CLUSTER_URL")
    if given:
        yield given
        return
    with tempfile.TemporaryDirectory(prefix="onsale-cluster-") as workdir:
        cluster = LocalCluster(Path(workdir))
        try:
            cluster.start()
            yield cluster.url
        finally:
            cluster.stop()


def cluster_client(url: str) -> "aioredis.Redis":
    """A cluster client as the engine builds one (engine/config/settings.py), test timeouts."""
    client = RedisCluster.from_url(
        url.replace("?cluster=true", ""),
        decode_responses=True,
        socket_timeout=10,
        socket_connect_timeout=5,
        max_connections=512,
    )
    return client  # type: ignore[return-value]


async def _cluster_store(url: str) -> tuple[Store, "aioredis.Redis"]:
    client = cluster_client(url)
    store = Store(client, scripts=Scripts(client, test_clock=True), prefix=new_prefix())
    await store.scripts.load_all()
    return store, client


# A script's facts are proven on fakeredis (fast, no server) and on real Redis (the server's
# own Lua): the `store` fixture. What only a cluster adds (each script routed to its slot's
# primary, batches split per node, a primary that lost its library) is proven once per script
# in tests/cluster/, not by running every script test a third time; a test whose fact is the
# client's cluster path asks for it too (`pytest.mark.parametrize("store", EVERY_BACKEND,
# indirect=True)`).
BACKENDS = ["fake", pytest.param("real", marks=pytest.mark.redis)]
EVERY_BACKEND = [*BACKENDS, pytest.param("cluster", marks=[pytest.mark.redis, pytest.mark.cluster])]


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    """The same test on fakeredis and on real Redis (and, where a test asks, on a Redis
    Cluster): all must agree."""
    if request.param == "fake":
        store, client = _fake_store()
    elif request.param == "real":
        store, client = await _real_store()
    else:
        store, client = await _cluster_store(request.getfixturevalue("redis_cluster"))
    yield store
    if request.param != "fake":
        await _drop_prefix(client, store.prefix)
    await client.aclose()


# -- every collected test reports -------------------------------------------------------------
# `make test` runs most of the suite on pytest-xdist workers, which schedule tests by node id; a
# test they cannot schedule silently does not run (schemathesis's generated tests, which are run
# apart for that reason). Each test that ran reports its call, or a setup that did not pass, to
# the controlling process: count them (schemathesis's tests share node ids, so not by id).
_REPORTED = [0]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or (report.when == "setup" and not report.passed):
        _REPORTED[0] += 1


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    missing = session.testscollected - _REPORTED[0]  # collected: after any deselection
    if exitstatus == 0 and missing > 0 and not session.config.option.collectonly:
        print(f"\n{missing} collected tests never ran")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
