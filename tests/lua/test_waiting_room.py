"""The waiting room's scripts (lua/queue_setup.lua, queue_poll.lua, queue_use.lua) through
engine/waiting/room.py, on fakeredis and on real Redis, with the test clock: places drawn
before T0 and taken in arrival order after it, admission in place order at the rate and within
the free units, an admission spent once, and "sold out" only when nothing can come back. The
tokens and draws (engine/waiting/tokens.py) are checked here too."""

import asyncio
import uuid

import pytest

from api.routes.waiting import POLL_SPREAD_MS_MAX, estimate_s, poll_after_ms
from engine.model import errors
from engine.model.event_config import EventConfig
from engine.store import Store
from engine.waiting.draw import entry_of, verify
from engine.waiting.errors import (
    AdmissionExpired,
    AdmissionInvalid,
    AdmissionRequired,
    AdmissionUsed,
    NotInQueue,
    NoWaitingRoom,
    QueueFull,
)
from engine.waiting.room import (
    SPEND_GRACE_MS,
    T0_MARGIN_MS,
    Place,
    QueueState,
    RoomSettings,
    WaitingRoom,
)
from engine.waiting.tokens import admitted_ms_of, draw, issue
from tests.conftest import Sale, open_sale, seats
from tests.helpers import callback

T0 = 1_900_000_000_000
FAST = RoomSettings(admit_per_s=100_000, admit_factor_pct=100, admission_ttl_ms=60_000)
ONE_BY_ONE = RoomSettings(admit_per_s=100, admit_factor_pct=100, admission_ttl_ms=60_000)


async def room_sale(
    store: Store, n_seats: int = 5, settings: RoomSettings = FAST
) -> tuple[Sale, WaitingRoom]:
    """An event with a room, T0 a minute ahead of its test clock."""
    event_id = f"ev-{uuid.uuid4().hex[:8]}"
    await store.create_event(
        event_id, seats(n_seats), EventConfig(hold_ttl_ms=480_000, quarantine_ms=900_000)
    )
    sale = Sale(store, event_id)
    await sale.at(T0 - 60_000)
    room = WaitingRoom(store)
    assert await room.configure(event_id, settings)
    await store.open_sale(event_id, T0)
    return sale, room


async def hold_every_seat(sale: Sale, n_seats: int) -> None:
    """Claims straight through the store (the API is what asks for an admission)."""
    for i in range(n_seats):
        await sale.store.claim(sale.event_id, f"holder{i}", f"h-holder{i}")


async def secret_of(room: WaitingRoom, event_id: str) -> str:
    found = await room.room(event_id)
    assert found is not None
    return found.secret


async def test_a_room_is_set_up_only_before_t0_and_keeps_its_secret(store: Store) -> None:
    sale, room = await room_sale(store)
    secret = await secret_of(room, sale.event_id)
    changed = RoomSettings(admit_per_s=7, admit_factor_pct=300, admission_ttl_ms=30_000)
    assert await room.configure(sale.event_id, changed) is False  # the same room
    assert (await WaitingRoom(store).room(sale.event_id)) == await room.room(sale.event_id)
    figures = await room.figures(sale.event_id)
    assert (figures["admit_per_s"], figures["admit_factor_pct"]) == (7, 300)
    assert figures["admission_ttl_ms"] == 30_000 and not figures["auto"]
    assert (await secret_of(WaitingRoom(store), sale.event_id)) == secret
    await sale.at(T0)
    with pytest.raises(errors.SaleStarted):
        await room.configure(sale.event_id, RoomSettings())
    with pytest.raises(errors.EventNotFound):
        await room.configure("no-such-event", RoomSettings())
    other = await open_sale(store, 1)
    await store.lifecycle.close(other.event_id, "ops")
    with pytest.raises(errors.SaleClosed):
        await room.configure(other.event_id, RoomSettings())


async def test_places_before_t0_follow_the_draw_not_the_arrival(store: Store) -> None:
    sale, room = await room_sale(store)
    logins = [f"u{i:02d}" for i in range(30)]
    for login in logins:
        place = await room.join(sale.event_id, login)
        assert (place.state, place.created, place.position) == (QueueState.WAITING, True, 0)
    again = await room.join(sale.event_id, logins[0])  # a second tab, or a rejoin
    assert again.created is False and again.entries == 30 and again.joined_before_t0 == 30
    await sale.at(T0 - 1)
    assert (await room.look(sale.event_id, logins[5])).position == 0  # drawn at T0 only
    # From T0 on, without admitting anyone (no free seat): positions are the draw's order.
    await sale.at(T0)
    await hold_every_seat(sale, 5)
    secret = await secret_of(room, sale.event_id)
    positions = {u: (await room.look(sale.event_id, u)).position for u in logins}
    assert sorted(positions.values()) == list(range(1, 31))
    by_draw = sorted(logins, key=lambda u: draw(secret, sale.event_id, u))
    assert sorted(logins, key=positions.__getitem__) == by_draw
    assert by_draw != logins  # the draw is not the arrival order


