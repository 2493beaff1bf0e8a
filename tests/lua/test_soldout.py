"""The sold-out memory (engine/gate/soldout.py): refusals from memory, the retried claim that must
still get its hold, and the restock message that ends the memory. On fakeredis and on real
Redis, with the listener really subscribed."""

import asyncio
import gc
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine.gate.claim_gate import GC_PAUSE_S, PATIENCE, WAKE_CHUNK
from engine.gate.claims import GatedClaims
from engine.gate.soldout import KEEP_S, SoldOutMemory, _Memory
from engine.model import errors
from engine.store import Store
from engine.store.cluster import is_cluster
from tests.conftest import Sale, open_sale
from tests.helpers import wait_until

T0 = 1_900_000_000_000


@pytest.fixture
async def memory(store: Store) -> AsyncIterator[SoldOutMemory]:
    m = SoldOutMemory(store.client, store.prefix, ttl_s=30.0)
    await m.start()
    await wait_until(lambda: m.listening)
    yield m
    await m.stop()


async def sell_out(store: Store, seats: int) -> Sale:
    sale = await open_sale(store, seats, now_ms=T0)
    for i in range(seats):
        await store.claim(sale.event_id, f"winner{i}", f"win{i}")
    return sale


async def test_sold_out_reply_counts_restocks_and_release_publishes(store: Store) -> None:
    sale = await sell_out(store, 2)
    raw = await store.scripts.call(
        "hold_claim", store.keys(sale.event_id), ["x", "late", "", 0, 0, 0, 0]
    )
    created_ms = int(await store.client.hget(store.keys(sale.event_id)[0], "created_ms") or 0)
    assert raw == ["SOLD_OUT", created_ms]  # the count starts at the creation time
    pubsub: Any = store.client.pubsub()
    # The channel is sharded: in the event's slot, heard from the node serving it.
    get = pubsub.get_sharded_message if is_cluster(store.client) else pubsub.get_message
    channel = f"{store.prefix}:{{{sale.event_id}}}:event:restocked"
    await pubsub.ssubscribe(channel)
    assert (await get(timeout=5))["type"] == "ssubscribe"
    await store.release(sale.event_id, "win0", "winner0")  # 0 -> 1 free: a restock
    await store.release(sale.event_id, "win1", "winner1")  # 1 -> 2 free: not one
    got = []
    for _ in range(100):  # up to 5 s for the first message, then 0.2 s for any other
        msg = await get(ignore_subscribe_messages=True, timeout=0.05)
        if msg is not None:
            got.append((msg["channel"], msg["data"]))
        elif len(got) == 1:
            for _ in range(4):
                late = await get(ignore_subscribe_messages=True, timeout=0.05)
                if late is not None:
                    got.append((late["channel"], late["data"]))
            break
    await pubsub.aclose()
    assert got == [(channel, str(created_ms + 1))]
    await store.claim(sale.event_id, "a", "a1")
    await store.claim(sale.event_id, "b", "b1")
    raw = await store.scripts.call(
        "hold_claim", store.keys(sale.event_id), ["y", "late", "", 0, 0, 0, 0]
    )
    assert raw == ["SOLD_OUT", created_ms + 1]


async def test_refusals_come_from_memory_and_a_retry_still_gets_its_hold(
    store: Store, memory: SoldOutMemory
) -> None:
    claims = GatedClaims(store, memory)
    sale = await sell_out(store, 3)
    with pytest.raises(errors.SoldOut):
        await claims.claim(sale.event_id, "late0", "k0")  # Redis says it; memory is made
    await wait_until(lambda: memory.stats.entered == 1)
    for i in range(1, 20):
        with pytest.raises(errors.SoldOut):
            await claims.claim(sale.event_id, f"late{i}", f"k{i}", "s00001" if i % 2 else None)
    assert memory.stats.answered == 19
    # A winner whose answer was lost retries with the same key: its hold, not sold_out.
    again = await claims.claim(sale.event_id, "winner1", "win1")
    assert (again.replay, again.hold_id, again.listing) == (True, "win1", "s00001")
    assert memory.stats.answered == 19
    await sale.audit_ok()


