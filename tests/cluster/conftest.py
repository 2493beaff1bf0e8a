"""Stores on a Redis Cluster: the session's shared cluster (tests/conftest.py `redis_cluster`)
for tests that only read and write, a private one per module for tests that kill, restart or
reshard its nodes."""

import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from engine.store import Store
from engine.store.replicas import ReplicaWait
from engine.store.scripts import Scripts
from loadtest.devstack.cluster import LocalCluster
from tests.conftest import _drop_prefix, cluster_client, new_prefix

pytestmark = [pytest.mark.redis, pytest.mark.cluster]


async def cluster_store(url: str, *, wait_replicas: int = 0, test_clock: bool = True) -> Store:
    client = cluster_client(url)
    prefix = new_prefix()
    wait = (
        ReplicaWait(client, prefix=prefix, replicas=wait_replicas, timeout_ms=2000)
        if wait_replicas
        else None
    )
    store = Store(
        client,
        scripts=Scripts(client, test_clock=test_clock),
        prefix=prefix,
        timeout_s=5.0,
        wait=wait,
    )
    await store.scripts.load_all()
    return store


async def close_store(store: Store) -> None:
    await _drop_prefix(store.client, store.prefix)
    if store.pipeline is not None and store.pipeline.wait is not None:
        await store.pipeline.wait.aclose()
    await store.client.aclose()


@pytest.fixture
async def cstore(redis_cluster: str) -> AsyncIterator[Store]:
    """A store on the session's cluster, with the test clock, under a private prefix."""
    store = await cluster_store(redis_cluster)
    yield store
    await close_store(store)


@pytest.fixture(scope="module")
def private_cluster() -> Iterator[LocalCluster]:
    """A cluster of this module's own (3 primaries, 1 replica each): its nodes may be killed."""
    with tempfile.TemporaryDirectory(prefix="onsale-cluster-") as workdir:
        cluster = LocalCluster(Path(workdir))
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()
