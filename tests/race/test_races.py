"""Races that really run concurrently on real Redis: many connections, many trials.

Each Lua script is atomic, so these tests check what atomicity alone cannot: that every
interleaving of whole transitions still keeps the invariants (the audit checks them all). The
races in which provider callbacks land, run with each provider's messages, are
test_callback_races.py."""

import asyncio
import contextlib
import random
import uuid
from collections import Counter
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from engine.model import errors
from engine.model.holds import LoginLimits
from engine.model.states import HoldState
from engine.store import Store
from engine.store.scripts import Scripts
from tests.conftest import REDIS_URL, cluster_client, new_prefix, open_sale

pytestmark = [pytest.mark.redis, pytest.mark.slow]


async def _store(*, test_clock: bool) -> tuple[Store, "aioredis.Redis"]:
    pool = aioredis.BlockingConnectionPool.from_url(
        REDIS_URL, decode_responses=True, max_connections=200, timeout=30, socket_timeout=30
    )
    client = aioredis.Redis.from_pool(pool)  # the client owns and closes the pool
    store = Store(
        client, scripts=Scripts(client, test_clock=test_clock), prefix=new_prefix(), timeout_s=30
    )
    await store.scripts.load_all()
    return store, client


async def _drop(store: Store, client: "aioredis.Redis") -> None:
    async for key in client.scan_iter(match=f"{store.prefix}:*", count=1000):
        await client.delete(key)
    await client.aclose()


@pytest.fixture(params=["real", pytest.param("cluster", marks=pytest.mark.cluster)])
async def race_store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    """Production scripts (the real server clock), 200 connections; on one server, and on a
    Redis Cluster of 3 primaries (ADR 0030)."""
    if request.param == "real":
        store, client = await _store(test_clock=False)
    else:
        client = cluster_client(request.getfixturevalue("redis_cluster"))
        store = Store(client, scripts=Scripts(client), prefix=new_prefix(), timeout_s=30)
        await store.scripts.load_all()
    yield store
    await _drop(store, client)


async def _claim(store: Store, event_id: str, login: str, seat: str | None) -> str:
    try:
        claimed = await store.claim(event_id, login, f"h-{login}", seat)
    except errors.SoldOut:
        return "sold_out"
    except errors.SeatTaken:
        return "seat_taken"
    return claimed.listing


async def test_10k_concurrent_claims_on_80_seats_never_oversell(race_store: Store) -> None:
    sale = await open_sale(race_store, 80)
    rng = random.Random(7)
    wants = [f"s{rng.randrange(80):05d}" if rng.random() < 0.3 else None for _ in range(10_000)]
    results = await asyncio.gather(
        *(_claim(race_store, sale.event_id, f"u{i}", w) for i, w in enumerate(wants))
    )
    seats_won = [r for r in results if r.startswith("s0")]
    assert len(seats_won) == 80
    assert len(set(seats_won)) == 80  # no seat twice
    for want, got in zip(wants, results, strict=True):
        if want is None:  # best available: a seat, or sold out, never "taken"
            assert got.startswith("s0") or got == "sold_out", got
        else:  # a named seat: that seat or a refusal, never another seat
            assert got in (want, "seat_taken", "sold_out"), (want, got)
    avail = await race_store.read.availability(sale.event_id)
    assert (avail.free, avail.held) == (0, 80)
    await sale.audit_ok()


async def test_500_tasks_on_5_specific_seats(race_store: Store) -> None:
    sale = await open_sale(race_store, 5)
    results = await asyncio.gather(
        *(_claim(race_store, sale.event_id, f"u{i}", f"s{i % 5:05d}") for i in range(500))
    )
    assert sorted(r for r in results if r.startswith("s0")) == [f"s{i:05d}" for i in range(5)]
    await sale.audit_ok()


async def test_one_login_many_tabs_claiming_at_once_keeps_one_checkout(race_store: Store) -> None:
    sale = await open_sale(race_store, 50)

    async def tab(n: int) -> None:
        # Each claim releases the login's previous hold, so a seat is always available.
        await race_store.claim(sale.event_id, "alice", f"tab-{n}")

    await asyncio.gather(*(tab(n) for n in range(40)))
    holds = [await race_store.read.hold(sale.event_id, f"tab-{n}") for n in range(40)]
    assert Counter(h.state for h in holds)[HoldState.RESERVED] == 1
    assert (await race_store.read.availability(sale.event_id)).held == 1
    await sale.audit_ok()


