"""The sweeper loop over several events, more due holds than one batch, and its stop signal."""

import asyncio
import time

import pytest

from engine.model.event_config import EventConfig
from engine.model.keys import EVENT_KEYS
from engine.model.states import HoldState
from engine.store import Store
from engine.workers.sweeper import Sweeper, due_events
from tests.conftest import open_sale, seats
from tests.helpers import wait_until
from tests.race.test_races import _drop, _store

T0 = 1_900_000_000_000


async def test_run_once_expires_every_due_hold_of_every_event(store: Store) -> None:
    a = await open_sale(store, 30, hold_ttl_ms=1000, now_ms=T0)
    b = await open_sale(store, 5, hold_ttl_ms=1000, quarantine_ms=2000, now_ms=T0)
    for i in range(30):
        await store.claim(a.event_id, f"u{i}", f"h{i}")
    await store.claim(b.event_id, "alice", "hb")
    await store.start_charge(b.event_id, "hb", "alice", "cb", 100)
    await store.claim(b.event_id, "bob", "hlive")
    await a.at(T0 + 1000)
    await b.at(T0 + 999)
    sweeper = Sweeper(store, batch_max=7, rounds_max=10)  # 30 due holds: five batches
    assert await sweeper.run_once() is False
    assert sweeper.stats.expired == 30
    assert (await store.read.availability(a.event_id)).free == 30
    assert (await store.read.hold(b.event_id, "hb")).state == HoldState.RESERVED
    await b.at(T0 + 1000)
    await sweeper.run_once()
    assert (await store.read.hold(b.event_id, "hb")).state == HoldState.QUARANTINED
    await b.at(T0 + 3000)
    await sweeper.run_once()
    assert (await store.read.hold(b.event_id, "hb")).state == HoldState.EXPIRED
    assert sweeper.stats.quarantined == 1
    await a.audit_ok()
    await b.audit_ok()


async def test_rounds_max_bounds_one_pass_and_reports_backlog(store: Store) -> None:
    sale = await open_sale(store, 10, hold_ttl_ms=1000, now_ms=T0)
    for i in range(10):
        await store.claim(sale.event_id, f"u{i}", f"h{i}")
    await sale.at(T0 + 1000)
    sweeper = Sweeper(store, batch_max=2, rounds_max=2)
    assert await sweeper.run_once() is True  # 4 of 10 done, backlog left
    assert sweeper.stats.expired == 4
    assert await sweeper.run_once() is True
    assert await sweeper.run_once() is False
    assert sweeper.stats.expired == 10


async def test_run_stops_on_signal(store: Store) -> None:
    sale = await open_sale(store, 3, hold_ttl_ms=1000, now_ms=T0)
    await store.claim(sale.event_id, "u", "h")
    await sale.at(T0 + 5000)
    stop = asyncio.Event()
    sweeper = Sweeper(store, interval_ms=10)
    task = asyncio.create_task(sweeper.run(stop))
    await wait_until(lambda: sweeper.stats.expired > 0)
    stop.set()
    stats = await asyncio.wait_for(task, 2)
    assert stats.passes >= 1 and stats.errors == 0
    assert (await store.read.hold(sale.event_id, "h")).state == HoldState.EXPIRED


async def test_a_pass_looks_at_every_event_once_and_sweeps_only_those_with_something_due(
    store: Store,
) -> None:
    """The lag of a pass does not grow with idle events: one pipelined look finds the events
    with a deadline or a quarantine end due by their clock, and only those are swept."""
    idle = [await open_sale(store, 2, hold_ttl_ms=1000, now_ms=T0) for _ in range(30)]
    for sale in idle[:10]:  # live holds, not due yet
        await store.claim(sale.event_id, "u", "h")
    due = await open_sale(store, 3, hold_ttl_ms=1000, now_ms=T0)
    await store.claim(due.event_id, "u", "h")
    quarantined = await open_sale(store, 3, hold_ttl_ms=1000, quarantine_ms=1000, now_ms=T0)
    await store.claim(quarantined.event_id, "u", "h")
    await store.start_charge(quarantined.event_id, "h", "u", "c", 100)
    await quarantined.at(T0 + 1500)
    await store.sweep(quarantined.event_id)  # QUARANTINED until T0 + 2000
    await due.at(T0 + 1000)  # at its deadline: due
    await quarantined.at(T0 + 2000)  # at its hard timeout: due
    ids = [s.event_id for s in [*idle, due, quarantined]]
    assert await due_events(store, ids) == [due.event_id, quarantined.event_id]
    sweeper = Sweeper(store)
    assert await sweeper.run_once() is False
    assert (sweeper.stats.expired, sweeper.stats.passes) == (2, 1)
    assert (await store.read.hold(due.event_id, "h")).state == HoldState.EXPIRED
    assert (await store.read.hold(quarantined.event_id, "h")).state == HoldState.EXPIRED
    assert await due_events(store, ids) == []


