"""The waiting room under real concurrency on real Redis, with the production scripts (the server
clock): thousands of joins from several tabs at once before T0, polls racing to admit after it,
and admitted logins spending one admission from several tabs at once. Each script is atomic;
these tests check that every interleaving of them still gives the fair order, one place per
login, one claim per admission, and no admission beyond the free units or without a place."""

import asyncio
import random
import uuid
from collections import Counter
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from engine.model import errors
from engine.model.event_config import EventConfig
from engine.store import Store
from engine.store.scripts import Scripts
from engine.waiting.errors import AdmissionRequired, AdmissionUsed
from engine.waiting.room import QueueState, RoomSettings, WaitingRoom
from engine.waiting.tokens import draw
from tests.conftest import REDIS_URL, new_prefix, seats

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.fixture
async def race_store() -> AsyncIterator[Store]:
    """Production scripts (the real server clock), 200 connections."""
    pool = aioredis.BlockingConnectionPool.from_url(
        REDIS_URL, decode_responses=True, max_connections=200, timeout=30, socket_timeout=30
    )
    client = aioredis.Redis.from_pool(pool)
    store = Store(client, scripts=Scripts(client), prefix=new_prefix(), timeout_s=30)
    await store.scripts.load_all()
    yield store
    async for key in client.scan_iter(match=f"{store.prefix}:*", count=1000):
        await client.delete(key)
    await client.aclose()


async def room_event(
    store: Store, n_seats: int, settings: RoomSettings, t0_in_ms: int
) -> tuple[str, WaitingRoom, int]:
    event_id = f"ev-{uuid.uuid4().hex[:8]}"
    await store.create_event(
        event_id, seats(n_seats), EventConfig(hold_ttl_ms=480_000, quarantine_ms=900_000)
    )
    room = WaitingRoom(store)
    assert await room.configure(event_id, settings)
    t0 = await store.read.server_time_ms() + t0_in_ms
    await store.open_sale(event_id, t0)
    return event_id, room, t0


async def until(store: Store, at_ms: int) -> None:
    """Sleep until the server clock reaches `at_ms` (T0)."""
    await asyncio.sleep(max(0, at_ms - await store.read.server_time_ms()) / 1000 + 0.01)
    assert await store.read.server_time_ms() >= at_ms


async def test_tabs_joining_at_once_get_one_place_each_in_the_draws_order(
    race_store: Store,
) -> None:
    settings = RoomSettings(admit_per_s=100_000, admit_factor_pct=100, admission_ttl_ms=60_000)
    event_id, room, t0 = await room_event(race_store, 40, settings, 6_000)
    rng = random.Random(29)
    logins = [f"u{i:04d}" for i in range(2_000)]
    tabs = [login for login in logins for _ in range(rng.randint(1, 3))]
    rng.shuffle(tabs)
    places = await asyncio.gather(*(room.join(event_id, login) for login in tabs))
    assert Counter(login for login, p in zip(tabs, places, strict=True) if p.created) == Counter(
        logins
    )  # every login got exactly one new place, whatever its tabs did
    assert all(p.state == QueueState.WAITING and p.position == 0 for p in places)
    assert await race_store.read.server_time_ms() < t0, "the joins must all land before T0"
    await until(race_store, t0)
    looks = await asyncio.gather(*(room.look(event_id, login) for login in reversed(logins)))
    secret = (await room.room(event_id) or pytest.fail("no room")).secret
    by_draw = sorted(logins, key=lambda u: draw(secret, event_id, u))
    admitted = {login for login, p in zip(reversed(logins), looks, strict=True) if p.admitted_ms}
    assert admitted == set(by_draw[:40])  # the 40 free seats' worth, the 40 best draws
    looks = await asyncio.gather(*(room.look(event_id, login) for login in logins))
    waiting = sorted(
        (p.position, login) for login, p in zip(logins, looks, strict=True) if p.position
    )
    assert [login for _, login in waiting] == by_draw[40:]  # the rest, in the draw's order
    assert [position for position, _ in waiting] == list(range(1, len(logins) - 40 + 1))


