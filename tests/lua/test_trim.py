"""Trimming ended holds (lua/hold_trim.lua, engine/workers/trim.py, ADR 0018), on fakeredis and on
real Redis: what goes (a hold that ended without ever having had a charge, once the ledger holds its
decision and the retention passed), what stays (everything else), what a login and a replayed claim
see afterwards, and the bound it puts on an event's memory and on the sold-out snapshot."""

import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest
from redis.exceptions import ResponseError

from engine.gate.claims import GatedClaims
from engine.gate.soldout import SoldOutMemory
from engine.model import errors
from engine.model.audit import Invariant
from engine.model.event_config import EventConfig
from engine.model.holds import SeatSpec
from engine.model.keys import EVENT_KEYS
from engine.model.ledger_progress import LEDGER_GROUP
from engine.model.states import HoldState, LatePolicy
from engine.store import Store
from engine.store.scripts import Scripts
from engine.workers.looks import FULL_LOOK_S
from engine.workers.trim import Trimmer
from tests.conftest import Sale, _drop_prefix, _real_client, new_prefix, open_sale
from tests.helpers import callback, wait_until

T0 = 1_900_000_000_000
TTL, Q = 1_000, 5_000
RETENTION = 60_000
LATER = T0 + 100_000  # past every decision of the cases below by more than the retention


async def ledger_takes_all(sale: Sale, *, commit: bool = True) -> None:
    """What the ledger writer does to the floor: read every outbox entry with the ledger group
    and, once committed, acknowledge it (commit=False leaves them pending)."""
    client, stream = sale.store.client, sale.store.key(sale.event_id, "outbox")
    with contextlib.suppress(ResponseError):  # BUSYGROUP: the group exists
        await client.xgroup_create(stream, LEDGER_GROUP, id="0", mkstream=True)
    reply = await client.xreadgroup(LEDGER_GROUP, "test", {stream: ">"}, count=100_000)
    ids = [entry_id for entry_id, _fields in reply[0][1]] if reply else []
    if ids and commit:
        await client.xack(stream, LEDGER_GROUP, *ids)


async def present(sale: Sale, hold_id: str) -> tuple[bool, bool]:
    """(in the holds hash, in the ended index)"""
    client = sale.store.client
    in_holds = await client.hexists(sale.store.key(sale.event_id, "holds"), hold_id)
    score = await client.zscore(sale.store.key(sale.event_id, "ended"), hold_id)
    return bool(in_holds), score is not None


class Watched(Trimmer):
    """A trimmer that notes each event it visits."""

    def __init__(self, store: Store, **kw: int | bool) -> None:
        super().__init__(store, **kw)  # type: ignore[arg-type]
        self.visited: list[str] = []

    async def trim_event(self, event_id: str) -> bool:
        self.visited.append(event_id)
        return await super().trim_event(event_id)


def trimmer(store: Store, **kw: int | bool) -> Trimmer:
    return Trimmer(store, retention_ms=RETENTION, **kw)  # type: ignore[arg-type]


# -- the table: hold h1 of login alice in some state; is it trimmed? ---------------------------

Arrange = Callable[[Sale], Awaitable[None]]


async def released(sale: Sale) -> None:
    await sale.store.claim(sale.event_id, "alice", "h1")
    await sale.store.release(sale.event_id, "h1", "alice")


async def replaced(sale: Sale) -> None:
    await sale.store.claim(sale.event_id, "alice", "h1")
    await sale.store.claim(sale.event_id, "alice", "h2")  # h1 RELEASED: replaced_by_new_claim


async def expired(sale: Sale) -> None:
    await sale.store.claim(sale.event_id, "alice", "h1")
    await sale.at(T0 + TTL)
    await sale.store.sweep(sale.event_id)


async def reserved(sale: Sale) -> None:
    await sale.store.claim(sale.event_id, "alice", "h1")


async def charging(sale: Sale) -> None:
    await sale.store.claim(sale.event_id, "alice", "h1")
    await sale.store.start_charge(sale.event_id, "h1", "alice", "c1", 100)


async def released_after_a_decline(sale: Sale) -> None:
    await charging(sale)
    await callback(sale, "c1", "DECLINED")  # resolved: the hold is RESERVED, no charge in flight
    await sale.store.release(sale.event_id, "h1", "alice")


async def released_while_charging(sale: Sale) -> None:  # RELEASED, seat BLOCKED
    await charging(sale)
    await sale.store.release(sale.event_id, "h1", "alice")