async def test_a_seat_coming_back_ends_the_memory(store: Store, memory: SoldOutMemory) -> None:
    claims = GatedClaims(store, memory)
    sale = await sell_out(store, 2)
    with pytest.raises(errors.SoldOut):
        await claims.claim(sale.event_id, "late", "k0")
    await wait_until(lambda: memory.stats.entered == 1)
    await store.release(sale.event_id, "win0", "winner0")
    await wait_until(lambda: memory.stats.dropped == 1, timeout_s=2.0)
    got = await claims.claim(sale.event_id, "late", "k1")  # not refused from memory
    assert got.listing == "s00000"
    # Sold out again: a new memory (a new snapshot, since a seat came back), which knows k1.
    with pytest.raises(errors.SoldOut):
        await claims.claim(sale.event_id, "later", "k2")
    await wait_until(lambda: memory.stats.snapshots == 2)
    assert (await claims.claim(sale.event_id, "late", "k1")).replay
    with pytest.raises(errors.SoldOut):
        await claims.claim(sale.event_id, "later", "k3")
    assert memory.stats.answered == 1
    await sale.audit_ok()


async def test_an_expired_hold_ends_the_memory_too(store: Store, memory: SoldOutMemory) -> None:
    claims = GatedClaims(store, memory)
    sale = await sell_out(store, 1)
    with pytest.raises(errors.SoldOut):
        await claims.claim(sale.event_id, "late", "k0")
    await wait_until(lambda: memory.stats.entered == 1)
    await sale.at(T0 + 480_000)
    await store.sweep(sale.event_id)
    await wait_until(lambda: memory.stats.dropped == 1, timeout_s=2.0)
    assert (await claims.claim(sale.event_id, "late", "k1")).listing == "s00000"


async def test_a_snapshot_read_across_a_lost_subscription_is_not_used(
    store: Store, memory: SoldOutMemory
) -> None:
    sale = await sell_out(store, 1)
    memory._confirmed[sale.event_id] = time.monotonic()
    real_snapshot = memory._snapshot

    async def lost_while_read(event_id: str) -> tuple[int, frozenset[str]] | None:
        found = await real_snapshot(event_id)
        memory._unconfirmed(event_id)  # the slot moved away while the read was in flight
        return found

    memory._snapshot = lost_while_read  # type: ignore[method-assign]
    restocks = int(await store.client.hget(store.keys(sale.event_id)[0], "restocks") or 0)
    await memory._enter(sale.event_id, restocks)
    assert memory.stats.snapshots == 1 and sale.event_id not in memory._events


async def test_a_seat_back_between_the_reply_and_the_snapshot_is_seen(
    store: Store, memory: SoldOutMemory
) -> None:
    """The SOLD_OUT reply's count is checked against one read after the subscription: a seat
    that came back before the subscription existed (no message could be heard) shows there."""
    claims = GatedClaims(store, memory)
    sale = await sell_out(store, 1)
    restocks = int(await store.client.hget(store.keys(sale.event_id)[0], "restocks") or 0)
    await store.release(sale.event_id, "win0", "winner0")  # unheard: nobody subscribed yet
    memory._wanted[sale.event_id] = time.monotonic()
    await memory._enter(sale.event_id, restocks)
    assert memory.stats.snapshots == 1 and sale.event_id not in memory._events
    assert (await claims.claim(sale.event_id, "late", "k1")).listing == "s00000"


async def test_a_server_side_unsubscribe_forgets_the_event(
    store: Store, memory: SoldOutMemory
) -> None:
    """A slot moved to another node ends the subscriptions of its channels (`sunsubscribe`
    from the server): what they covered is forgotten until a confirmation is heard again."""
    claims = GatedClaims(store, memory)
    sale = await sell_out(store, 1)
    with pytest.raises(errors.SoldOut):
        await claims.claim(sale.event_id, "late", "k0")
    await wait_until(lambda: memory.stats.entered == 1)
    channel = f"{store.prefix}:{{{sale.event_id}}}:event:restocked"
    memory._heard_message({"type": "sunsubscribe", "channel": channel, "data": 0})
    with pytest.raises(errors.SoldOut):
        await claims.claim(sale.event_id, "late", "k1")
    assert memory.stats.answered == 0  # asked Redis