async def test_polls_racing_to_admit_stay_within_the_free_units_and_the_bucket(
    race_store: Store,
) -> None:
    settings = RoomSettings(admit_per_s=40, admit_factor_pct=150, admission_ttl_ms=60_000)
    event_id, room, t0 = await room_event(race_store, 10, settings, 4_000)
    logins = [f"u{i:04d}" for i in range(1_000)]
    await asyncio.gather(*(room.join(event_id, login) for login in logins))
    assert await race_store.read.server_time_ms() < t0, "the joins must all land before T0"
    await until(race_store, t0)
    first = await asyncio.gather(*(room.look(event_id, login) for login in logins))
    elapsed_ms = max(p.now_ms for p in first) - t0
    made = max(p.admitted for p in first)
    assert 10 <= made <= 10 + 40 * elapsed_ms // 1000 + 1  # a full bucket, then 40 a second
    for _ in range(3):
        await asyncio.sleep(0.3)
        looks = await asyncio.gather(*(room.look(event_id, login) for login in logins))
        admitted = [login for login, p in zip(logins, looks, strict=True) if p.admitted_ms]
        assert len(admitted) == max(p.admitted for p in looks) <= 15  # ceil(10 x 150%)
    assert len(admitted) == 15
    secret = (await room.room(event_id) or pytest.fail("no room")).secret
    assert set(admitted) == set(sorted(logins, key=lambda u: draw(secret, event_id, u))[:15])
    late = [f"late{i:03d}" for i in range(200)]
    places = await asyncio.gather(*(room.join(event_id, login) for login in late))
    assert sorted(p.position for p in places) == list(range(1_000 - 15 + 1, 1_200 - 15 + 1))
    assert (await room.figures(event_id))["outstanding"] == 15


async def test_one_admission_makes_one_claim_whatever_the_tabs_send_at_once(
    race_store: Store,
) -> None:
    settings = RoomSettings(admit_per_s=100_000, admit_factor_pct=100, admission_ttl_ms=60_000)
    event_id, room, t0 = await room_event(race_store, 30, settings, 3_000)
    logins = [f"u{i:03d}" for i in range(300)]
    await asyncio.gather(*(room.join(event_id, login) for login in logins))
    await until(race_store, t0)
    looks = dict(
        zip(logins, await asyncio.gather(*(room.look(event_id, u) for u in logins)), strict=True)
    )
    admitted = [u for u in logins if looks[u].state == QueueState.ADMITTED]
    assert len(admitted) == 30
    token_ms = looks[admitted[0]].admitted_ms

    async def tab(login: str, hold_id: str, admitted_ms: int) -> str:
        try:
            await room.spend(event_id, login, hold_id, admitted_ms)
        except (AdmissionUsed, AdmissionRequired) as exc:
            return exc.code
        try:
            await race_store.claim(event_id, login, hold_id)
        except errors.SoldOut:
            return "sold_out"
        return hold_id

    calls = []
    for login in logins:
        if login in admitted:  # two tabs with two keys, and one of them sent twice
            ms = looks[login].admitted_ms
            calls += [
                (login, f"{login}-a", ms),
                (login, f"{login}-b", ms),
                (login, f"{login}-a", ms),
            ]
        else:  # not admitted: another login's admission time gets it nothing
            calls.append((login, f"{login}-x", token_ms))
    random.Random(5).shuffle(calls)
    results = await asyncio.gather(*(tab(*call) for call in calls))
    by_login: dict[str, list[str]] = {}
    for (login, _hold, _ms), result in zip(calls, results, strict=True):
        by_login.setdefault(login, []).append(result)
    for login in admitted:
        got = Counter(by_login[login])
        winner = f"{login}-a" if got[f"{login}-a"] else f"{login}-b"
        # One hold id won the admission: its claim (and its replay) got the hold; the other
        # hold id was refused, never a second hold.
        assert got[winner] == (2 if winner.endswith("-a") else 1), got
        assert got["admission_used"] == (1 if winner.endswith("-a") else 2), got
    for login in set(logins) - set(admitted):
        assert by_login[login] == ["admission_required"]
    avail = await race_store.read.availability(event_id)
    assert (avail.free, avail.held) == (0, 30)
    holders = {h.login for h in (await race_store.read.holds(event_id)).values()}
    assert holders == set(admitted)
    assert (await room.figures(event_id))["used"] == 30
    report = await race_store.read.audit(event_id)
    assert report.ok, report.violations
