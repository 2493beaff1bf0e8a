"""The sweeper loop over several events, more due holds than one batch, and its stop signal."""

import asyncio

from engine.states import HoldState
from engine.store import Store
from engine.sweeper import Sweeper, due_events
from tests.conftest import open_sale
from tests.helpers import wait_until

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
