"""Races that really run concurrently on real Redis: many connections, many trials.

Each Lua script is atomic, so these tests check what atomicity alone cannot: that every
interleaving of whole transitions still keeps the invariants (the audit checks them all)."""

import asyncio
import contextlib
import random
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis

from engine import errors
from engine.holds import LoginLimits, ProviderOutcome, ProviderReversal
from engine.scripts import Scripts
from engine.states import ChargeState, HoldState, LatePolicy
from engine.store import Store
from tests.conftest import REDIS_URL, Sale, new_prefix, open_sale

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


@pytest.fixture
async def race_store() -> AsyncIterator[Store]:
    """Production scripts (the real server clock), 200 connections."""
    store, client = await _store(test_clock=False)
    yield store
    await _drop(store, client)


async def _claim(store: Store, event_id: str, login: str, seat: str | None) -> str:
    try:
        claimed = await store.claim(event_id, login, f"h-{login}", seat)
    except errors.SoldOut:
        return "sold_out"
    except errors.SeatTaken:
        return "seat_taken"
    return claimed.seat_id


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


async def _callback(store: Store, sale: Sale, charge: str, outcome: str, ev: str) -> str:
    res = await store.apply_outcome(
        sale.event_id,
        ProviderOutcome(ev, charge, f"att-{charge}", f"pi-{charge}", outcome, amount=100),
    )
    return res.decision


@pytest.mark.parametrize("policy", list(LatePolicy))
async def test_callback_and_sweeper_race_on_the_deadline(
    race_store: Store, policy: LatePolicy
) -> None:
    """1,000 trials: a hold whose deadline falls while its callback and the sweeper both run.
    Exactly one terminal transition and one terminal record per hold and per decided charge;
    replaying both changes nothing."""
    trials, ttl_ms = 1_000, 200
    sale = await open_sale(
        race_store, trials, hold_ttl_ms=ttl_ms, quarantine_ms=60_000, policy=policy
    )
    rng = random.Random(11)
    swept_decided = 0  # deadline transitions made by the sweeper (the rest: by the callback)

    async def trial(i: int) -> tuple[str, str]:
        nonlocal swept_decided
        hold, charge = f"h{i}", f"c{i}"
        claimed_at = time.monotonic()
        await race_store.claim(sale.event_id, f"u{i}", hold)
        try:
            await race_store.start_charge(sale.event_id, hold, f"u{i}", charge, 100)
        except errors.HoldExpired:
            return hold, ""
        outcome = "CAPTURED" if rng.random() < 0.75 else "DECLINED"
        # Land the callback within +-100 ms of the deadline, measured from the claim itself, so
        # both sides of it are hit however loaded the machine is.
        target = claimed_at + rng.uniform(0.1, 0.3)
        await asyncio.sleep(max(0.0, target - time.monotonic()))
        decision, swept, _ = await asyncio.gather(
            _callback(race_store, sale, charge, outcome, f"pe-{i}"),
            race_store.sweep(sale.event_id, batch_max=5),
            race_store.sweep_quarantine(sale.event_id, batch_max=5),
        )
        swept_decided += swept.expired + swept.other
        # Replay both: the same provider event and another sweep.
        again = await _callback(race_store, sale, charge, outcome, f"pe-{i}")
        assert again == decision
        return hold, charge

    pairs = []
    for start in range(0, trials, 100):
        pairs += await asyncio.gather(*(trial(i) for i in range(start, start + 100)))
    before = len(await race_store.read.outbox(sale.event_id))
    await race_store.sweep(sale.event_id, batch_max=trials)
    for _hold, charge in pairs:
        if charge:
            i = charge[1:]
            outcome = (await race_store.read.charge(sale.event_id, charge)).state
            assert outcome != ChargeState.CHARGING
            await _callback(race_store, sale, charge, "CAPTURED", f"pe-{i}")
    assert len(await race_store.read.outbox(sale.event_id)) == before  # replays changed nothing

    states = Counter()
    for hold, charge in pairs:
        h = await race_store.read.hold(sale.event_id, hold)
        states[h.state] += 1
        if h.state == HoldState.CONFIRMED:
            assert h.winner == charge
        if charge:
            c = await race_store.read.charge(sale.event_id, charge)
            assert c.state in (ChargeState.CAPTURED, ChargeState.REFUNDING, ChargeState.DECLINED)
            assert (c.state == ChargeState.CAPTURED) == (h.state == HoldState.CONFIRMED)
    await sale.audit_ok()
    # The race was real: the deadline fell on both sides of the callback.
    assert states[HoldState.CONFIRMED] > 0
    assert states[HoldState.EXPIRED] > 0
    if policy == LatePolicy.RELEASE_REFUND:
        charges = [await race_store.read.charge(sale.event_id, c) for _h, c in pairs if c]
        refunded = sum(c.state == ChargeState.REFUNDING for c in charges)
        assert refunded > 0  # captures that lost to the deadline
    records = await race_store.read.outbox(sale.event_id)
    deadline_records = sum(
        r["kind"] == "hold" and r["reason"].startswith("deadline") for r in records
    )
    assert 0 < swept_decided < deadline_records, (swept_decided, deadline_records)