async def test_memory_lapses_after_its_ttl(store: Store, memory: SoldOutMemory) -> None:
    claims = GatedClaims(store, memory)
    memory.ttl_s = 0.05
    sale = await sell_out(store, 1)
    with pytest.raises(errors.SoldOut):
        await claims.claim(sale.event_id, "late", "k0")
    await wait_until(lambda: memory.stats.entered == 1)
    await asyncio.sleep(0.06)
    with pytest.raises(errors.SoldOut):
        await claims.claim(sale.event_id, "late", "k1")
    assert memory.stats.answered == 0  # asked Redis again, which renewed the memory
    await wait_until(lambda: memory.stats.entered == 2)
    assert memory.stats.snapshots == 1  # no seat came back: the snapshot was reused


async def test_a_memory_in_use_is_renewed_before_it_lapses(
    store: Store, memory: SoldOutMemory
) -> None:
    """A steady stream of claims on a remembered event: past the first quarter of its life the
    memory lets one claim go to Redis now and then (a probe, one per eighth of its life at
    most), whose SOLD_OUT renews it, so it never lapses while used and no claim is held at the
    gate. Without the probe it lapsed every ttl and each lapse sent claims to Redis and held
    the others back."""
    claims = GatedClaims(store, memory)
    memory.ttl_s = 0.4
    sale = await sell_out(store, 1)
    with pytest.raises(errors.SoldOut):
        await claims.claim(sale.event_id, "late", "k0")
    await wait_until(lambda: memory.remembers(sale.event_id))
    lapsed, asked = 0, 0
    started = time.monotonic()
    i = 0
    while time.monotonic() - started < 1.6:  # four lifetimes
        i += 1
        lapsed += int(not memory.remembers(sale.event_id))
        answered = memory.stats.answered
        with pytest.raises(errors.SoldOut):
            await claims.claim(sale.event_id, f"u{i}", f"k{i}")
        asked += int(memory.stats.answered == answered)
        await asyncio.sleep(0.005)
    assert lapsed == 0 and memory.stats.held == 0
    assert 4 <= asked <= 1.6 / (memory.ttl_s / 8) + 1, asked  # probes, at most one per 50 ms
    assert memory.stats.probes == asked
    assert memory.stats.snapshots == 1  # each renewal reused the snapshot


async def test_a_rebuilt_event_is_not_taken_for_its_earlier_life(
    store: Store, memory: SoldOutMemory
) -> None:
    """Dropped and created again (a rebuild), the event starts a new restocks count above the
    old one: the memory of the old event is not renewed, and a hold of the new one replays."""
    claims = GatedClaims(store, memory)
    sale = await sell_out(store, 1)
    with pytest.raises(errors.SoldOut):
        await claims.claim(sale.event_id, "late", "k0")
    await wait_until(lambda: memory.stats.entered == 1)
    await store.restore.drop_event(sale.event_id)
    await asyncio.sleep(0.002)  # the new event is created at a later millisecond
    again = await open_sale(store, 1, now_ms=T0, event_id=sale.event_id)
    won = await claims.claim(again.event_id, "new-winner", "kd")
    with pytest.raises(errors.SoldOut):
        await claims.claim(again.event_id, "late", "k1")  # to Redis: a new count, a new snapshot
    await wait_until(lambda: memory.stats.snapshots == 2)
    retried = await claims.claim(again.event_id, "new-winner", "kd")
    assert (retried.replay, retried.listing) == (True, won.listing)