async def quarantined(sale: Sale) -> None:
    await charging(sale)
    await sale.at(T0 + TTL)
    await sale.store.sweep(sale.event_id)


async def expired_after_quarantine(sale: Sale) -> None:
    await quarantined(sale)
    await sale.at(T0 + TTL + Q)
    await sale.store.sweep_quarantine(sale.event_id)


async def confirmed(sale: Sale) -> None:
    await charging(sale)
    await callback(sale, "c1", "CAPTURED")


@dataclass(frozen=True)
class Case:
    arrange: Arrange
    state: HoldState
    trimmed: bool
    at_ms: int = LATER  # when the trimmer runs
    ledger: str = "all"  # "all": committed; "pending": read, not committed; "none": not read
    policy: LatePolicy = LatePolicy.QUARANTINE


CASES = {
    "released_without_charge": Case(released, HoldState.RELEASED, True),
    "replaced_by_a_new_claim": Case(replaced, HoldState.RELEASED, True),
    "expired_without_charge": Case(expired, HoldState.EXPIRED, True),
    "within_the_retention": Case(released, HoldState.RELEASED, False, at_ms=T0 + RETENTION),
    "just_past_the_retention": Case(released, HoldState.RELEASED, True, at_ms=T0 + RETENTION + 1),
    "ledger_has_not_read_it": Case(released, HoldState.RELEASED, False, ledger="none"),
    "ledger_has_not_committed_it": Case(released, HoldState.RELEASED, False, ledger="pending"),
    "reserved": Case(reserved, HoldState.RESERVED, False),
    "reserved_with_a_charge": Case(charging, HoldState.RESERVED, False),
    "released_after_a_declined_charge": Case(released_after_a_decline, HoldState.RELEASED, False),
    "released_with_its_seat_blocked": Case(released_while_charging, HoldState.RELEASED, False),
    "quarantined": Case(quarantined, HoldState.QUARANTINED, False),
    "expired_after_a_quarantine": Case(expired_after_quarantine, HoldState.EXPIRED, False),
    "expired_with_its_charge_refunded": Case(
        quarantined, HoldState.EXPIRED, False, policy=LatePolicy.RELEASE_REFUND
    ),
    "confirmed": Case(confirmed, HoldState.CONFIRMED, False),
}


@pytest.mark.parametrize("name", list(CASES))
async def test_what_is_trimmed(store: Store, name: str) -> None:
    case = CASES[name]
    sale = await open_sale(store, 3, hold_ttl_ms=TTL, quarantine_ms=Q, policy=case.policy)
    await sale.at(T0)
    if case.ledger == "none":
        await ledger_takes_all(sale)  # the group exists, but it read nothing of what follows
    await case.arrange(sale)
    assert (await store.read.hold(sale.event_id, "h1")).state == case.state
    if case.ledger != "none":
        await ledger_takes_all(sale, commit=case.ledger == "all")
    await sale.at(case.at_ms)
    t = trimmer(store)
    assert await t.trim_event(sale.event_id) is False
    indexed = case.arrange in (released, replaced, expired)  # ended, no charge ever
    assert await present(sale, "h1") == ((False, False) if case.trimmed else (True, indexed))
    assert t.stats.trimmed == int(case.trimmed)
    if case.trimmed:
        with pytest.raises(errors.HoldNotFound):
            await store.read.hold(sale.event_id, "h1")
    else:
        assert (await store.read.hold(sale.event_id, "h1")).state == case.state
    await sale.audit_ok()


# -- logins, replays, batches, the floor ---------------------------------------------------


async def test_a_login_entry_goes_only_with_the_hold_it_names(store: Store) -> None:
    sale = await open_sale(store, 3, now_ms=T0)
    await replaced(sale)  # alice -> h2; h1 ended
    await store.claim(sale.event_id, "bob", "b1")
    await store.release(sale.event_id, "b1", "bob")
    logins = store.key(sale.event_id, "logins")
    # A login entry left naming an ended hold (hold_end drops it; the trim must never leave
    # one dangling, since the login's next claim reads the hold it names).
    await store.client.hset(logins, "bob", "b1")
    await ledger_takes_all(sale)
    await sale.at(LATER)
    await trimmer(store).trim_event(sale.event_id)
    assert await store.client.hgetall(logins) == {"alice": "h2"}
    assert await present(sale, "h1") == (False, False)
    assert await present(sale, "b1") == (False, False)
    # Both logins claim again as usual: alice's claim replaces h2, bob's finds nothing to read.
    assert (await store.claim(sale.event_id, "alice", "h3")).listing == "s00000"
    assert not (await store.claim(sale.event_id, "bob", "b2")).replay
    await sale.audit_ok()