async def test_arrivals_from_t0_on_queue_after_every_draw_in_arrival_order(store: Store) -> None:
    sale, room = await room_sale(store)
    early = [f"early{i}" for i in range(10)]
    for login in early:
        await room.join(sale.event_id, login)
    await sale.at(T0)
    await hold_every_seat(sale, 5)  # nobody is admitted: no seat is free
    late = [f"late{i}" for i in range(10)]
    for n, login in enumerate(late):
        place = await room.join(sale.event_id, login)
        assert place.position == len(early) + n + 1
    assert max([(await room.look(sale.event_id, u)).position for u in early]) == len(early)
    assert (await room.look(sale.event_id, "late0")).joined_before_t0 == len(early)


async def admitted(room: WaitingRoom, event_id: str, logins: list[str]) -> list[str]:
    states = [(u, (await room.look(event_id, u)).state) for u in logins]
    return [u for u, state in states if state == QueueState.ADMITTED]


async def test_the_draw_is_published_at_t0_and_checks_out(store: Store) -> None:
    # ADR 0040: before T0 only the commitment; from T0 the seed and the entries drawn before
    # T0 in place order, a page at a time, which recompute to the same order.
    sale, room = await room_sale(store, 2)
    logins = [f"u{i:02d}" for i in range(12)]
    for login in logins:
        await room.join(sale.event_id, login)
    before = await room.published_draw(sale.event_id, 0, 5)
    assert (before.seed, before.arrivals, before.next_offset) == (None, [], None)
    await sale.at(T0)
    await room.join(sale.event_id, "late")  # after T0: after every draw, not in the list
    pages, offset = [], 0
    while True:
        page = await room.published_draw(sale.event_id, offset, 5)
        assert page.commitment == before.commitment and page.seed is not None
        pages += page.arrivals
        if page.next_offset is None:
            break
        offset = page.next_offset
    assert len(pages) == 12 and verify(before.commitment, page.seed, pages) == []
    assert {a.entry for a in pages} == {entry_of(sale.event_id, u) for u in logins}
    secret = await secret_of(room, sale.event_id)
    by_draw = sorted(logins, key=lambda u: draw(secret, sale.event_id, u))
    assert [a.entry for a in pages] == [entry_of(sale.event_id, u) for u in by_draw]
    assert verify(before.commitment, page.seed, [pages[1], pages[0], *pages[2:]]) != []


async def test_admission_follows_the_places_within_the_free_units(store: Store) -> None:
    settings = RoomSettings(admit_per_s=100_000, admit_factor_pct=150, admission_ttl_ms=60_000)
    sale, room = await room_sale(store, 4, settings)
    logins = [f"u{i:02d}" for i in range(20)]
    for login in logins:
        await room.join(sale.event_id, login)
    await sale.at(T0 - 1)
    assert await admitted(room, sale.event_id, logins) == []  # nobody before T0
    await sale.at(T0)
    first = await room.look(sale.event_id, logins[0])  # this poll admits the first six
    assert first.admitted == 6  # ceil(4 free x 150%)
    secret = await secret_of(room, sale.event_id)
    by_draw = sorted(logins, key=lambda u: draw(secret, sale.event_id, u))
    assert sorted(await admitted(room, sale.event_id, logins)) == sorted(by_draw[:6])
    assert (await room.look(sale.event_id, by_draw[6])).position == 1  # the next one
    # Three of them claim: 1 seat free, 3 admissions unused: nobody more for now.
    for login in by_draw[:3]:
        place = await room.look(sale.event_id, login)
        await room.spend(sale.event_id, login, f"h-{login}", place.admitted_ms)
        await store.claim(sale.event_id, login, f"h-{login}")
    assert (await room.look(sale.event_id, by_draw[6])).admitted == 6
    # The unused three lapse: the one free seat takes two admissions (150%), the next two.
    await sale.at(T0 + 60_000)
    place = await room.look(sale.event_id, by_draw[3])
    assert place.state == QueueState.LAPSED
    assert place.admitted == 8
    assert sorted(await admitted(room, sale.event_id, logins)) == sorted(by_draw[6:8])
    figures = await room.figures(sale.event_id)
    assert (figures["used"], figures["lapsed"], figures["outstanding"]) == (3, 3, 2)