def test_rules_without_redis() -> None:
    """The ordering rules, driven by hand: a reply older than a restock is not remembered; a
    renewal needs a memory made under the subscription still confirmed; a lost subscription
    forgets everything; memory is never used while not listening."""

    async def run() -> None:
        m = SoldOutMemory(None, "p")  # type: ignore[arg-type]
        m.listening = True
        m.restocked("e", 3)
        m.sold_out("e", 2, sent_at=11.0)  # made before the third restock
        assert "e" not in m._entering and not m.refuses("e", "k")
        assert "e" in m._wanted  # its channel is asked for all the same
        m._events["e"] = _memory(3)
        assert m.refuses("e", "k") and not m.refuses("e", "held")
        m.restocked("e", 3)  # a stale message: keeps it
        assert m.refuses("e", "k")
        m.restocked("e", 4)
        assert not m.refuses("e", "k")
        m._events["e"] = _memory(4)
        m._lost()
        assert not m.listening and not m.refuses("e", "k") and m._events == {}
        # Expired memories and old restocks are pruned after KEEP_S.
        m.listening = True
        m._events["old"] = _Memory(1, time.monotonic() - KEEP_S - 1, frozenset(), 0.0)
        m._latest["old"] = (1, time.monotonic() - KEEP_S - 1)
        m._probed["old"] = time.monotonic() - KEEP_S - 1
        m._pruned = 0.0
        m._prune(time.monotonic())
        assert "old" not in m._events and "old" not in m._latest and "old" not in m._probed

    asyncio.run(run())


def _memory(restocks: int) -> _Memory:
    return _Memory(restocks, time.monotonic() + 60, frozenset({"held"}), 0.0)


async def test_the_gate_keeps_a_burst_off_redis_once_it_is_sold_out(
    store: Store, memory: SoldOutMemory
) -> None:
    """200 claims at once on 2 seats, at most 8 in flight: after the first SOLD_OUT reply no
    waiting claim goes to Redis until the memory is entered, then all are answered from it.
    Exactly two win; everyone else is told sold_out."""
    claims = GatedClaims(store, memory)
    memory.gates.window = 8
    sale = await open_sale(store, 2, now_ms=T0)
    results = await asyncio.gather(
        *(claims.claim(sale.event_id, f"u{i}", f"k{i}") for i in range(200)),
        return_exceptions=True,
    )
    won = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, BaseException)]
    assert len(won) == 2 and all(isinstance(r, errors.SoldOut) for r in refused), refused[:3]
    assert memory.stats.held > 0
    assert memory.stats.answered >= 200 - 2 * memory.gates.window  # at most two windows
    assert sale.event_id not in memory.gates.by_event  # nothing in flight: dropped
    await sale.audit_ok()


async def test_claims_waiting_at_the_gate_get_a_seat_that_came_back(
    store: Store, memory: SoldOutMemory
) -> None:
    """The memory is not entered when a seat came back between the SOLD_OUT reply and its
    snapshot: the claims that waited meanwhile go on to Redis, and one of them gets the seat."""
    claims = GatedClaims(store, memory)
    memory.gates.window = 1
    sale = await sell_out(store, 1)
    real_snapshot = memory._snapshot

    async def seat_back_first(event_id: str) -> tuple[int, frozenset[str]] | None:
        await store.release(sale.event_id, "win0", "winner0")
        return await real_snapshot(event_id)

    memory._snapshot = seat_back_first  # type: ignore[method-assign]
    results = await asyncio.gather(
        *(claims.claim(sale.event_id, f"u{i}", f"k{i}") for i in range(20)),
        return_exceptions=True,
    )
    won = [r for r in results if not isinstance(r, BaseException)]
    assert len(won) == 1 and memory.stats.held > 0
    # The first snapshot saw the seat back and was not used; the seat's new sale made the next.
    assert memory.stats.snapshots == memory.stats.entered + 1
    assert all(isinstance(r, errors.SoldOut) for r in results if isinstance(r, BaseException))
    await sale.audit_ok()


