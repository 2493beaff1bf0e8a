"""Hypothesis stateful test: random interleavings of claim / release / start charge / abandon /
provider outcome (duplicated, reordered, late, unknown) / refund result / sweeps / clock
advances, checked after every step against the plain-Python model (tests/property/model.py) and
SPEC invariants 1-6 (Store.audit). The fakeredis run and the real Redis run must agree."""

import asyncio
import uuid
from collections import Counter
from typing import Any

import fakeredis
import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from engine.holds import Charge, Hold
from engine.keys import EVENT_KEYS as KEY_NAMES
from engine.scripts import Scripts
from engine.states import LatePolicy
from engine.store import Store
from tests.conftest import REDIS_URL, new_prefix, seats
from tests.property.model import Model

LOGINS = ["alice", "bob", "carol"]
N_SEATS, TTL, QUARANTINE = 3, 1000, 600
T0 = 1_900_000_000_000


def normalize(op: str, raw: list[Any]) -> tuple[str, ...]:
    """The parts of a script reply the model predicts."""
    code = str(raw[0])
    if op == "hold_claim":
        if code == "OK":
            return ("OK", raw[2])
        if code == "REPLAY":
            return ("REPLAY", raw[4])
        return (code,)
    if op == "charge_start":
        if code == "OK":
            return ("OK", raw[1])
        if code in ("REPLAY",):
            return (code, raw[2])
        if code in ("HOLD_NOT_LIVE", "CHARGE_IN_FLIGHT"):
            return (code, raw[1])
        return (code,)
    if op == "charge_outcome":
        return tuple(str(x) for x in raw)
    if op in ("hold_release", "charge_abandon", "charge_refund"):
        if code in ("RELEASED", "ALREADY_TERMINAL", "NOT_IN_FLIGHT", "NOT_REFUNDING"):
            return (code, raw[1])
        return (code,)
    raise AssertionError(op)


class Backend:
    def __init__(self, store: Store, event_id: str) -> None:
        self.store = store
        self.event_id = event_id

    async def call(self, op: str, args: list[Any]) -> list[Any]:
        return await self.store.scripts.call(op, self.store.keys(self.event_id), args)

    async def set_now(self, now: int) -> None:
        await self.store.client.hset(self.store.keys(self.event_id)[0], "test_now_ms", now)

    async def snapshot(self) -> dict[str, Any]:
        k = dict(zip(KEY_NAMES, self.store.keys(self.event_id), strict=True))
        async with self.store.client.pipeline(transaction=True) as pipe:
            pipe.hvals(k["holds"])
            pipe.hvals(k["charges"])
            pipe.hgetall(k["owners"])
            pipe.zrange(k["free"], 0, -1)
            pipe.hgetall(k["logins"])
            pipe.zrange(k["refunds"], 0, -1)
            pipe.xrange(k["outbox"])
            holds, charges, owners, free, logins, refunds, outbox = await pipe.execute()
        hold_view = {}
        for raw in holds:
            h = Hold.from_json(raw)
            hold_view[h.hold_id] = (
                h.state,
                h.seat_id,
                h.charge_in_flight,
                h.blocking_charge,
                h.winner,
            )
        charge_view = {}
        for raw in charges:
            ch = Charge.from_json(raw)
            charge_view[ch.charge_id] = (ch.state, ch.refund_only, ch.hold_id)
        return {
            "holds": hold_view,
            "charges": charge_view,
            "owners": {s: (v[0], v[2:]) for s, v in owners.items()},
            "free": set(free),
            "logins": logins,
            "refunds": set(refunds),
            "terminal": Counter((f["kind"], f["id"]) for _i, f in outbox if f["terminal"] == "1"),
        }


def model_snapshot(m: Model) -> dict[str, Any]:
    return {
        "holds": {
            h.hold_id: (h.state, h.seat, h.charge, h.blocking, h.winner) for h in m.holds.values()
        },
        "charges": {c.charge_id: (c.state, c.refund_only, c.hold_id) for c in m.charges.values()},
        "owners": dict(m.owners),
        "free": set(m.free),
        "logins": dict(m.logins),
        "refunds": set(m.refunds),
        "terminal": Counter(m.terminal_records),
    }