async def test_admission_rate_is_a_token_bucket_full_at_t0(store: Store) -> None:
    sale, room = await room_sale(store, 50, RoomSettings(admit_per_s=8, admit_factor_pct=100))
    for i in range(20):
        await room.join(sale.event_id, f"u{i:02d}")
    await sale.at(T0)
    assert (await room.look(sale.event_id, "u00")).admitted == 2  # a quarter second's worth
    assert (await room.look(sale.event_id, "u00")).admitted == 2  # the same instant: no more
    await sale.at(T0 + 250)
    assert (await room.look(sale.event_id, "u00")).admitted == 4
    await sale.at(T0 + 60_000)  # a long pause fills the bucket, never beyond its size
    place = await room.look(sale.event_id, "u00")
    assert place.admitted == 6
    assert 0 < place.rate_per_s < 8


async def spend(room: WaitingRoom, event_id: str, login: str, hold_id: str) -> Place:
    place = await room.look(event_id, login)
    await room.spend(event_id, login, hold_id, place.admitted_ms)
    return place


async def test_an_admission_is_spent_once_by_one_claim(store: Store) -> None:
    sale, room = await room_sale(store, 5)
    for login in ("alice", "bob"):
        await room.join(sale.event_id, login)
    await sale.at(T0)
    place = await spend(room, sale.event_id, "alice", "h-alice")
    await room.spend(sale.event_id, "alice", "h-alice", place.admitted_ms)  # the same claim
    with pytest.raises(AdmissionUsed):
        await room.spend(sale.event_id, "alice", "h-other", place.admitted_ms)
    with pytest.raises(AdmissionRequired):
        await room.spend(sale.event_id, "carol", "h-carol", place.admitted_ms)
    used = await room.look(sale.event_id, "alice")
    assert (used.state, used.hold_id) == (QueueState.USED, "h-alice")
    with pytest.raises(AdmissionExpired):  # a token naming another admission of this login
        await room.spend(sale.event_id, "bob", "h-bob", place.admitted_ms - 1)
    await sale.at(T0 + FAST.admission_ttl_ms)  # bob's lapses unused; alice's replay ends too
    with pytest.raises(AdmissionExpired):
        await spend(room, sale.event_id, "bob", "h-bob")
    with pytest.raises(AdmissionExpired):
        await room.spend(sale.event_id, "alice", "h-alice", place.admitted_ms)
    assert (await room.look(sale.event_id, "bob")).state == QueueState.LAPSED


async def test_a_spent_admission_holds_its_unit_until_its_claim_lands(store: Store) -> None:
    # The claim is the call after the spend: between the two, the seat is still free and the
    # spent admission no longer waits to be used. Another look then must not admit the next
    # place, or two buyers are told "your turn" for one seat (a real interleaving of two pages).
    sale, room = await room_sale(store, 1, ONE_BY_ONE)
    for login in ("alice", "bob"):
        await room.join(sale.event_id, login)
    await sale.at(T0)
    (first,) = await admitted(room, sale.event_id, ["alice", "bob"])
    second = "bob" if first == "alice" else "alice"
    await spend(room, sale.event_id, first, f"h-{first}")
    assert (await room.look(sale.event_id, second)).state == QueueState.WAITING  # not yet
    await store.claim(sale.event_id, first, f"h-{first}")  # the claim lands: the seat is held
    assert (await room.look(sale.event_id, second)).state == QueueState.WAITING
    assert (await room.figures(sale.event_id))["outstanding"] == 0  # no admission is unused
    await store.release(sale.event_id, f"h-{first}", first)  # the seat comes back
    await sale.at(T0 + SPEND_GRACE_MS)  # the spend's count ends with its grace
    assert (await room.look(sale.event_id, second)).state == QueueState.ADMITTED