def test_the_gate_without_redis() -> None:
    """A full window makes the next claim wait, bounded by its wait; a claim that leaves
    after it was woken passes its turn on (nobody waits forever behind it); an idle gate is
    dropped; a window of 0 is no gate at all."""

    async def run() -> None:
        m = SoldOutMemory(None, "p", window=1)  # type: ignore[arg-type]
        assert await m.admit("e", "k1", 1.0) is False  # the one place in flight
        with pytest.raises(errors.StoreUnavailable):
            await m.admit("e", "k2", 0.05)  # nobody releases: bounded
        second = asyncio.create_task(m.admit("e", "k2", 5.0))
        third = asyncio.create_task(m.admit("e", "k3", 5.0))
        await asyncio.sleep(0.01)
        gate = m.gates.by_event["e"]
        assert [t.done() for t in gate.waiting] == [True, False, False]  # k2's first wait left
        m.release("e", ["SOLD_OUT", 1])  # wakes the second, which is cancelled before it runs
        second.cancel()
        assert await third is False  # its turn was passed on
        assert gate.inflight == 1 and all(t.done() for t in gate.waiting)
        assert m.stats.held == 3  # k2 (twice, each its own claim) and k3: one count each
        gate.waiting.clear()
        m.release("e", ["OK", "h", "s", 0, "", 0])
        assert "e" not in m.gates.by_event  # nothing in flight, nobody waiting: dropped
        off = SoldOutMemory(None, "p", window=0)  # type: ignore[arg-type]
        assert [await off.admit("e", f"k{i}", 0.01) for i in range(5)] == [False] * 5
        off.release("e", None)
        assert off.gates.by_event == {}

    asyncio.run(run())


def test_the_collector_is_paused_while_claims_wait_and_for_one_second_at_most() -> None:
    """With `pause_gc`, the collector is off from the first claim that waits at a gate to the
    last one leaving (what waiting claims hold is alive: a collection would walk it and free
    nothing), for GC_PAUSE_S at most per wave of waiting; a collector turned off by someone
    else stays off; without `pause_gc` it is never touched."""

    async def run() -> None:
        m = SoldOutMemory(None, "p", window=1, pause_gc=True)  # type: ignore[arg-type]
        assert await m.admit("e", "k0", 5.0) is False
        waiting = [asyncio.create_task(m.admit("e", f"k{i}", 5.0)) for i in (1, 2)]
        await asyncio.sleep(0.01)
        assert not gc.isenabled()
        m.release("e", ["SOLD_OUT", 1])
        assert await waiting[0] is False and not gc.isenabled()  # k2 still waits
        m.release("e", ["SOLD_OUT", 1])
        assert await waiting[1] is False and gc.isenabled()  # the last one left
        # A wave that lasts: past GC_PAUSE_S the collector runs again, and stays on for it.
        late = [asyncio.create_task(m.admit("e", "k3", 5.0))]
        await asyncio.sleep(0.01)
        assert not gc.isenabled()
        await asyncio.sleep(GC_PAUSE_S)
        late.append(asyncio.create_task(m.admit("e", "k4", 5.0)))
        await asyncio.sleep(0.01)
        assert gc.isenabled()
        late.append(asyncio.create_task(m.admit("e", "k5", 5.0)))
        await asyncio.sleep(0.01)
        assert gc.isenabled()
        for task in late:
            m.release("e", ["SOLD_OUT", 1])
            assert await task is False
        # Off by someone else: left off.
        gc.disable()
        try:
            again = asyncio.create_task(m.admit("e", "k6", 5.0))
            await asyncio.sleep(0.01)
            m.release("e", ["SOLD_OUT", 1])
            assert await again is False and not gc.isenabled()
        finally:
            gc.enable()
        # Claims cut off mid-wait (their loop ends, they never leave): stop resumes it.
        cut = asyncio.create_task(m.admit("e", "k7", 5.0))
        await asyncio.sleep(0.01)
        assert not gc.isenabled()
        await m.stop()
        assert gc.isenabled()
        cut.cancel()
        plain = SoldOutMemory(None, "p", window=1)  # type: ignore[arg-type]
        assert await plain.admit("e", "k0", 5.0) is False
        other = asyncio.create_task(plain.admit("e", "k1", 5.0))
        await asyncio.sleep(0.01)
        assert gc.isenabled()
        plain.release("e", ["SOLD_OUT", 1])
        assert await other is False

    try:
        asyncio.run(run())
    finally:
        gc.enable()


