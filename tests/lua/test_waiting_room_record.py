"""Every change of a waiting room is an outbox record, and the records alone make the room:
random histories of joins (before and after T0, second tabs, rejoins after a lapse or a
spend), looks that admit, spends and claims, replayed by engine/waiting/restore.py, give the
entries, the order and the counters the scripts hold; lua/queue_restore.lua writes them back
exactly. On fakeredis, real Redis and a cluster, with the test clock."""

import random
import uuid
from typing import Any

from engine.model import keys
from engine.model.event_config import EventConfig
from engine.model.records import Marker, OutboxRecord, RecordKind
from engine.store import Store
from engine.waiting.errors import AdmissionExpired, AdmissionUsed
from engine.waiting.restore import Line, Move, RoomSetup, replay, restore_room
from engine.waiting.room import QueueState, RoomSettings, WaitingRoom
from tests.conftest import Sale, seats

T0 = 1_900_000_000_000
SETTINGS = RoomSettings(admit_per_s=4, admit_factor_pct=150, admission_ttl_ms=3_000)
LOGINS = [f"u{i}" for i in range(12)]
HISTORIES = 12
STEPS = 40
COUNTERS = ("seq", "pre", "first_ms", "admitted", "used")  # absent in the scripts' hash: 0


async def queue_records(store: Store, event_id: str) -> list[OutboxRecord]:
    outbox = keys.queue_keys(event_id, store.prefix)[5]
    entries = await store.client.xrange(outbox)
    records = [OutboxRecord.from_fields(f) for _sid, f in entries]
    return [r for r in records if r.kind == RecordKind.QUEUE]


def cursor_of(q: dict[str, str]) -> dict[str, int]:
    return {"cursor": int(q.get("cursor", -1))}


async def scripts_state(store: Store, event_id: str) -> dict[str, Any]:
    _event, queue, entries, order, lapses, _outbox = keys.queue_keys(event_id, store.prefix)
    q = await store.client.hgetall(queue)
    counting = await store.client.zrange(lapses, 0, -1, withscores=True)
    return {
        "counters": {k: int(q.get(k) or 0) for k in COUNTERS}
        | {"cursor": int(q.get("cursor", -1))},
        "entries": await store.client.hgetall(entries),
        "order": await store.client.zrange(order, 0, -1, withscores=True),
        "unspent": {m: s for m, s in counting if s > 0},
    }


def replayed_state(line: Line, ttl_ms: int, now_ms: int) -> dict[str, Any]:
    """What the scripts hold, as the replay says (the scripts keep an overdue admission in the
    lapses zset until a look lapses it; the replay does too)."""
    return {
        "counters": {k: getattr(line, k) for k in (*COUNTERS, "cursor")},
        "entries": {
            login: f"{e.place}|{e.admitted_ms}|{e.hold_id}|{e.joined_ms}"
            for login, e in line.entries.items()
        },
        "order": sorted(
            ((login, float(e.place)) for login, e in line.entries.items()),
            key=lambda x: (x[1], x[0]),
        ),
        "unspent": {
            login: float(e.admitted_ms + ttl_ms)
            for login, e in line.entries.items()
            if e.admitted_ms and not e.hold_id and e.admitted_ms + ttl_ms > now_ms
        },
    }