async def test_capture_races_owner_release(race_store: Store) -> None:
    """The owner releases while the capture lands: either CONFIRMED (and the release sees a
    terminal hold) or RELEASED with the capture refunded. Never both, never a lost seat."""
    trials = 300
    sale = await open_sale(race_store, trials)
    outcomes: Counter[str] = Counter()

    async def trial(i: int) -> None:
        hold, charge = f"h{i}", f"c{i}"
        await race_store.claim(sale.event_id, f"u{i}", hold)
        await race_store.start_charge(sale.event_id, hold, f"u{i}", charge, 100)
        decision, state = await asyncio.gather(
            _callback(race_store, sale, charge, "CAPTURED", f"pe-{i}"),
            race_store.release(sale.event_id, hold, f"u{i}"),
        )
        outcomes[decision] += 1
        if decision == "CONFIRMED":
            assert state == HoldState.CONFIRMED
        else:
            assert (decision, state) == ("REFUND", HoldState.RELEASED)

    await asyncio.gather(*(trial(i) for i in range(trials)))
    await sale.audit_ok()
    avail = await race_store.read.availability(sale.event_id)
    assert avail.sold == outcomes["CONFIRMED"]
    assert avail.free == outcomes["REFUND"]
    assert avail.blocked == 0


async def test_two_tabs_duplicated_callbacks_race(race_store: Store) -> None:
    """Two charges on one hold captured at once, each callback delivered three times
    concurrently: exactly one winner, the other refunded, for every hold."""
    trials = 300
    sale = await open_sale(race_store, trials)

    async def trial(i: int) -> None:
        hold = f"h{i}"
        await race_store.claim(sale.event_id, f"u{i}", hold)
        await race_store.start_charge(sale.event_id, hold, f"u{i}", f"a{i}", 100)
        await race_store.abandon_charge(sale.event_id, hold, f"u{i}", f"a{i}")
        await race_store.start_charge(sale.event_id, hold, f"u{i}", f"b{i}", 100)
        deliveries = [(f"a{i}", f"pa-{i}"), (f"b{i}", f"pb-{i}")] * 3
        random.shuffle(deliveries)
        await asyncio.gather(
            *(_callback(race_store, sale, c, "CAPTURED", ev) for c, ev in deliveries)
        )
        h = await race_store.read.hold(sale.event_id, hold)
        assert (h.state, h.winner) == (HoldState.CONFIRMED, f"b{i}")
        assert (await race_store.read.charge(sale.event_id, f"a{i}")).state == ChargeState.REFUNDING

    await asyncio.gather(*(trial(i) for i in range(trials)))
    await sale.audit_ok()