async def test_no_free_seat_keeps_the_admission_and_sold_out_is_for_good(store: Store) -> None:
    sale, room = await room_sale(store, 1, RoomSettings(admit_per_s=100, admit_factor_pct=200))
    for login in ("alice", "bob", "carol"):
        await room.join(sale.event_id, login)
    await sale.at(T0)
    await room.look(sale.event_id, "alice")  # admits two: 1 free x 200%
    first, second = await admitted(room, sale.event_id, ["alice", "bob", "carol"])
    await spend(room, sale.event_id, first, f"h-{first}")
    await store.claim(sale.event_id, first, f"h-{first}")
    with pytest.raises(errors.SoldOut):  # nothing free now, but the seat is only held
        await spend(room, sale.event_id, second, f"h-{second}")
    assert (await room.look(sale.event_id, second)).state == QueueState.ADMITTED  # kept
    waiting = next(u for u in ("alice", "bob", "carol") if u not in (first, second))
    assert (await room.look(sale.event_id, waiting)).state == QueueState.WAITING
    await store.start_charge(sale.event_id, f"h-{first}", first, "c1", 100)
    await callback(sale, "c1", "CAPTURED")  # sold: nothing can come back
    for login in (second, waiting):
        assert (await room.look(sale.event_id, login)).state == QueueState.SOLD_OUT
    with pytest.raises(errors.SoldOut):
        await spend(room, sale.event_id, second, f"h-{second}")
    assert (await room.look(sale.event_id, first)).state == QueueState.USED  # its hold is told
    late = await room.join(sale.event_id, "dave")  # no place is given in a sold-out room
    assert (late.state, late.created, late.entries) == (QueueState.SOLD_OUT, False, 3)


async def test_used_or_lapsed_entries_join_again_at_the_end(store: Store) -> None:
    sale, room = await room_sale(store, 1, ONE_BY_ONE)
    for login in ("alice", "bob", "carol"):
        await room.join(sale.event_id, login)
    await sale.at(T0)
    (first,) = await admitted(room, sale.event_id, ["alice", "bob", "carol"])
    again = await room.join(sale.event_id, first)  # admitted: a rejoin keeps the admission
    assert (again.state, again.created) == (QueueState.ADMITTED, False)
    await sale.at(T0 + ONE_BY_ONE.admission_ttl_ms)  # lapses; the next one is admitted
    (second,) = await admitted(room, sale.event_id, ["alice", "bob", "carol"])
    assert second != first
    back = await room.join(sale.event_id, first)
    assert (back.state, back.created, back.position) == (QueueState.WAITING, True, 2)
    await spend(room, sale.event_id, second, f"h-{second}")  # used: it may join again too
    # (no claim came: the seat is still free, so once the spend's grace ends the third place
    # is admitted)
    await sale.at(T0 + ONE_BY_ONE.admission_ttl_ms + SPEND_GRACE_MS)
    assert (await room.join(sale.event_id, second)).position == 2
    assert (await room.look(sale.event_id, first)).position == 1


async def test_a_look_writes_nothing_unless_it_admits(store: Store) -> None:
    sale, room = await room_sale(store, 1, RoomSettings(admit_per_s=100, admit_factor_pct=100))
    for login in ("alice", "bob"):
        await room.join(sale.event_id, login)
    await sale.at(T0)
    await room.look(sale.event_id, "alice")  # admits one: the free seat's worth
    keys = room.keys(sale.event_id)[1:]
    before = [await store.client.dump(k) for k in keys]
    for login in ("alice", "bob", "alice"):
        await room.look(sale.event_id, login)
    assert [await store.client.dump(k) for k in keys] == before


