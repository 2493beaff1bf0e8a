"""The idle ledger writer's wait on a Redis Cluster (persistence/ledger_group.py): one blocking
read per slot, all at once, and a pause instead past WAITS_MAX slots."""

import asyncio
import time

import pytest

from engine.model import keys
from engine.model.ledger_progress import LEDGER_GROUP
from engine.store import Store
from persistence import ledger_group
from persistence.ledger_group import read_new

pytestmark = [pytest.mark.redis, pytest.mark.cluster]


async def outboxes(store: Store, n: int) -> dict[str, str]:
    """n events' outbox streams (their consumer group made), by event id: n slots."""
    streams = {f"w{i}": keys.event_key(f"w{i}", "outbox", store.prefix) for i in range(n)}
    assert len({keys.slot_of(e) for e in streams}) == n
    for stream in streams.values():
        await store.client.xgroup_create(stream, LEDGER_GROUP, id="0", mkstream=True)
    return streams


async def test_one_slot_waits_until_its_decision_comes(cstore: Store) -> None:
    streams = await outboxes(cstore, 1)
    started = time.monotonic()
    waiting = asyncio.create_task(
        read_new(cstore.client, streams, consumer="c", count=10, timeout_s=5.0)
    )
    await asyncio.sleep(0.3)
    assert not waiting.done()  # blocking on its outbox
    entry_id = await cstore.client.xadd(streams["w0"], {"decision_id": "d0"})
    found = await asyncio.wait_for(waiting, 5)
    assert time.monotonic() - started < 3.0  # the entry ended it, not the timeout
    assert list(found) == ["w0"] and found["w0"][0][0] == entry_id
    # Delivered to the consumer, pending until the writer acknowledges it.
    assert (await cstore.client.xpending(streams["w0"], LEDGER_GROUP))["pending"] == 1


async def test_several_slots_each_wait_briefly_and_return_what_came(cstore: Store) -> None:
    streams = await outboxes(cstore, 3)
    started = time.monotonic()
    assert await read_new(cstore.client, streams, consumer="c", count=10, timeout_s=5.0) == {}
    assert time.monotonic() - started < 1.0  # SLOTS_BLOCK_S each, at once: not the timeout
    entry_id = await cstore.client.xadd(streams["w2"], {"decision_id": "d2"})
    found = await read_new(cstore.client, streams, consumer="c", count=10, timeout_s=5.0)
    assert list(found) == ["w2"] and found["w2"][0][0] == entry_id


async def test_past_the_cap_of_slots_it_pauses_instead(
    cstore: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledger_group, "WAITS_MAX", 2)
    streams = await outboxes(cstore, 3)
    await cstore.client.xadd(streams["w0"], {"decision_id": "d0"})
    started = time.monotonic()
    assert await read_new(cstore.client, streams, consumer="c", count=10, timeout_s=0.3) == {}
    assert time.monotonic() - started >= 0.25  # the pause; the writer's next pass reads it
    assert (await cstore.client.xpending(streams["w0"], LEDGER_GROUP))["pending"] == 0