async def test_a_claim_retried_within_the_retention_gets_its_replay(store: Store) -> None:
    sale = await open_sale(store, 3, now_ms=T0)
    await released(sale)
    await ledger_takes_all(sale)
    await sale.at(T0 + RETENTION)
    await trimmer(store).trim_event(sale.event_id)
    again = await store.claim(sale.event_id, "alice", "h1")
    assert (again.replay, again.state) == (True, HoldState.RELEASED)


async def test_a_claim_retried_after_the_retention_makes_a_new_hold_under_the_same_id(
    store: Store,
) -> None:
    """What ADR 0018 refuses to promise: past the retention the key is forgotten, so the same
    Idempotency-Key claims again. The outbox (and the ledger) already hold a decision of that
    hold id, which the audit reports: clients must not reuse a key for a new claim."""
    sale = await open_sale(store, 3, now_ms=T0)
    await released(sale)
    await ledger_takes_all(sale)
    await sale.at(LATER)
    await trimmer(store).trim_event(sale.event_id)
    again = await store.claim(sale.event_id, "alice", "h1")
    assert (again.replay, again.state) == (False, HoldState.RESERVED)
    report = await store.read.audit(sale.event_id)
    assert [v.invariant for v in report.violations] == [Invariant.ONE_TERMINAL_RECORD]


async def test_batches_report_what_is_left_and_the_floor_ends_a_batch(store: Store) -> None:
    sale = await open_sale(store, 10, now_ms=T0)
    for i in range(5):
        await store.claim(sale.event_id, f"u{i}", f"h{i}")
        await store.release(sale.event_id, f"h{i}", f"u{i}")
    await ledger_takes_all(sale)
    await store.claim(sale.event_id, "late", "h9")
    await sale.at(T0 + 1)
    await store.release(sale.event_id, "h9", "late")  # decided after the ledger's floor
    await sale.at(LATER)
    t = trimmer(store, batch_max=2)
    floor = await t.ledger_floor(sale.event_id)
    assert floor is not None
    got = [await t.step(sale.event_id, floor) for _ in range(3)]
    assert [(r.trimmed, r.more) for r in got] == [(2, True), (2, True), (1, False)]
    assert await present(sale, "h9") == (True, True)  # the floor stopped the batch
    assert (await t.step(sale.event_id, floor)).trimmed == 0
    await ledger_takes_all(sale)
    assert await t.trim_event(sale.event_id) is False
    assert await present(sale, "h9") == (False, False)
    await sale.audit_ok()


async def test_rounds_max_bounds_one_pass(store: Store) -> None:
    sale = await open_sale(store, 10, now_ms=T0)
    for i in range(7):
        await store.claim(sale.event_id, "u", f"h{i}")  # each replaces the one before
    await ledger_takes_all(sale)
    await sale.at(LATER)
    t = trimmer(store, batch_max=2, rounds_max=2)
    assert await t.run_once() is True  # 4 of 6 ended holds trimmed, work left
    assert await t.run_once() is False
    assert t.stats.trimmed == 6
    assert await store.client.hlen(store.key(sale.event_id, "holds")) == 1


async def test_without_a_ledger_nothing_is_trimmed_unless_chosen(store: Store) -> None:
    sale = await open_sale(store, 3, now_ms=T0)
    await released(sale)
    await sale.at(LATER)
    t = trimmer(store)
    assert await t.ledger_floor(sale.event_id) is None
    await t.run_once()
    assert (t.stats.unledgered, t.stats.trimmed) == (1, 0)
    assert await present(sale, "h1") == (True, True)
    t = trimmer(store, without_ledger=True)  # ONSALE_TRIM_WITHOUT_LEDGER=1: retention alone
    await t.run_once()
    assert t.stats.trimmed == 1
    assert await present(sale, "h1") == (False, False)


@pytest.mark.redis  # fakeredis does not pass a script's error({err = ...}) through as is
async def test_an_index_entry_naming_a_hold_money_touched_is_a_bug(real_store: Store) -> None:
    store = real_store
    sale = await open_sale(store, 3, now_ms=T0)
    await released_while_charging(sale)
    await store.client.zadd(store.key(sale.event_id, "ended"), {"h1": T0})
    await ledger_takes_all(sale)
    await sale.at(LATER)
    with pytest.raises(errors.InvariantViolation):
        await trimmer(store).trim_event(sale.event_id)
    assert await present(sale, "h1") == (True, True)