async def test_holders_reclaiming_a_sold_out_event_while_seats_come_back(
    race_store: Store,
) -> None:
    """Every seat held; each holder claims again from several tabs at once while a few holders
    release. Nobody loses a seat to a refusal, no seat goes twice, and a restock is announced
    only by the releases, never by a refused re-claim."""
    for trial in range(20):
        sale = await open_sale(race_store, 30, event_id=f"rc-{trial}-{uuid.uuid4().hex[:4]}")
        for i in range(30):
            await race_store.claim(sale.event_id, f"u{i}", f"first-{i}")
        event_key = race_store.keys(sale.event_id)[0]
        before = int(await race_store.client.hget(event_key, "restocks") or 0)
        leaving = set(random.sample(range(30), 3))

        async def reclaim(event_id: str, i: int, tab: int) -> str:
            try:
                return (await race_store.claim(event_id, f"u{i}", f"t{i}-{tab}")).hold_id
            except errors.SoldOut:
                return "sold_out"

        await asyncio.gather(
            *(
                reclaim(sale.event_id, i, tab)
                for i in range(30)
                if i not in leaving
                for tab in range(4)
            ),
            *(race_store.release(sale.event_id, f"first-{i}", f"u{i}") for i in leaving),
        )
        live: Counter[int] = Counter()
        for i in range(30):
            if i in leaving:
                continue
            for hold_id in [f"first-{i}", *(f"t{i}-{tab}" for tab in range(4))]:
                with contextlib.suppress(errors.HoldNotFound):
                    if (
                        await race_store.read.hold(sale.event_id, hold_id)
                    ).state == HoldState.RESERVED:
                        live[i] += 1
        assert all(live[i] == 1 for i in range(30) if i not in leaving), live
        avail = await race_store.read.availability(sale.event_id)
        assert (avail.held, avail.free) == (27, 3)
        # Only a release takes free from 0 to 1; a trade runs only while a seat is free, so it
        # never does, and a refused re-claim touches nothing.
        restocks = int(await race_store.client.hget(event_key, "restocks") or 0) - before
        assert 1 <= restocks <= len(leaving)
        await sale.audit_ok()


async def test_10k_parties_of_1_to_6_on_80_seats_never_split_or_oversell(
    race_store: Store,
) -> None:
    """10,000 claims of 1 to 6 seats at once, a fifth of them from a login's second tab: every
    answer is a whole party or a refusal, no seat is held twice, and no login holds more than
    the cap, two tabs included."""
    capped = Store(
        race_store.client,
        scripts=race_store.scripts,
        prefix=race_store.prefix,
        timeout_s=30,
        limits=LoginLimits(cap=6),
    )
    sale = await open_sale(capped, 80)
    rng = random.Random(11)
    asks = [(f"u{i % 8_000}", f"h{i}", rng.randint(1, 6)) for i in range(10_000)]

    async def party(login: str, hold_id: str, n: int) -> tuple[str, str, int, tuple[str, ...]]:
        try:
            claimed = await capped.claim(sale.event_id, login, hold_id, quantity=n)
        except (errors.SoldOut, errors.NotEnoughSeats, errors.ChargeInFlight):
            return login, hold_id, n, ()
        return login, hold_id, n, claimed.seat_ids

    results = await asyncio.gather(*(party(*a) for a in asks))
    for _login, _hold, n, seats in results:
        assert len(seats) in (0, n), (n, seats)  # a whole party or nothing
    holds = await capped.read.holds(sale.event_id)
    live = [h for h in holds.values() if h.state == HoldState.RESERVED]
    held = [seat for h in live for seat in h.seat_ids]
    assert len(held) == len(set(held)) <= 80  # no seat twice
    per_login = Counter(h.login for h in live)
    assert max(per_login.values()) == 1  # two tabs: one checkout, at most the cap of seats
    assert all(len(h.seat_ids) <= 6 for h in live)
    avail = await capped.read.availability(sale.event_id)
    assert avail.held == len(held) and avail.free == 80 - len(held)
    await sale.audit_ok()
