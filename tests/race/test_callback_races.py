"""Races in which provider callbacks land, on real Redis with real concurrency, each run twice:
with the callbacks as the simulator's messages and as Stripe's events (tests/provider_wire.py),
signed and read by the provider's adapter exactly as the API reads them, then applied by the
deciding scripts. The same interleavings must keep the same invariants for both mappings
(ADR 0023); the audit checks them all."""

import asyncio
import random
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator

import pytest

from engine.model import errors
from engine.model.states import ChargeState, HoldState, LatePolicy
from engine.providers import Callback
from engine.store import Store
from tests.conftest import Sale, open_sale
from tests.provider_wire import PROVIDERS, Wire
from tests.race.test_races import _claim, _drop, _store

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.fixture
async def race_store() -> AsyncIterator[Store]:
    """Production scripts (the real server clock), 200 connections."""
    store, client = await _store(test_clock=False)
    yield store
    await _drop(store, client)


@pytest.fixture(params=PROVIDERS)
async def wire(request: pytest.FixtureRequest) -> AsyncIterator[Wire]:
    """The provider whose messages the race delivers."""
    w = Wire(request.param)
    yield w
    await w.aclose()


@pytest.mark.parametrize("policy", list(LatePolicy))
async def test_callback_and_sweeper_race_on_the_deadline(
    race_store: Store, wire: Wire, policy: LatePolicy
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
            wire.outcome(race_store, sale.event_id, hold, charge, outcome, f"pe-{i}"),
            race_store.sweep(sale.event_id, batch_max=5),
            race_store.sweep_quarantine(sale.event_id, batch_max=5),
        )
        swept_decided += swept.expired + swept.other
        # Replay both: the same provider event and another sweep.
        again = await wire.outcome(race_store, sale.event_id, hold, charge, outcome, f"pe-{i}")
        assert again == decision
        return hold, charge

    pairs = []
    for start in range(0, trials, 100):
        pairs += await asyncio.gather(*(trial(i) for i in range(start, start + 100)))
    before = len(await race_store.read.outbox(sale.event_id))
    await race_store.sweep(sale.event_id, batch_max=trials)
    for hold, charge in pairs:
        if charge:
            i = charge[1:]
            outcome = (await race_store.read.charge(sale.event_id, charge)).state
            assert outcome != ChargeState.CHARGING
            await wire.outcome(race_store, sale.event_id, hold, charge, "CAPTURED", f"pe-{i}")
    assert len(await race_store.read.outbox(sale.event_id)) == before  # replays changed nothing

    states: Counter[str] = Counter()
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


async def test_capture_races_owner_release(race_store: Store, wire: Wire) -> None:
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
            wire.outcome(race_store, sale.event_id, hold, charge, "CAPTURED", f"pe-{i}"),
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


async def test_two_tabs_duplicated_callbacks_race(race_store: Store, wire: Wire) -> None:
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
            *(
                wire.outcome(race_store, sale.event_id, hold, c, "CAPTURED", ev)
                for c, ev in deliveries
            )
        )
        h = await race_store.read.hold(sale.event_id, hold)
        assert (h.state, h.winner) == (HoldState.CONFIRMED, f"b{i}")
        assert (await race_store.read.charge(sale.event_id, f"a{i}")).state == ChargeState.REFUNDING

    await asyncio.gather(*(trial(i) for i in range(trials)))
    await sale.audit_ok()


async def test_drop_a_grab_b_under_contention(race_store: Store, wire: Wire) -> None:
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
            wire.outcome(race_store, sale.event_id, "hA", "cA", "CAPTURED", "pe-A"),
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


async def _revoke(store: Store, sale: Sale) -> str:
    try:
        await store.revoke_hold(sale.event_id, "h1", "ops")
    except errors.NotAnException:
        return "not_an_exception"
    return "revoked"


async def test_money_leaving_a_sold_seat_races_revoke_and_resale(
    race_store: Store, wire: Wire
) -> None:
    """A sold seat's money leaves at the provider (its refund, delivered twice) while an operator
    revokes and 30 fans hammer that seat: a revoke only takes back a seat whose money had left,
    the seat is resold at most once and only after the hold was revoked, and the money invariant
    holds (nothing is held for a revoked seat)."""
    for trial in range(30):
        sale = await open_sale(race_store, 2, event_id=f"mlr-{trial}-{uuid.uuid4().hex[:4]}")
        await race_store.claim(sale.event_id, "alice", "h1", "s00000")
        await race_store.start_charge(sale.event_id, "h1", "alice", "c1", 100)
        await wire.outcome(race_store, sale.event_id, "h1", "c1", "CAPTURED", "pe-c")
        # Read before the race (a Stripe refund costs a lookup of its intent): what races is
        # its application, delivered twice, against the revoke and the fans.
        refund = await wire.refund(sale.event_id, "h1", "c1", "pe-r")

        async def refunded(store: Store = race_store, parsed: Callback = refund) -> str:
            return (await Wire.apply(store, parsed)).decision

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


@pytest.mark.parametrize("policy", ["manual", "revoke"])
async def test_a_refund_and_its_capture_racing_never_sell_the_seat(
    race_store: Store, policy: str
) -> None:
    """Many trials on real Redis: the capture and the refund of the same payment are delivered
    at the same moment, each twice, in random order. Whichever script runs first, every trial
    ends as the in-order pair: the money left, the seat an exception or revoked, never sold
    with no money behind it (ADR 0036)."""
    from engine.model.states import ReversalPolicy
    from tests.helpers import callback, reversal

    rng = random.Random(11)
    for trial in range(40):
        sale = await open_sale(race_store, 1, reversal_policy=ReversalPolicy(policy))
        await race_store.claim(sale.event_id, "ann", "h1")
        await race_store.start_charge(sale.event_id, "h1", "ann", "c1", 100)
        sends = [
            callback(sale, "c1", "CAPTURED", event_id=f"pe-s-{trial}"),
            callback(sale, "c1", "CAPTURED", event_id=f"pe-s-{trial}"),
            reversal(sale, "c1", "REFUND", event_id=f"pe-r-{trial}"),
            reversal(sale, "c1", "REFUND", event_id=f"pe-r-{trial}"),
        ]
        rng.shuffle(sends)
        await asyncio.gather(*sends)
        c = await race_store.read.charge(sale.event_id, "c1")
        h = await race_store.read.hold(sale.event_id, "h1")
        assert (c.state, c.holds_money) == (ChargeState.PROVIDER_REFUNDED, 0), trial
        want = HoldState.REVOKED if policy == "revoke" else HoldState.EXCEPTION
        assert (h.state, h.reason) == (want, "money_refunded_at_provider"), trial
        await sale.audit_ok()