async def one_history(store: Store, rng: random.Random) -> list[Move]:
    event_id = f"wr-{uuid.uuid4().hex[:8]}"
    await store.create_event(
        event_id, seats(4), EventConfig(hold_ttl_ms=480_000, quarantine_ms=900_000)
    )
    sale = Sale(store, event_id)
    now = T0 - 10_000
    await sale.at(now)
    room = WaitingRoom(store)
    await room.configure(event_id, SETTINGS)
    await store.open_sale(event_id, T0)
    claims = 0
    for _ in range(STEPS):
        now += rng.choice([0, 1, 200, 1_000, 4_000]) if now >= T0 else rng.choice([1, 3_000])
        await sale.at(now)
        login = rng.choice(LOGINS)
        place = await room.join(event_id, login)  # a join also looks (and admits)
        if place.state == QueueState.ADMITTED and rng.random() < 0.6:
            claims += 1
            hold = f"h{claims}"
            try:
                await room.spend(event_id, login, hold, place.admitted_ms)
            except (AdmissionUsed, AdmissionExpired):
                continue
            if rng.random() < 0.5:  # some claims take a seat, some are released again
                await store.claim(event_id, login, hold)
                if rng.random() < 0.5:
                    await store.release(event_id, hold, login)
    records = await queue_records(store, event_id)
    setup = RoomSetup.of_record(records[0])
    line = replay(Move.of_record(r) for r in records if r.to_state != Marker.ROOM_SET)
    expected = replayed_state(line, setup.admission_ttl_ms, now)
    actual = await scripts_state(store, event_id)
    actual["unspent"] = {m: s for m, s in actual["unspent"].items() if s > now}
    assert actual == expected
    # Written back by the restore script (the event a DRAFT, as a rebuild holds it), the keys
    # are the scripts' again.
    await store.client.hset(store.keys(event_id)[0], "status", "draft")
    on = keys.queue_keys(event_id, store.prefix)
    await store.client.delete(*on[1:5])
    assert await restore_room(store.runner, on, event_id, setup, line) == "RESTORED"
    restored = await scripts_state(store, event_id)
    restored["unspent"] = {m: s for m, s in restored["unspent"].items() if s > now}
    assert restored == expected
    return [Move.of_record(r) for r in records if r.to_state != Marker.ROOM_SET]


async def test_the_outbox_records_of_a_room_replay_into_the_room_the_scripts_hold(
    store: Store,
) -> None:
    rng = random.Random(20261204)
    kinds: set[Marker] = set()
    rejoins = 0
    for _ in range(HISTORIES):
        moves = await one_history(store, rng)
        kinds |= {m.move for m in moves}
        places = [m.login for m in moves if m.move == Marker.PLACE_TAKEN]
        rejoins += len(places) - len(set(places))
    # The histories did what they are for: every move, and logins that joined again.
    assert kinds == {Marker.PLACE_TAKEN, Marker.ADMITTED, Marker.ADMISSION_SPENT}
    assert rejoins >= HISTORIES


async def test_the_restore_script_refuses_an_event_on_sale_and_places_before_a_room(
    store: Store,
) -> None:
    event_id = f"wr-{uuid.uuid4().hex[:8]}"
    await store.create_event(
        event_id, seats(1), EventConfig(hold_ttl_ms=480_000, quarantine_ms=900_000)
    )
    on = keys.queue_keys(event_id, store.prefix)
    setup = RoomSetup(10, 100, 60_000, False, "ab" * 32)
    assert await restore_room(store.runner, on, event_id, setup, Line()) == "RESTORED"
    await store.client.delete(on[1])
    reply = await store.runner.run("queue_restore", event_id, ["PLACES", "ann", 5, 0, "", 1], on=on)
    assert reply[0] == "NO_QUEUE"
    await store.open_sale(event_id, T0)
    assert await restore_room(store.runner, on, event_id, setup, Line()) == "NOT_DRAFT"
    missing = keys.queue_keys("no-such-event", store.prefix)
    assert await restore_room(store.runner, missing, "no-such-event", setup, Line()) == "NOT_FOUND"


async def test_a_second_spend_under_the_same_key_after_a_rejoin_is_a_record_of_its_own(
    store: Store,
) -> None:
    """A login spends, joins again, is admitted again and spends under the same Idempotency-Key
    (the same hold id): two spends, two decision ids, so the ledger keeps both."""
    event_id = f"wr-{uuid.uuid4().hex[:8]}"
    await store.create_event(
        event_id, seats(4), EventConfig(hold_ttl_ms=480_000, quarantine_ms=900_000)
    )
    sale = Sale(store, event_id)
    await sale.at(T0 - 1_000)
    room = WaitingRoom(store)
    await room.configure(event_id, SETTINGS)
    await store.open_sale(event_id, T0)
    for now in (T0, T0 + 1_000):
        await sale.at(now)
        place = await room.join(event_id, "ann")
        assert place.state == QueueState.ADMITTED
        await room.spend(event_id, "ann", "h1", place.admitted_ms)
    spends = [
        r for r in await queue_records(store, event_id) if r.to_state == Marker.ADMISSION_SPENT
    ]
    assert len(spends) == 2 and len({r.decision_id for r in spends}) == 2
