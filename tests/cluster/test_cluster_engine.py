"""The engine on a Redis Cluster of 3 primaries (ADR 0030): the same code paths as on one
server. Every script runs here once, alone and in a batch (test_cluster_scripts.py); this
module checks what only a cluster has: scripts on every primary, events
spread over the primaries and all walked, batches split per node, a primary that lost its
scripts, and the sold-out memory's sharded channels."""

import asyncio
import uuid
from collections import Counter
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.crc import key_slot

from engine.gate.claims import GatedClaims
from engine.gate.soldout import SoldOutMemory
from engine.model import errors, keys
from engine.store import Store
from engine.store.event_index import EventIndex
from tests.conftest import open_sale
from tests.helpers import wait_until

pytestmark = [pytest.mark.redis, pytest.mark.cluster]

T0 = 1_900_000_000_000


def primary_of(store: Store, event_id: str) -> str:
    cluster: Any = store.client
    node = cluster.get_node_from_key(keys.event_key(event_id, "event", store.prefix))
    return str(node.name)


async def on_every_primary(store: Store, *command: str) -> None:
    cluster: Any = store.client
    for node in cluster.get_primaries():  # replicas follow their primary
        async with aioredis.Redis(host=node.host, port=node.port) as one:
            await one.execute_command(*command)  # type: ignore[no-untyped-call]


async def test_the_library_is_loaded_on_every_primary(cstore: Store) -> None:
    cluster: Any = cstore.client
    cluster_primaries = cluster.get_primaries()
    assert len(cluster_primaries) == 3
    await on_every_primary(cstore, "FUNCTION", "FLUSH")
    assert not await cstore.scripts.loaded()
    assert await cstore.ready() == len(cstore.scripts.names())  # loads it again, everywhere
    for node in cluster_primaries:
        async with aioredis.Redis(host=node.host, port=node.port) as one:
            assert await one.function_list(library=cstore.scripts.library_name)


async def test_events_spread_over_every_primary_and_are_all_walked(cstore: Store) -> None:
    sales = [await open_sale(cstore, 3, now_ms=T0) for _ in range(45)]
    by_node = Counter(primary_of(cstore, s.event_id) for s in sales)
    assert len(by_node) == 3 and min(by_node.values()) >= 5, by_node
    assert await cstore.read.event_ids() == sorted(s.event_id for s in sales)
    # Another process (a fresh index, nothing cached) finds them by scanning every primary.
    fresh = EventIndex(cstore.client, prefix=cstore.prefix, read=cstore.read._read)
    assert await fresh.ids() == sorted(s.event_id for s in sales)
    for s in sales:  # an event and its index entry live in one slot, so on one primary
        index = keys.event_index(s.event_id, cstore.prefix)
        assert key_slot(index.encode()) == keys.slot_of(s.event_id)


async def test_one_tick_of_claims_on_many_events_is_batched_per_node(cstore: Store) -> None:
    """300 claims on 30 events (spread over 3 primaries) queued in one tick: a handful of
    batches, every answer right, each event exactly full."""
    sales = [await open_sale(cstore, 8, now_ms=T0) for _ in range(30)]
    assert cstore.pipeline is not None
    before = cstore.pipeline.stats.batches

    async def claim(event_id: str, i: int) -> str:
        try:
            return (await cstore.claim(event_id, f"u{i}", f"k{i}")).listing
        except errors.SoldOut:
            return ""

    got = await asyncio.gather(*(claim(s.event_id, i) for s in sales for i in range(10)))
    assert cstore.pipeline.stats.batches - before <= 6
    assert sum(1 for g in got if g) == 30 * 8
    for s in sales:
        assert (await cstore.read.availability(s.event_id)).free == 0
        await s.audit_ok()


async def test_a_primary_that_lost_the_library_still_answers(cstore: Store) -> None:
    """A restarted primary has no library: the batch's calls answered "Function not found"
    load it on every primary and run again; nothing is decided twice."""
    sales = [await open_sale(cstore, 4, now_ms=T0) for _ in range(6)]
    await on_every_primary(cstore, "FUNCTION", "FLUSH")
    got = await asyncio.gather(
        *(cstore.claim(s.event_id, f"u{i}", f"k{i}") for s in sales for i in range(4))
    )
    assert all(not g.replay for g in got)
    for n, s in enumerate(sales):
        assert len({g.listing for g in got[4 * n : 4 * n + 4]}) == 4
        assert (await cstore.read.availability(s.event_id)).held == 4
        await s.audit_ok()


async def test_sold_out_memory_on_sharded_channels(cstore: Store) -> None:
    """The memory subscribes to each sold-out event's channel on the node serving it; a seat
    coming back on any primary ends the memory of its event only."""
    memory = SoldOutMemory(cstore.client, cstore.prefix, ttl_s=30.0)
    claims = GatedClaims(cstore, memory)
    await memory.start()
    try:
        sales = [await open_sale(cstore, 1, now_ms=T0) for _ in range(6)]
        assert len({primary_of(cstore, s.event_id) for s in sales}) >= 2
        for s in sales:
            await claims.claim(s.event_id, "winner", f"w-{s.event_id}")
            with pytest.raises(errors.SoldOut):
                await claims.claim(s.event_id, "late", f"l0-{s.event_id}")
        await wait_until(lambda: memory.stats.entered == len(sales), timeout_s=5.0)
        for s in sales:
            with pytest.raises(errors.SoldOut):
                await claims.claim(s.event_id, "late", f"l1-{s.event_id}")
        assert memory.stats.answered == len(sales)
        first = sales[0]
        await cstore.release(first.event_id, f"w-{first.event_id}", "winner")
        await wait_until(lambda: memory.stats.dropped == 1, timeout_s=5.0)
        assert (await claims.claim(first.event_id, "late", "again")).listing == "s00000"
        with pytest.raises(errors.SoldOut):  # the others are still remembered
            await claims.claim(sales[1].event_id, "late", f"l2-{uuid.uuid4().hex}")
        assert memory.stats.answered == len(sales) + 1
    finally:
        await memory.stop()