async def test_trimming_an_unknown_event_is_event_not_found(store: Store) -> None:
    with pytest.raises(errors.EventNotFound):
        await trimmer(store).step("no-such-event", "+")


async def test_ended_holds_restored_from_the_ledger_are_indexed_and_trimmed(store: Store) -> None:
    event_id = "ev-restored"
    await store.create_event(
        event_id, [SeatSpec("s1", 1.0)], EventConfig(hold_ttl_ms=TTL, quarantine_ms=Q)
    )
    restore = store.restore
    await restore.hold(event_id, "r1", "ann", "s1", "", T0, HoldState.RELEASED)
    await restore.hold(event_id, "r2", "bob", "s1", "c2", T0, HoldState.EXPIRED)  # was paying
    await restore.mark(event_id, T0)
    await store.open_sale(event_id)
    sale = Sale(store, event_id)
    assert [await present(sale, h) for h in ("r1", "r2")] == [(True, True), (True, False)]
    await ledger_takes_all(sale)  # the rebuilt outbox gets its ledger group again
    await sale.at(LATER)
    await trimmer(store).trim_event(event_id)
    assert [await present(sale, h) for h in ("r1", "r2")] == [(False, False), (True, False)]


async def test_the_audit_sees_a_wrong_index_and_a_dangling_login(store: Store) -> None:
    sale = await open_sale(store, 3, now_ms=T0)
    await released(sale)
    await store.claim(sale.event_id, "bob", "b1")
    await store.start_charge(sale.event_id, "b1", "bob", "c1", 100)
    ended, logins = store.key(sale.event_id, "ended"), store.key(sale.event_id, "logins")
    await sale.audit_ok()
    await store.client.zrem(ended, "h1")  # would stay for ever
    await store.client.zadd(ended, {"b1": T0})  # money touched it: must never be trimmed
    await store.client.hset(logins, "cy", "gone")  # names a hold that is not there
    report = await store.read.audit(sale.event_id)
    assert [str(v) for v in report.violations] == [
        "ended_indexed: ended index differs: missing ['h1'], stray ['b1']",
        "logins_name_holds: login 'cy' names unknown hold gone",
    ]


# -- the bounds ---------------------------------------------------------------------------


async def test_a_flood_of_claims_leaves_only_live_state_after_a_trim(store: Store) -> None:
    sale = await open_sale(store, 2, now_ms=T0)
    n = 300
    for i in range(n):
        await store.claim(sale.event_id, "flood", f"f{i}")  # each releases the one before
    holds, ended = store.key(sale.event_id, "holds"), store.key(sale.event_id, "ended")
    assert (await store.client.hlen(holds), await store.client.zcard(ended)) == (n, n - 1)
    await ledger_takes_all(sale)
    await sale.at(LATER)
    assert await trimmer(store).run_once() is False
    assert (await store.client.hlen(holds), await store.client.zcard(ended)) == (1, 0)
    assert await store.client.hgetall(store.key(sale.event_id, "logins")) == {"flood": f"f{n - 1}"}
    await sale.audit_ok()


@pytest.mark.parametrize("trimmed", [True, False], ids=["trimmed", "untrimmed"])
async def test_the_sold_out_memory_survives_a_flood_once_trimmed(
    store: Store, trimmed: bool
) -> None:
    """Past snapshot_max holds the memory switches itself off for the event (the snapshot would
    cost more than it saves); trimming brings a flooded event back under it."""
    memory = SoldOutMemory(store.client, store.prefix, ttl_s=30.0, snapshot_max=50)
    claims = GatedClaims(store, memory)
    await memory.start()
    try:
        await wait_until(lambda: memory.listening)
        sale = await open_sale(store, 3, now_ms=T0)
        for i in range(80):
            await claims.claim(sale.event_id, "flood", f"f{i}")
        await claims.claim(sale.event_id, "w0", "win0")
        await claims.claim(sale.event_id, "w1", "win1")  # sold out, 82 holds seen
        if trimmed:
            await ledger_takes_all(sale)
            await sale.at(LATER)
            await trimmer(store).trim_event(sale.event_id)
        with pytest.raises(errors.SoldOut):
            await claims.claim(sale.event_id, "late", "k0")  # Redis says it: memory is tried
        await wait_until(lambda: not memory._entering)
        for i in range(1, 21):
            with pytest.raises(errors.SoldOut):
                await claims.claim(sale.event_id, f"late{i}", f"k{i}")
        assert memory.stats.answered == (20 if trimmed else 0)
        assert (await claims.claim(sale.event_id, "w0", "win0")).replay  # a retry keeps its hold
    finally:
        await memory.stop()