async def test_the_due_index_keeps_each_events_earliest_deadline(store: Store) -> None:
    """lua/_lib.lua due_by / due_again (on fakeredis, real Redis and a cluster): the first claim
    puts the event in the due index at its deadline; later claims (later deadlines) write
    nothing; a quarantine end earlier than the deadlines moves it; a sweep sets it to the exact
    earliest, and the event leaves the index once nothing is due any more."""
    sale = await open_sale(store, 4, hold_ttl_ms=1_000, quarantine_ms=500, now_ms=T0)
    due = store.keys(sale.event_id)[len(EVENT_KEYS)]

    async def score() -> float | None:
        found = await store.client.zscore(due, sale.event_id)
        return float(found) if found is not None else None

    assert await score() is None
    await store.claim(sale.event_id, "u1", "h1")  # deadline T0 + 1000
    assert await score() == T0 + 1_000
    await sale.at(T0 + 400)
    await store.claim(sale.event_id, "u2", "h2")  # T0 + 1400: not earlier, nothing written
    assert await score() == T0 + 1_000
    await store.start_charge(sale.event_id, "h2", "u2", "c2", 100)
    await store.release(sale.event_id, "h2", "u2")  # its seat blocked until T0 + 400 + 500
    assert await score() == T0 + 900
    await sale.at(T0 + 1_000)
    await Sweeper(store).run_once()  # h2's seat freed, h1 expired: nothing due any more
    assert await score() is None
    await store.claim(sale.event_id, "u3", "h3")
    assert await score() == T0 + 2_000
    await sale.audit_ok()


@pytest.mark.redis
async def test_a_pass_reads_the_due_index_and_visits_only_what_is_due() -> None:
    """By the server's clock (production scripts): 300 idle events and one with a hold whose
    deadline comes a second later; a pass between full looks visits only that one, once due."""
    store, client = await _store(test_clock=False)
    try:
        for i in range(300):
            await store.create_event(
                f"idle{i}", seats(1), EventConfig(hold_ttl_ms=60_000, quarantine_ms=60_000)
            )
            await store.open_sale(f"idle{i}")
        await store.create_event(
            "busy", seats(2), EventConfig(hold_ttl_ms=1_000, quarantine_ms=60_000)
        )
        await store.open_sale("busy")
        await store.claim("busy", "u1", "h1")
        sweeper = Sweeper(store)
        sweeper.full_look_at = time.monotonic()  # the next passes read the index only
        visited: list[str] = []

        async def sweep_event(event_id: str) -> bool:
            visited.append(event_id)
            return await Sweeper.sweep_event(sweeper, event_id)

        sweeper.sweep_event = sweep_event  # type: ignore[method-assign]
        await sweeper.run_once()
        assert visited == []  # nothing due yet
        deadline = (await store.read.hold("busy", "h1")).expires_ms
        await wait_until_server(store, deadline)
        await sweeper.run_once()
        assert visited == ["busy"]
        assert (await store.read.hold("busy", "h1")).state == HoldState.EXPIRED
        await sweeper.run_once()
        assert visited == ["busy"]  # swept: out of the index
    finally:
        await _drop(store, client)


async def wait_until_server(store: Store, at_ms: int) -> None:
    """Until the server's clock reaches `at_ms` (bounded)."""
    for _ in range(200):
        if await store.read.server_time_ms() >= at_ms:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"the server clock did not reach {at_ms}")
