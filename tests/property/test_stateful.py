"""Hypothesis stateful test: random interleavings of claim / release / start charge / abandon /
provider outcome (duplicated, reordered, late, unknown, contradicting, wrong amount, incoherent)
/ provider refunds and disputes / operator revokes / refund result / sweeps / clock advances,
checked after every step against the plain-Python model (tests/property/model.py), the
invariants of docs/invariants.md (Store.audit) and the money invariant (what the provider holds
per attempt is what the charges say it holds). The fakeredis run and the real Redis run must
agree. When it was written, the money invariant found two engine bugs (a dispute of a charge
being refunded was ignored; a capture of another amount after a decline was lost); both are
fixed and pinned in tests/lua/test_money.py."""

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
from engine.policies import DeadlinePolicy, Policies
from engine.scripts import Scripts
from engine.states import LatePolicy, ReversalPolicy
from engine.store import Store
from tests.conftest import REDIS_URL, new_prefix, seats
from tests.property.model import PRICE, STATUS_OF, Model, Provider

LOGINS = ["alice", "bob", "carol"]
N_SEATS, TTL, QUARANTINE = 3, 1000, 600
T0 = 1_900_000_000_000
NO_LIMITS = (0, 0, 0, 0)  # claim rate, burst, per-login cap, idempotency window: off
REVERSALS = ["REFUND", "DISPUTE_OPENED", "DISPUTE_WON", "DISPUTE_LOST"]
# A deadline policy candidate in shadow beside the enforced one (ADR 0020): the model knows
# nothing of it, so every check against the model also checks that it changes no outcome.
SHADOWS = [None, "quarantine", "release_refund", "grace:1000"]
SHADOW_OUTCOMES = {"EXPIRED", "QUARANTINED", "GRACE", "CAPTURED", "REFUNDING"}


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
    if op in ("charge_outcome_v2", "charge_reversal", "hold_revoke"):
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
            pipe.hkeys(k["alerts"])
            holds, charges, owners, free, logins, refunds, outbox, alerts = await pipe.execute()
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
            charge_view[ch.charge_id] = (ch.state, ch.refund_only, ch.hold_id, ch.captured)
        return {
            "holds": hold_view,
            "charges": charge_view,
            "owners": {s: (v[0], v[2:]) for s, v in owners.items()},
            "free": set(free),
            "logins": logins,
            "refunds": set(refunds),
            "terminal": Counter((f["kind"], f["id"]) for _i, f in outbox if f["terminal"] == "1"),
            "alerts": set(alerts),
        }

    async def charges(self) -> list[str]:
        k = dict(zip(KEY_NAMES, self.store.keys(self.event_id), strict=True))
        return [str(r) for r in await self.store.client.hvals(k["charges"])]