async def test_drop_a_grab_b_under_contention(race_store: Store) -> None:
    """Alice drops A with a charge in flight and grabs B while 50 others hammer seat A, then A's
    capture lands while they hammer on: A refunded, B kept, and seat A resold only after A's
    money resolved (every claim before the capture loses; a claim that wins during it was made
    no earlier than the record that freed the seat)."""
    for trial in range(30):
        sale = await open_sale(race_store, 3, event_id=f"dab-{trial}-{uuid.uuid4().hex[:4]}")
        await race_store.claim(sale.event_id, "alice", "hA", "s00000")
        await race_store.start_charge(sale.event_id, "hA", "alice", "cA", 100)
        await race_store.release(sale.event_id, "hA", "alice")
        before = await asyncio.gather(
            race_store.claim(sale.event_id, "alice", "hB", "s00001"),
            *(_claim(race_store, sale.event_id, f"u{n}", "s00000") for n in range(50)),
        )
        assert set(before[1:]) == {"seat_taken"}  # BLOCKED while A's money is in flight
        during = await asyncio.gather(
            _callback(race_store, sale, "cA", "CAPTURED", "pe-A"),
            *(_claim(race_store, sale.event_id, f"v{n}", "s00000") for n in range(50)),
        )
        assert during[0] == "REFUND"
        assert (await race_store.read.hold(sale.event_id, "hB")).state == HoldState.RESERVED
        winners = [f"h-v{n}" for n, r in enumerate(during[1:]) if r == "s00000"]
        assert len(winners) <= 1
        freed = [
            int(r["now_ms"])
            for r in await race_store.read.outbox(sale.event_id)
            if r["id"] == "hA" and r["to"] == "SEAT_FREED"
        ]
        assert len(freed) == 1
        for hold_id in winners:
            assert (await race_store.read.hold(sale.event_id, hold_id)).created_ms >= freed[0]
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


async def _revoke(store: Store, sale: Sale) -> str:
    try:
        await store.revoke_hold(sale.event_id, "h1", "ops")
    except errors.NotAnException:
        return "not_an_exception"
    return "revoked"


async def test_money_leaving_a_sold_seat_races_revoke_and_resale(race_store: Store) -> None:
    """A sold seat's money leaves at the provider (its refund, delivered twice) while an operator
    revokes and 30 fans hammer that seat: a revoke only takes back a seat whose money had left,
    the seat is resold at most once and only after the hold was revoked, and the money invariant
    holds (nothing is held for a revoked seat)."""
    for trial in range(30):
        sale = await open_sale(race_store, 2, event_id=f"mlr-{trial}-{uuid.uuid4().hex[:4]}")
        await race_store.claim(sale.event_id, "alice", "h1", "s00000")
        await race_store.start_charge(sale.event_id, "h1", "alice", "c1", 100)
        await _callback(race_store, sale, "c1", "CAPTURED", "pe-c")
        refund = ProviderReversal("pe-r", "c1", "att-c1", "REFUND", 100, "EUR", sale.event_id)

        async def refunded(event_id: str = sale.event_id, r: ProviderReversal = refund) -> str:
            return (await race_store.apply_reversal(event_id, r)).decision

        tasks = [
            ("refund", refunded()),
            ("refund again", refunded()),  # at-least-once delivery
            ("revoke", _revoke(race_store, sale)),
            *((f"fan{n}", _claim(race_store, sale.event_id, f"f{n}", "s00000")) for n in range(30)),
        ]
        random.Random(trial).shuffle(tasks)  # the script calls reach Redis in every order
        answers = await asyncio.gather(*(t for _, t in tasks))
        done = dict(zip([n for n, _ in tasks], answers, strict=True))
        results = [done["refund"], done["revoke"], *(done[f"fan{n}"] for n in range(30))]
        assert {done["refund"], done["refund again"]} == {"MONEY_LEFT"}
        h = await race_store.read.hold(sale.event_id, "h1")
        winners = [r for r in results[2:] if r == "s00000"]
        assert len(winners) <= 1
        if winners:  # resold only once the seat was taken back
            assert h.state == HoldState.REVOKED and done["revoke"] == "revoked"
        else:
            assert h.state in (HoldState.EXCEPTION, HoldState.REVOKED)
        moves = [(r["id"], r["to"]) for r in await race_store.read.outbox(sale.event_id)]
        if done["revoke"] == "revoked":  # only a seat whose money had left was taken back
            assert moves.index(("c1", "PROVIDER_REFUNDED")) < moves.index(("h1", "REVOKED"))
        charges = await race_store.read.scan_charges(sale.event_id)
        assert sum(c.holds_money for c in charges) == 0  # the provider holds nothing now
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