async def test_refusals_say_why(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    sale, room = await room_sale(store, 1)
    with pytest.raises(NotInQueue):
        await room.look(sale.event_id, "nobody")
    monkeypatch.setattr("engine.waiting.room.ENTRIES_MAX", 2)
    await room.join(sale.event_id, "a")
    await room.join(sale.event_id, "b")
    with pytest.raises(QueueFull):
        await room.join(sale.event_id, "c")
    assert (await room.join(sale.event_id, "a")).created is False  # a place held is kept
    plain = await open_sale(store, 1)
    with pytest.raises(NoWaitingRoom):
        await room.join(plain.event_id, "a")
    with pytest.raises(errors.EventNotFound):
        await room.join("no-such-event", "a")
    draft = f"ev-{uuid.uuid4().hex[:8]}"
    await store.create_event(
        draft, seats(1), EventConfig(hold_ttl_ms=480_000, quarantine_ms=900_000)
    )
    await room.configure(draft, FAST)
    with pytest.raises(errors.SaleNotOpen):
        await room.join(draft, "a")
    await store.lifecycle.close(sale.event_id, "ops")
    with pytest.raises(errors.SaleClosed):
        await room.join(sale.event_id, "a")


async def test_the_room_of_an_event_is_remembered_only_once_it_cannot_change(
    store: Store,
) -> None:
    room = WaitingRoom(store)
    plain = await open_sale(store, 1)  # opened now by the real clock: started
    assert room.skips(plain.event_id) is False  # not known yet
    assert await room.room(plain.event_id) is None
    assert room.skips(plain.event_id) is True
    sale, _ = await room_sale(store)  # a room: remembered at once
    assert await room.room(sale.event_id) is not None and room.skips(sale.event_id) is False
    draft = f"ev-{uuid.uuid4().hex[:8]}"
    await store.create_event(
        draft, seats(1), EventConfig(hold_ttl_ms=480_000, quarantine_ms=900_000)
    )
    assert await room.room(draft) is None and room.skips(draft) is False  # may get one
    # Open with T0 ahead and no room: "no room" holds until shortly before T0 (claims are
    # refused until T0 anyway), then it is asked again and the room set up meanwhile is found.
    await store.open_sale(draft, await store.read.server_time_ms() + 1_000 + T0_MARGIN_MS)
    assert await room.room(draft) is None and room.skips(draft) is True
    await room.configure(draft, FAST)
    assert room.skips(draft) is True
    await asyncio.sleep(1.05)
    assert room.skips(draft) is False
    assert await room.room(draft) is not None


def test_tokens_bind_an_admission_to_one_login_and_one_event() -> None:
    secret = "ab" * 32
    token = issue(secret, "ev", "alice", 1_000, 61_000).token
    assert admitted_ms_of(secret, "ev", "alice", token) == 1_000
    stem, mac = token.rsplit(".", 1)
    for forged in (
        token.replace("61000", "99000"),
        f"{stem}.{'0' * 64}",
        token + "0",
        "x" * 500,
        "",
    ):
        with pytest.raises(AdmissionInvalid):
            admitted_ms_of(secret, "ev", "alice", forged)
    for event_id, login, key in (
        ("ev", "bob", secret),
        ("ev2", "alice", secret),
        ("ev", "alice", "cd" * 32),
    ):
        with pytest.raises(AdmissionInvalid):
            admitted_ms_of(key, event_id, login, token)
    alice = draw(secret, "ev", "alice")
    assert mac and alice == draw(secret, "ev", "alice") != draw("cd" * 32, "ev", "alice")
    assert alice != draw(secret, "ev2", "alice")  # each event draws its own
    assert 0 <= draw(secret, "ev", "bob") < 2**32


def a_place(**changes: object) -> Place:
    fields: dict[str, object] = {
        "state": QueueState.WAITING, "position": 0, "admitted": 0, "rate_per_s": 0.0,
        "free": 80, "held": 0, "blocked": 0, "admitted_ms": 0, "hold_id": "",
        "opens_at_ms": T0, "now_ms": T0 - 3_000, "entries": 10_000, "joined_before_t0": 10_000,
        "created": False, "ttl_ms": 60_000, "first_join_ms": T0 - 13_000, "draw_share": 0.0,
    }  # fmt: skip
    return Place(**{**fields, **changes})  # type: ignore[arg-type]


def test_looks_are_spread_by_place_and_bounded() -> None:
    front, back = a_place(draw_share=0.0), a_place(draw_share=0.99)
    assert poll_after_ms(front) == 3_000  # at T0, the front of the line first
    assert 3_000 + 9_800 <= (poll_after_ms(back) or 0) <= 3_000 + POLL_SPREAD_MS_MAX
    # Few joined yet, but early: the spread counts on those still to come at the same rate.
    early = a_place(draw_share=0.5, joined_before_t0=100, first_join_ms=T0 - 3_100)
    assert poll_after_ms(early) == 3_000 + 3_100 // 2  # 100 joined in 0.1 s: 3,100 by T0
    drawn = {"now_ms": T0 + 1_000, "free": 0}
    near, far = a_place(position=3, **drawn), a_place(position=9_000, **drawn)
    assert 1_000 <= (poll_after_ms(near) or 0) <= 1_250  # at most every second
    assert 20_000 <= (poll_after_ms(far) or 0) <= 25_000  # the back, every 20 s
    coming = a_place(position=40, rate_per_s=100.0, free=5, now_ms=T0 + 1_000)
    assert estimate_s(coming) == 0.4
    assert 250 <= (poll_after_ms(coming) or 0) <= 312  # admission is near: sooner
    assert estimate_s(a_place(position=40, rate_per_s=100.0, free=0, now_ms=T0 + 1)) is None
    assert poll_after_ms(a_place(state=QueueState.ADMITTED, free=3)) is None  # claim now
    assert poll_after_ms(a_place(state=QueueState.ADMITTED, free=0)) is not None
    assert poll_after_ms(a_place(state=QueueState.SOLD_OUT)) is None