def model_snapshot(m: Model) -> dict[str, Any]:
    return {
        "holds": {
            h.hold_id: (h.state, h.seat, h.charge, h.blocking, h.winner) for h in m.holds.values()
        },
        "charges": {
            c.charge_id: (c.state, c.refund_only, c.hold_id, c.captured) for c in m.charges.values()
        },
        "owners": dict(m.owners),
        "free": set(m.free),
        "logins": dict(m.logins),
        "refunds": set(m.refunds),
        "terminal": Counter(m.terminal_records),
        "alerts": set(m.alerts),
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
        self.ghosts: list[str] = []
        # Provider messages delivered and recorded, for at-least-once replays: (op, arguments).
        self.deliveries: list[tuple[str, tuple[Any, ...]]] = []
        self.provider = Provider()
        self.event_id = ""
        self.shadow = ""
        self.n = 0

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    @initialize(
        policy=st.sampled_from(list(LatePolicy)),
        reversal=st.sampled_from(list(ReversalPolicy)),
        shadow=st.sampled_from(SHADOWS),
    )
    def setup(self, policy: LatePolicy, reversal: ReversalPolicy, shadow: str | None) -> None:
        if shadow is not None and shadow != policy:
            self.shadow = shadow
        self.model = Model(
            {s.seat_id: int(s.rank) for s in seats(N_SEATS)},
            TTL,
            QUARANTINE,
            policy,
            T0,
            reversal,
        )
        fake = fakeredis.aioredis.FakeRedis(server=fakeredis.FakeServer(), decode_responses=True)
        clients: list[aioredis.Redis] = [fake]
        if self.use_real_redis:
            clients.append(aioredis.from_url(REDIS_URL, decode_responses=True))
        event_id = self.event_id = f"prop-{uuid.uuid4().hex[:8]}"
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
                    reversal_policy=reversal,
                )
            )
            self.run(backend.set_now(T0))
            if self.shadow:
                self.run(Policies(store).shadow(event_id, DeadlinePolicy.parse(self.shadow)))
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
        self.both("hold_claim", [hold_id, login, seat, *NO_LIMITS], expected)

    @rule(login=st.sampled_from(LOGINS), seat=st.sampled_from(["", "", "s00000", "s00001"]))
    def checkout(self, login: str, seat: str) -> None:
        """Claim then start a charge at once: reaches charges in flight in few steps."""
        hold_id, charge_id = self.fresh("h"), self.fresh("c")
        self.both(
            "hold_claim", [hold_id, login, seat, *NO_LIMITS], self.model.claim(hold_id, login, seat)
        )
        if hold_id in self.model.holds:
            self.hold_ids.append(hold_id)
            expected = self.model.start_charge(hold_id, login, charge_id)
            if expected[0] == "OK":
                self.charge_ids.append(charge_id)
            self.both("charge_start", [hold_id, login, charge_id, PRICE, 0, 0], expected)

    @rule(login=st.sampled_from(LOGINS))
    def buy(self, login: str) -> None:
        """Claim, charge and capture at once: reaches sold seats, and the provider's later
        movements of their money, in few steps."""
        hold_id, charge_id = self.fresh("h"), self.fresh("c")
        self.both(
            "hold_claim", [hold_id, login, "", *NO_LIMITS], self.model.claim(hold_id, login, "")
        )
        if hold_id not in self.model.holds:
            return
        self.hold_ids.append(hold_id)
        expected = self.model.start_charge(hold_id, login, charge_id)
        self.both("charge_start", [hold_id, login, charge_id, PRICE, 0, 0], expected)
        if expected[0] == "OK":
            self.charge_ids.append(charge_id)
            self.deliver(self.fresh("pe"), charge_id, f"att-{charge_id}", "CAPTURED")

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
        pool = live if live and data.draw(st.integers(0, 3)) != 0 else self.hold_ids
        hold_id = data.draw(st.sampled_from(pool))
        owner = self.model.holds[hold_id].login
        login = data.draw(st.sampled_from([owner, owner, owner, *LOGINS]))
        reuse = self.charge_ids and data.draw(st.integers(0, 5), label="reuse charge id") == 0
        charge_id = data.draw(st.sampled_from(self.charge_ids)) if reuse else self.fresh("c")
        expected = self.model.start_charge(hold_id, login, charge_id)
        if expected[0] == "OK":
            self.charge_ids.append(charge_id)
        self.both("charge_start", [hold_id, login, charge_id, PRICE, 0, 0], expected)

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

    def deliver(
        self,
        event_id: str,
        key: str,
        attempt: str,
        outcome: str,
        status: str = "",
        amount: int | None = PRICE,
    ) -> None:
        """One provider message about an attempt (charge_outcome_v2): truthful about the event,
        hold, charge and currency; its status and amount are what the provider says."""
        status = status or STATUS_OF[outcome]
        if event_id not in self.model.callbacks:  # a replay moves no money
            self.deliveries.append(
                ("charge_outcome_v2", (event_id, key, attempt, outcome, status, amount))
            )
            self.provider.told(attempt, key)
            if outcome == "CAPTURED" and status == "captured" and amount is not None:
                self.provider.capture(attempt, amount)
        ours = self.model.charges.get(key)
        hold = ours.hold_id if ours is not None else ""
        expected = self.model.outcome(event_id, key, attempt, outcome, status, amount)
        argv: list[Any] = [event_id, key, attempt, f"pi-{key}", outcome, status]
        argv += ["invalid" if amount is None else amount, "EUR", self.event_id, hold, key]
        self.both("charge_outcome_v2", argv, expected)

    def reverse(self, event_id: str, key: str, attempt: str, kind: str) -> None:
        """Money the provider moved after a capture, or says it moved (charge_reversal)."""
        amount = self.provider.captured.get(attempt, PRICE)
        first = event_id not in self.model.callbacks
        expected = self.model.reversal(event_id, key, attempt, kind, amount)
        if first:  # a replay moves no money; a duplicate notification finds nothing to move
            self.provider.move(attempt, kind)
            if expected[0] != "RETRY_LATER":  # recorded: replays return the same reply
                self.deliveries.append(("charge_reversal", (event_id, key, attempt, kind)))
        argv: list[Any] = [event_id, key, attempt, kind, amount, "EUR", self.event_id]
        self.both("charge_reversal", argv, expected)

    @precondition(lambda self: self.charge_ids)
    @rule(
        data=st.data(),
        outcome=st.sampled_from(["CAPTURED", "CAPTURED", "DECLINED", "FAILED"]),
        new_attempt=st.integers(0, 4),
    )
    def provider_outcome(self, data: st.DataObject, outcome: str, new_attempt: int) -> None:
        # Mostly charges the provider has not decided yet: that is where the rules bite.
        pending = [c for c in self.charge_ids if self.model.charges[c].state == "CHARGING"]
        pool = pending if pending and data.draw(st.integers(0, 3)) != 0 else self.charge_ids
        charge_id = data.draw(st.sampled_from(pool))
        suffix = "-2" if new_attempt == 0 else ""  # the buyer retried on the provider's page
        self.deliver(self.fresh("pe"), charge_id, f"att-{charge_id}{suffix}", outcome)

    @precondition(lambda self: self.deliveries)
    @rule(data=st.data())
    def replay_callback(self, data: st.DataObject) -> None:
        """At-least-once delivery: the very same provider event again, any time later."""
        op, args = data.draw(st.sampled_from(self.deliveries))
        if op == "charge_outcome_v2":
            self.deliver(*args)
        else:
            self.reverse(*args)

    @rule(data=st.data(), outcome=st.sampled_from(["CAPTURED", "DECLINED"]))
    def unknown_charge_outcome(self, data: st.DataObject, outcome: str) -> None:
        """A message naming no charge of ours: a capture is an orphan to refund. Sometimes the
        provider notifies the same unknown attempt again (a new provider event)."""
        again = self.ghosts and data.draw(st.integers(0, 3), label="same ghost") == 0
        ghost = data.draw(st.sampled_from(self.ghosts)) if again else self.fresh("ghost")
        if ghost not in self.ghosts:
            self.ghosts.append(ghost)
        self.deliver(self.fresh("pe"), ghost, f"att-{ghost}", outcome)

    @precondition(
        lambda self: any(c.state in ("DECLINED", "FAILED") for c in self.model.charges.values())
    )
    @rule(data=st.data())
    def capture_after_decline(self, data: st.DataObject) -> None:
        """The provider captures an attempt it declined (or failed) before: money to refund."""
        told = [c for c in self.model.charges.values() if c.state in ("DECLINED", "FAILED")]
        c = data.draw(st.sampled_from(sorted(told, key=lambda c: c.charge_id)))
        self.deliver(self.fresh("pe"), c.key, c.attempt, "CAPTURED")

    @precondition(lambda self: self.charge_ids)
    @rule(
        data=st.data(),
        outcome=st.sampled_from(["CAPTURED", "CAPTURED", "CAPTURED", "DECLINED"]),
        amount=st.sampled_from([1, 250, 250, 0]),
        new_attempt=st.integers(0, 4),
    )
    def wrong_amount(
        self, data: st.DataObject, outcome: str, amount: int, new_attempt: int
    ) -> None:
        """A coherent message for another amount than the charge's: a capture of it is refunded
        and never confirms."""
        suffix = "-2" if new_attempt == 0 else ""
        ok = list(self.charge_ids)
        pending = [c for c in ok if self.model.charges[c].state == "CHARGING"]
        pool = pending if pending and data.draw(st.integers(0, 3)) != 0 else ok
        if not pool:
            return
        charge_id = data.draw(st.sampled_from(pool))
        self.deliver(
            self.fresh("pe"), charge_id, f"att-{charge_id}{suffix}", outcome, amount=amount
        )

    @precondition(lambda self: self.charge_ids or self.ghosts)
    @rule(
        data=st.data(),
        outcome=st.sampled_from(["CAPTURED", "CAPTURED", "DECLINED", "FAILED"]),
        broken=st.sampled_from(["status", "amount", "both"]),
        new_attempt=st.integers(0, 4),
    )
    def incoherent_message(
        self, data: st.DataObject, outcome: str, broken: str, new_attempt: int
    ) -> None:
        """A message whose status disagrees with its type, or whose amount is no amount: it
        changes nothing but an alert."""
        key = data.draw(st.sampled_from(self.charge_ids + self.ghosts))
        suffix = "-2" if new_attempt == 0 else ""
        status = STATUS_OF[outcome]
        if broken in ("status", "both"):
            status = data.draw(st.sampled_from([s for s in STATUS_OF.values() if s != status]))
        amount = None if broken in ("amount", "both") else PRICE
        self.deliver(self.fresh("pe"), key, f"att-{key}{suffix}", outcome, status, amount)

    @precondition(lambda self: self.provider.keys or self.charge_ids)
    @rule(data=st.data())
    def provider_reversal(self, data: st.DataObject) -> None:
        """The provider moves money on its own after a capture: its own refund, a dispute opened,
        won or lost (mostly of a sold seat's money). Else it notifies a movement again, or one of
        an attempt whose capture has not reached us (retried later)."""
        told = sorted(self.provider.keys)
        moves = [(a, k) for a in told for k in REVERSALS if self.provider.can(a, k)]
        sold = [(a, k) for a, k in moves if self.wins(a)]
        early = [f"att-{c}" for c in self.charge_ids if f"att-{c}" not in self.provider.keys]
        pick = data.draw(st.integers(0, 3), label="movement")
        if moves and pick:
            attempt, kind = data.draw(st.sampled_from(sold if sold and pick > 1 else moves))
        else:
            attempt = data.draw(st.sampled_from(told + early))
            kind = data.draw(st.sampled_from(REVERSALS))
        key = self.provider.keys.get(attempt, attempt.removeprefix("att-"))
        self.reverse(self.fresh("pe"), key, attempt, kind)

    def wins(self, attempt: str) -> bool:
        c = self.model.charges.get(self.model.attempts.get(attempt, ""))
        h = self.model.holds.get(c.hold_id) if c is not None else None
        return c is not None and h is not None and h.winner == c.charge_id

    @precondition(
        lambda self: any(h.winner for h in self.model.holds.values())  # sold once
    )
    @rule(data=st.data())
    def operator_revoke(self, data: st.DataObject) -> None:
        """An operator takes back the seat of a hold whose money left (EXCEPTION)."""
        exceptions = [h for h in self.hold_ids if self.model.holds[h].state == "EXCEPTION"]
        pool = exceptions if exceptions and data.draw(st.integers(0, 3)) != 0 else self.hold_ids
        hold_id = data.draw(st.sampled_from([*pool, "no-such-hold"]))
        self.both("hold_revoke", [hold_id, "ops"], self.model.revoke(hold_id))

    @rule(data=st.data(), ok=st.booleans())
    def refund_result(self, data: st.DataObject, ok: bool) -> None:
        ids = sorted(self.model.charges)
        if not ids:
            return
        queued = sorted(self.model.refunds)  # mostly what the refund worker would pick
        pool = queued if queued and data.draw(st.integers(0, 2), label="queued") != 0 else ids
        charge_id = data.draw(st.sampled_from(pool))
        expected = self.model.refund_result(charge_id, ok)
        if expected[0] == "REFUNDED":  # the provider gave back what it held for the attempt
            self.provider.move(self.model.charges[charge_id].attempt, "REFUND")
        self.both("charge_refund", [charge_id, "REFUNDED" if ok else "FAILED", 0, ""], expected)

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
            report = self.run(b.store.read.audit(b.event_id))
            assert report.ok, report.violations

    @invariant()
    def shadows_only_classify(self) -> None:
        """Records name the shadow candidate only when one runs, and it classifies only with a
        decision it could have made (that it changes none is the model check above)."""
        for b in self.backends:
            for r in self.run(b.store.read.outbox(b.event_id)):
                assert r["shadow_policy"] == self.shadow, r
                assert r["shadow_outcome"] in (SHADOW_OUTCOMES if self.shadow else set()) | {""}, r

    @invariant()
    def money_is_accounted(self) -> None:
        """What the provider holds (captured - refunded - disputed + reinstated, per attempt) is
        what the backend's charges say it holds (Charge.holds_money)."""
        if not self.backends:
            return
        held = self.provider.holding()
        for b in self.backends:
            charges = [Charge.from_json(r) for r in self.run(b.charges())]
            total = sum(c.holds_money for c in charges)
            by_attempt: dict[str, int] = {}
            for c in charges:
                if c.holds_money:
                    by_attempt[c.attempt_id] = by_attempt.get(c.attempt_id, 0) + c.holds_money
            assert total == sum(held.values()) and by_attempt == held, (
                f"provider holds {held}, charges say {by_attempt}"
            )


class FakeOnly(EngineMachine):
    use_real_redis = False


class FakeAndReal(EngineMachine):
    use_real_redis = True


FAST = settings(
    max_examples=150,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestEngineOnFakeredis = pytest.mark.slow(FakeOnly.TestCase)  # ~25 s: not in make test-fast
TestEngineOnFakeredis.settings = FAST

TestFakeredisAndRealRedisAgree = pytest.mark.redis(FakeAndReal.TestCase)
TestFakeredisAndRealRedisAgree.settings = settings(
    max_examples=80,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