class EngineMachine(RuleBasedStateMachine):
    use_real_redis = False

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.backends: list[Backend] = []
        self.clients: list[aioredis.Redis] = []
        self.hold_ids: list[str] = []
        self.charge_ids: list[str] = []
        self.deliveries: list[tuple[str, str, str, str]] = []
        self.n = 0

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    @initialize(policy=st.sampled_from(list(LatePolicy)))
    def setup(self, policy: LatePolicy) -> None:
        self.model = Model(
            {s.seat_id: int(s.rank) for s in seats(N_SEATS)}, TTL, QUARANTINE, policy, T0
        )
        fake = fakeredis.aioredis.FakeRedis(server=fakeredis.FakeServer(), decode_responses=True)
        clients: list[aioredis.Redis] = [fake]
        if self.use_real_redis:
            clients.append(aioredis.from_url(REDIS_URL, decode_responses=True))
        event_id = f"prop-{uuid.uuid4().hex[:8]}"
        for client in clients:
            store = Store(client, scripts=Scripts(client, test_clock=True), prefix=new_prefix())
            backend = Backend(store, event_id)
            self.run(
                store.create_event(
                    event_id,
                    seats(N_SEATS),
                    hold_ttl_ms=TTL,
                    quarantine_ms=QUARANTINE,
                    policy=policy,
                )
            )
            self.run(backend.set_now(T0))
            self.run(store.open_sale(event_id))
            self.backends.append(backend)
            self.clients.append(client)

    def teardown(self) -> None:
        for backend, client in zip(self.backends, self.clients, strict=True):

            async def drop(b: Backend = backend, c: aioredis.Redis = client) -> None:
                async for key in c.scan_iter(match=f"{b.store.prefix}:*"):
                    await c.delete(key)
                await c.aclose()

            self.run(drop())
        self.loop.close()

    def both(self, op: str, args: list[Any], expected: tuple[str, ...]) -> None:
        event(f"{op} -> {expected[0]}")
        for backend in self.backends:
            got = normalize(op, self.run(backend.call(op, args)))
            assert got == expected, f"{op}{args}: script {got} != model {expected}"

    def fresh(self, kind: str) -> str:
        self.n += 1
        return f"{kind}{self.n}"

    # -- rules ------------------------------------------------------------------------------

    @rule(
        data=st.data(),
        login=st.sampled_from(LOGINS),
        seat=st.sampled_from(["", "", "", "s00000", "s00001", "s00002", "nope"]),
    )
    def claim(self, data: st.DataObject, login: str, seat: str) -> None:
        replay = self.hold_ids and data.draw(st.integers(0, 5), label="replay") == 0
        hold_id = data.draw(st.sampled_from(self.hold_ids)) if replay else self.fresh("h")
        expected = self.model.claim(hold_id, login, seat)
        if hold_id in self.model.holds and hold_id not in self.hold_ids:
            self.hold_ids.append(hold_id)
        self.both("hold_claim", [hold_id, login, seat], expected)

    @rule(login=st.sampled_from(LOGINS), seat=st.sampled_from(["", "", "s00000", "s00001"]))
    def checkout(self, login: str, seat: str) -> None:
        """Claim then start a charge at once: reaches charges in flight in few steps."""
        hold_id, charge_id = self.fresh("h"), self.fresh("c")
        self.both("hold_claim", [hold_id, login, seat], self.model.claim(hold_id, login, seat))
        if hold_id in self.model.holds:
            self.hold_ids.append(hold_id)
            expected = self.model.start_charge(hold_id, login, charge_id)
            if expected[0] == "OK":
                self.charge_ids.append(charge_id)
            self.both("charge_start", [hold_id, login, charge_id, 100], expected)

    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        if not self.hold_ids:
            return
        hold_id = data.draw(st.sampled_from(self.hold_ids))
        owner = self.model.holds[hold_id].login
        login = data.draw(st.sampled_from([owner, owner, owner, *LOGINS]))
        self.both("hold_release", [hold_id, login], self.model.release(hold_id, login))

    @rule(data=st.data())
    def start_charge(self, data: st.DataObject) -> None:
        if not self.hold_ids:
            return
        live = [h for h in self.hold_ids if self.model.holds[h].state == "RESERVED"]
        pool = live if live and data.draw(st.integers(0, 3)) else self.hold_ids
        hold_id = data.draw(st.sampled_from(pool))
        owner = self.model.holds[hold_id].login
        login = data.draw(st.sampled_from([owner, owner, owner, *LOGINS]))
        reuse = self.charge_ids and data.draw(st.integers(0, 5), label="reuse charge id") == 0
        charge_id = data.draw(st.sampled_from(self.charge_ids)) if reuse else self.fresh("c")
        expected = self.model.start_charge(hold_id, login, charge_id)
        if expected[0] == "OK":
            self.charge_ids.append(charge_id)
        self.both("charge_start", [hold_id, login, charge_id, 100], expected)

    @precondition(lambda self: any(h.charge for h in self.model.holds.values()))
    @rule(data=st.data())
    def abandon(self, data: st.DataObject) -> None:
        """The client stopped waiting for its in-flight charge (told "timed out")."""
        hold = data.draw(st.sampled_from([h for h in self.model.holds.values() if h.charge]))
        self.both(
            "charge_abandon",
            [hold.hold_id, hold.login, hold.charge],
            self.model.abandon(hold.hold_id, hold.login, hold.charge),
        )

    def deliver(self, event_id: str, charge_id: str, attempt: str, outcome: str) -> None:
        self.deliveries.append((event_id, charge_id, attempt, outcome))
        expected = self.model.outcome(event_id, charge_id, attempt, outcome)
        self.both(
            "charge_outcome", [event_id, charge_id, attempt, f"pi-{charge_id}", outcome], expected
        )

    @precondition(lambda self: self.charge_ids)
    @rule(
        data=st.data(),
        outcome=st.sampled_from(["CAPTURED", "CAPTURED", "DECLINED", "FAILED"]),
        new_attempt=st.integers(0, 4),
    )
    def provider_outcome(self, data: st.DataObject, outcome: str, new_attempt: int) -> None:
        # Mostly charges the provider has not decided yet: that is where the rules bite.
        pending = [c for c in self.charge_ids if self.model.charges[c].state == "CHARGING"]
        pool = pending if pending and data.draw(st.integers(0, 3)) else self.charge_ids
        charge_id = data.draw(st.sampled_from(pool))
        suffix = "-2" if new_attempt == 0 else ""  # the buyer retried on the provider's page
        self.deliver(self.fresh("pe"), charge_id, f"att-{charge_id}{suffix}", outcome)

    @precondition(lambda self: self.deliveries)
    @rule(data=st.data())
    def replay_callback(self, data: st.DataObject) -> None:
        """At-least-once delivery: the very same provider event again, any time later."""
        self.deliver(*data.draw(st.sampled_from(self.deliveries)))

    @rule(outcome=st.sampled_from(["CAPTURED", "DECLINED"]))
    def unknown_charge_outcome(self, outcome: str) -> None:
        ghost = self.fresh("ghost")
        self.deliver(self.fresh("pe"), ghost, f"att-{ghost}", outcome)

    @rule(data=st.data(), ok=st.booleans())
    def refund_result(self, data: st.DataObject, ok: bool) -> None:
        ids = sorted(self.model.charges)
        if not ids:
            return
        charge_id = data.draw(st.sampled_from(ids))
        expected = self.model.refund_result(charge_id, ok)
        self.both("charge_refund", [charge_id, "REFUNDED" if ok else "FAILED", 0], expected)

    @rule()
    def sweep(self) -> None:
        self.model.sweep()
        for b in self.backends:
            self.run(b.call("hold_expire", [200]))

    @rule()
    def sweep_quarantine(self) -> None:
        self.model.sweep_quarantine()
        for b in self.backends:
            self.run(b.call("hold_quarantine_timeout", [200]))

    @rule(dt=st.sampled_from([0, 1, 1, 50, 250, 250, TTL - 1, TTL, QUARANTINE - 1, QUARANTINE]))
    def advance_clock(self, dt: int) -> None:
        self.model.now += dt
        for b in self.backends:
            self.run(b.set_now(self.model.now))

    # -- checks -----------------------------------------------------------------------------

    @invariant()
    def agrees_with_model_and_keeps_invariants(self) -> None:
        if not self.backends:
            return
        want = model_snapshot(self.model)
        for b in self.backends:
            got = self.run(b.snapshot())
            for part in want:
                assert got[part] == want[part], f"{part}: redis {got[part]} != model {want[part]}"
            report = self.run(b.store.audit(b.event_id))
            assert report.ok, report.violations


class FakeOnly(EngineMachine):
    use_real_redis = False


class FakeAndReal(EngineMachine):
    use_real_redis = True


FAST = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestEngineOnFakeredis = FakeOnly.TestCase
TestEngineOnFakeredis.settings = FAST

TestFakeredisAndRealRedisAgree = pytest.mark.redis(FakeAndReal.TestCase)
TestFakeredisAndRealRedisAgree.settings = settings(
    max_examples=80,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