@pytest.mark.redis
async def test_a_pass_visits_only_the_events_with_a_hold_old_enough_to_go() -> None:
    """On the server's clock, a pass reads every event's oldest ended hold at once and runs the
    script only where one is past the retention: idle events cost no script call. (With the
    tests' clocks every event is visited, as above.)"""
    client = _real_client()
    store = Store(client, scripts=Scripts(client), prefix=new_prefix())
    await store.scripts.load_all()
    try:
        busy = await open_sale(store, 3)
        await store.claim(busy.event_id, "u", "h1")
        await store.claim(busy.event_id, "u", "h2")  # h1 ended (replaced): old enough at once
        idle = [await open_sale(store, 2) for _ in range(5)]
        await store.claim(idle[0].event_id, "v", "k1")  # a live hold: nothing ended
        t = Watched(store, retention_ms=0, without_ledger=True)
        visited = t.visited
        assert await t.run_once() is False
        assert visited == [busy.event_id] and t.stats.trimmed == 1
        assert await t.run_once() is False and visited == [busy.event_id]  # nothing left
    finally:
        await _drop_prefix(client, store.prefix)
        await client.aclose()


async def test_the_trim_index_keeps_each_events_oldest_ended_hold(store: Store) -> None:
    """lua/_lib.lua trim_by and lua/hold_trim.lua (on fakeredis and real Redis): a hold that
    ends without a charge puts its event in the trim index at its end; later ends write no
    later score; a trim sets the score to the oldest ended hold left, and the event leaves the
    index once none is left."""
    sale = await open_sale(store, 4, hold_ttl_ms=TTL, now_ms=T0)
    trims = store.keys(sale.event_id)[len(EVENT_KEYS) + 1]

    async def score() -> float | None:
        found = await store.client.zscore(trims, sale.event_id)
        return float(found) if found is not None else None

    await store.claim(sale.event_id, "u1", "h1")
    assert await score() is None  # live holds only
    await store.release(sale.event_id, "h1", "u1")
    assert await score() == T0
    await sale.at(T0 + 10)
    await store.claim(sale.event_id, "u2", "h2")
    await store.release(sale.event_id, "h2", "u2")
    assert await score() == T0  # the oldest stays
    await ledger_takes_all(sale)
    await sale.at(T0 + RETENTION + 5)  # h1 past the retention, h2 not yet
    await trimmer(store).trim_event(sale.event_id)
    assert await present(sale, "h1") == (False, False)
    assert await score() == T0 + 10  # exactly h2's end now
    await sale.at(T0 + RETENTION + 20)
    await trimmer(store).trim_event(sale.event_id)
    assert await score() is None
    await sale.audit_ok()


async def test_a_pass_reads_the_trim_index_and_now_and_then_every_event() -> None:
    """On the server's clock a pass reads the trim index, not every event: an event with an
    ended hold its index entry lost is not visited, until the look at every event (every
    FULL_LOOK_S) finds it."""
    client = _real_client()
    store = Store(client, scripts=Scripts(client), prefix=new_prefix())
    await store.scripts.load_all()
    try:
        lost, kept = await open_sale(store, 3), await open_sale(store, 3)
        for sale in (lost, kept):
            await store.claim(sale.event_id, "u", "h1")
            await store.claim(sale.event_id, "u", "h2")  # h1 ended (replaced)
        await client.zrem(store.keys(lost.event_id)[len(EVENT_KEYS) + 1], lost.event_id)
        t = Watched(store, retention_ms=0, without_ledger=True)
        visited = t.visited
        t.looks.full_look_at = time.monotonic()  # just looked at every event: the index now
        await t.run_once()
        assert visited == [kept.event_id]
        t.looks.full_look_at -= FULL_LOOK_S
        await t.run_once()
        assert visited == [kept.event_id, lost.event_id] and t.stats.trimmed == 2
    finally:
        await _drop_prefix(client, store.prefix)
        await client.aclose()
