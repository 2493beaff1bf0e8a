"""The waiting room in the ledger (ADR 0029): every change of a room (its settings and secret,
a place taken, an admission, a spend) is an outbox record the writer keeps, and a rebuild
after Redis lost the event puts the room back as it was: the same places in the same order,
the same admissions (a token issued before the loss still spends), the same spends, the same
published commitment. Real Redis and real PostgreSQL, the test clock."""

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from engine.model import keys
from engine.model.event_config import EventConfig
from engine.store import Store
from engine.waiting.errors import AdmissionUsed
from engine.waiting.room import QueueState, RoomSettings, WaitingRoom
from persistence.rebuild import rebuild
from persistence.writer import LedgerWriter
from tests.conftest import Sale, seats
from tests.helpers import callback
from tests.pg import migrated_pool

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

# Admits as many as there are free seats, at once; an admission lives a minute.
SETTINGS = RoomSettings(admit_per_s=100_000, admit_factor_pct=100, admission_ttl_ms=60_000)
# Counters and settings that must come back as they were (the bucket and the rate start over).
KEPT = ("per_s", "factor_pct", "ttl_ms", "auto", "secret", "seq", "pre", "first_ms", "cursor",
        "admitted", "used", "drawn")  # fmt: skip


@pytest.fixture
async def pool() -> AsyncIterator[asyncpg.Pool]:
    async with migrated_pool() as p:
        yield p


async def room_keys_now(store: Store, event_id: str) -> dict[str, Any]:
    _event, queue, entries, order, lapses, _outbox = keys.queue_keys(event_id, store.prefix)
    hq = await store.client.hgetall(queue)
    counting = await store.client.zrange(lapses, 0, -1, withscores=True)
    return {
        "queue": {k: hq.get(k) for k in KEPT},
        "entries": await store.client.hgetall(entries),
        "order": await store.client.zrange(order, 0, -1, withscores=True),
        # Unspent admissions and their deadlines (a spend in flight ends with its grace).
        "lapses": [(m, s) for m, s in counting if s > 0],
    }


async def lost_and_rebuilt(store: Store, pool: asyncpg.Pool, event_id: str) -> None:
    writer = LedgerWriter(store.client, pool, prefix=store.prefix, consumer="t", batch_max=7)
    while await writer.step(event_id):
        pass
    # Redis lost the event and its room.
    await store.client.delete(*keys.queue_keys(event_id, store.prefix)[1:5])
    await store.restore.drop_event(event_id)
    async with pool.acquire() as conn:
        report = await rebuild(store, conn, event_id)
    assert report.places == 8


async def test_a_rebuilt_event_sells_with_its_room_and_every_place_as_it_was(
    real_store: Store, pool: asyncpg.Pool
) -> None:
    store = real_store
    t0 = await store.read.server_time_ms() - 600_000  # T0 passed by the real clock too
    event_id = f"wr-{uuid.uuid4().hex[:8]}"
    await store.create_event(
        event_id, seats(3), EventConfig(hold_ttl_ms=480_000, quarantine_ms=900_000)
    )
    sale = Sale(store, event_id)
    await sale.at(t0 - 60_000)
    room = WaitingRoom(store)
    assert await room.configure(event_id, SETTINGS)
    await store.open_sale(event_id, t0)
    early = [f"early{i}" for i in range(6)]
    for i, login in enumerate(early):  # drawn places: their order is the draw's
        await sale.at(t0 - 50_000 + i)
        await room.join(event_id, login)
    await sale.at(t0)
    looks = {login: await room.look(event_id, login) for login in early}
    admitted = [login for login, p in looks.items() if p.state == QueueState.ADMITTED]
    assert len(admitted) == 3
    first, second = admitted[0], admitted[1]
    await room.spend(event_id, first, "h-first", looks[first].admitted_ms)
    await store.claim(event_id, first, "h-first")
    await store.start_charge(event_id, "h-first", first, "pay-first", 100)
    assert (await callback(sale, "pay-first", "CAPTURED")).decision == "CONFIRMED"
    await sale.at(t0 + 500)
    late = ["late0", "late1"]
    for login in late:  # after T0: arrival order, after every draw
        await room.join(event_id, login)
    commitment = (await room.published_draw(event_id, 0, 10)).commitment
    before = await room_keys_now(store, event_id)
    waiting = [login for login, p in looks.items() if p.state == QueueState.WAITING]
    positions = {login: (await room.look(event_id, login)).position for login in waiting + late}

    await lost_and_rebuilt(store, pool, event_id)

    assert await room_keys_now(store, event_id) == before
    await sale.at(t0 + 1_000)
    room = WaitingRoom(store)  # a process that never saw the room before the loss
    assert (await room.published_draw(event_id, 0, 10)).commitment == commitment
    for login, position in positions.items():  # the sold seat stayed sold: nobody moved
        assert (await room.look(event_id, login)).position == position
    # The admission given before the loss still spends (its token's time and secret hold);
    # the one spent before the loss stays spent on its hold.
    await room.spend(event_id, second, "h-second", looks[second].admitted_ms)
    with pytest.raises(AdmissionUsed):
        await room.spend(event_id, first, "h-other", looks[first].admitted_ms)
    await room.spend(event_id, first, "h-first", looks[first].admitted_ms)  # a replay
    await sale.audit_ok()


async def test_a_rebuild_records_nothing_new_and_the_ledger_keeps_the_rooms_changes(
    real_store: Store, pool: asyncpg.Pool
) -> None:
    """The writer keeps each change once (a record read twice is one row), and the room's
    settings as last set."""
    store = real_store
    t0 = await store.read.server_time_ms() + 600_000
    event_id = f"wr-{uuid.uuid4().hex[:8]}"
    await store.create_event(
        event_id, seats(2), EventConfig(hold_ttl_ms=480_000, quarantine_ms=900_000)
    )
    room = WaitingRoom(store)
    await room.configure(event_id, SETTINGS)
    await store.open_sale(event_id, t0)
    changed = RoomSettings(admit_per_s=50, admit_factor_pct=200, admission_ttl_ms=30_000)
    await room.configure(event_id, changed)
    await room.join(event_id, "ann")
    await room.join(event_id, "ann")  # a second tab: the same place, no new record
    writer = LedgerWriter(store.client, pool, prefix=store.prefix, consumer="t", batch_max=50)
    while await writer.step(event_id):
        pass
    async with pool.acquire() as conn:
        row = await conn.fetchrow("select * from waiting_rooms where event_id = $1", event_id)
        moves = await conn.fetch("select * from waiting_moves where event_id = $1", event_id)
    assert (row["admit_per_s"], row["admit_factor_pct"], row["admission_ttl_ms"]) == (
        50,
        200,
        30_000,
    )
    assert not row["auto"] and len(row["secret"]) == 64
    assert [(m["move"], m["login"]) for m in moves] == [("PLACE_TAKEN", "ann")]