def test_a_busy_gate_that_keeps_being_answered_is_waited_on() -> None:
    """Claims queued behind a full window wait longer than the store's timeout while Redis
    keeps answering the event's claims (a slow burst is not told 503), and each gets its turn
    in order; with answers but never a turn, a claim gives up after PATIENCE timeouts."""

    async def run() -> None:
        m = SoldOutMemory(None, "p", window=1)  # type: ignore[arg-type]
        loop = asyncio.get_running_loop()
        assert await m.admit("e", "k0", 0.2) is False
        started = loop.time()
        queued = [asyncio.create_task(m.admit("e", f"k{i}", 0.2)) for i in range(1, 7)]
        for task in queued:  # one answer every 0.1 s: the last waits 0.6 s, three timeouts
            await asyncio.sleep(0.1)
            m.release("e", ["SOLD_OUT", 1])
            assert await task is False  # its turn, not a StoreUnavailable
        assert loop.time() - started > 0.55
        gate = m.gates.by_event["e"]

        async def answers_elsewhere() -> None:  # answers keep coming, no place frees up
            while True:
                gate.answered_at = loop.time()
                await asyncio.sleep(0.01)

        other = asyncio.create_task(answers_elsewhere())
        started = loop.time()
        with pytest.raises(errors.StoreUnavailable):
            await m.admit("e", "late", 0.05)
        assert PATIENCE * 0.05 - 0.01 < loop.time() - started < PATIENCE * 0.05 + 0.3
        other.cancel()
        gate.answered_at = loop.time() - 1.0  # Redis went quiet a second ago
        started = loop.time()
        with pytest.raises(errors.StoreUnavailable):
            await m.admit("e", "quiet", 0.05)
        assert loop.time() - started < 0.2

    asyncio.run(run())


def test_a_memory_being_made_pauses_the_gate_for_half_a_second_at_most() -> None:
    """A SOLD_OUT reply whose memory takes long to make (a subscription that never comes)
    holds the event's waiting claims back ENTER_PAUSE_S at most; then they go on to Redis."""

    async def run() -> None:
        m = SoldOutMemory(None, "p", window=1)  # type: ignore[arg-type]
        m.listening = True
        assert await m.admit("e", "k1", 5.0) is False
        m.sold_out("e", 7, sent_at=time.monotonic())  # its memory: waits for a confirmation
        assert m._paused_until("e") > 0
        m.release("e", ["SOLD_OUT", 7])  # paused: wakes nobody
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await m.admit("e", "k2", 5.0) is False  # let through once the pause ended
        assert 0.4 < loop.time() - started < 1.5
        await m.stop()

    asyncio.run(run())


def test_claims_woken_together_ask_a_chunk_per_loop_iteration_in_order() -> None:
    """`wake_all` (a memory entered: every waiting claim asks again) wakes WAKE_CHUNK claims
    per loop iteration, in arrival order, so the loop reads its sockets between chunks: woken
    all at once, 5,000 refusals held the loop long enough for the memory to lapse before its
    probe was read. A claim refused while a sweep is under way does not wake one more (the
    sweep reaches it), so a chunk stays a chunk; every claim is answered in the end."""

    async def run() -> None:
        m = SoldOutMemory(None, "p", window=1)  # type: ignore[arg-type]
        n = 3 * WAKE_CHUNK + 5
        assert await m.admit("e", "first", 5.0) is False  # the one place: the rest wait
        refused = {"on": False}
        m.refuses = lambda _e, _h: refused["on"]  # type: ignore[method-assign]
        order: list[int] = []

        async def claim(i: int) -> None:
            assert await m.admit("e", f"k{i}", 5.0) is True
            order.append(i)

        waiting = [asyncio.create_task(claim(i)) for i in range(n)]
        await asyncio.sleep(0.01)
        assert m.gates.parked == n
        refused["on"] = True  # the memory: each woken claim is refused
        m.gates.wake_all("e")
        per_iteration = []
        while len(order) < n:
            before = len(order)
            await asyncio.sleep(0)
            per_iteration.append(len(order) - before)
        assert max(per_iteration) <= WAKE_CHUNK
        assert sum(1 for k in per_iteration if k) >= 4  # 3 full chunks and the rest
        assert order == list(range(n))
        await asyncio.gather(*waiting)
        assert m.gates.parked == 0

    asyncio.run(run())
