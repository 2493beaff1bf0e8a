"""Hypothesis stateful test of quantity stock (ADR 0022): random interleavings of carts (one or
two lines, a location asked or the rule's choice, two tabs of one login), releases, charge
starts, captures and declines (duplicated, late), sweeps, clock advances and corrections (set,
adjust, replayed, reused ids), under both deadline policies and a per-event cap. After every
step the engine, on fakeredis and on real Redis, must agree with the plain-Python model
(tests/property/stock_model.py) on every hold's state and lines, every charge's state and every
counter of every SKU and location, and pass the audit (`stock_agrees` among the rest)."""

import asyncio
import uuid
from typing import Any

import fakeredis
import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from engine.model import errors
from engine.model.event_config import EventConfig
from engine.model.holds import ProviderOutcome
from engine.model.states import LatePolicy
from engine.model.stock_lines import SkuSpec, StockLine
from engine.store import Store
from engine.store.scripts import Scripts
from tests.conftest import REDIS_URL, new_prefix
from tests.property.stock_model import StockModel

LOGINS = ["ann", "bob", "cy"]
SKUS = {"CHAIN": {"east": 3, "west": 2}, "TUBE": {"east": 0, "west": 4}}
LOCATIONS = ["east", "west"]
TTL, QUARANTINE, T0, CAP = 1_000, 600, 1_900_000_000_000, 5
PRICE = 100
ERROR_CODES = {
    errors.InsufficientStock: "INSUFFICIENT_STOCK",
    errors.ChargeInFlight: "CHARGE_IN_FLIGHT",
    errors.LimitExceeded: "LIMIT_EXCEEDED",
    errors.StockBelowZero: "BELOW_ZERO",
    errors.CorrectionIdReused: "CORRECTION_ID_REUSED",
    errors.HoldExpired: "HOLD_NOT_LIVE",
    errors.AlreadyConfirmed: "HOLD_NOT_LIVE",
}
where = st.sampled_from(["", "", *LOCATIONS])  # mostly the location rule's choice
asked_lines = st.lists(
    st.tuples(st.sampled_from(sorted(SKUS)), st.integers(1, 3), where),
    min_size=1,
    max_size=2,
    unique_by=lambda t: t[0],
)  # fmt: skip


async def attempt(coro: Any) -> str:
    """The engine's answer as the model's code."""
    try:
        await coro
    except tuple(ERROR_CODES) as exc:
        return ERROR_CODES[type(exc)]
    return "OK"


class StockMachine(RuleBasedStateMachine):
    use_real_redis = False

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.stores: list[Store] = []
        self.n = 0

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def each(self, make: Any) -> list[Any]:
        return [self.run(make(store)) for store in self.stores]

    @initialize(policy=st.sampled_from(list(LatePolicy)))
    def setup(self, policy: LatePolicy) -> None:
        self.model = StockModel(LOCATIONS, TTL, QUARANTINE, str(policy), T0, cap=CAP)
        for sku, on_hand in SKUS.items():
            self.model.add(sku, on_hand)
        clients: list[aioredis.Redis] = [
            fakeredis.aioredis.FakeRedis(server=fakeredis.FakeServer(), decode_responses=True)
        ]
        if self.use_real_redis:
            clients.append(aioredis.from_url(REDIS_URL, decode_responses=True))
        self.event_id = f"stock-{uuid.uuid4().hex[:8]}"
        for client in clients:
            store = Store(client, scripts=Scripts(client, test_clock=True), prefix=new_prefix())
            skus = [SkuSpec(s, PRICE, dict(on_hand)) for s, on_hand in SKUS.items()]
            self.run(
                store.stock.create_event(
                    self.event_id,
                    LOCATIONS,
                    skus,
                    EventConfig(
                        hold_ttl_ms=TTL, quarantine_ms=QUARANTINE, policy=policy, login_cap=CAP
                    ),
                )
            )
            self.run(client.hset(store.keys(self.event_id)[0], "test_now_ms", T0))
            self.run(store.open_sale(self.event_id))
            self.stores.append(store)

    def teardown(self) -> None:
        for store in self.stores:
            self.run(store.restore.drop_event(self.event_id))
            self.run(store.client.aclose())
        self.loop.close()

    def agree(self, answers: list[str], expected: str) -> None:
        assert all(a == expected for a in answers), (answers, expected)

    @rule(login=st.sampled_from(LOGINS), asked=asked_lines)
    def claim(self, login: str, asked: list[tuple[str, int, str]]) -> None:
        self.n += 1
        hold_id = f"h{self.n}"
        lines = [StockLine(s, q, loc) for s, q, loc in asked]
        answers = self.each(lambda s: attempt(s.claim(self.event_id, login, hold_id, lines=lines)))
        self.agree(answers, self.model.claim(login, hold_id, asked))

    @rule(login=st.sampled_from(LOGINS), asked=asked_lines)
    def claim_and_pay(self, login: str, asked: list[tuple[str, int, str]]) -> None:
        """A cart and its charge at once: the shape of every sale (and of R-42)."""
        self.claim(login, asked)
        h = self.model.holds.get(f"h{self.n}")
        if h is not None:
            self.pay(h)

    @precondition(lambda self: self.model.holds)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        h = self.model.holds[data.draw(st.sampled_from(sorted(self.model.holds)))]
        answers = self.each(lambda s: s.release(self.event_id, h.hold_id, h.login))
        self.agree([str(a) for a in answers], self.model.release(h))

    @precondition(lambda self: self.model.holds)
    @rule(data=st.data())
    def start_charge(self, data: st.DataObject) -> None:
        self.pay(self.model.holds[data.draw(st.sampled_from(sorted(self.model.holds)))])

    def pay(self, h: Any) -> None:
        self.n += 1
        cid = f"c{self.n}"
        amount = PRICE * sum(q for _s, _loc, q in h.lines)
        answers = self.each(
            lambda s: attempt(s.start_charge(self.event_id, h.hold_id, h.login, cid, amount))
        )
        self.agree(answers, self.model.start_charge(h, cid))

    @precondition(lambda self: any(c.state == "CHARGING" for c in self.model.charges.values()))
    @rule(data=st.data(), captured=st.booleans(), duplicated=st.booleans())
    def outcome(self, data: st.DataObject, captured: bool, duplicated: bool) -> None:
        live = sorted(c for c, m in self.model.charges.items() if m.state == "CHARGING")
        self.deliver(self.model.charges[data.draw(st.sampled_from(live))], captured, duplicated)

    def deliver(self, c: Any, captured: bool, duplicated: bool) -> None:
        h = self.model.holds[c.hold_id]
        amount = PRICE * sum(q for _s, _loc, q in h.lines)
        msg = ProviderOutcome(
            f"pe-{c.charge_id}", c.charge_id, f"att-{c.charge_id}", f"pi-{c.charge_id}",
            "CAPTURED" if captured else "DECLINED", amount=amount,
        )  # fmt: skip
        expected = self.model.outcome(c, captured)
        for _ in range(2 if duplicated else 1):  # a duplicate is answered the same, changes nothing
            answers = self.each(lambda s: s.apply_outcome(self.event_id, msg))
            self.agree([a.decision for a in answers], expected)

    @rule(ms=st.sampled_from([1, 200, TTL, QUARANTINE + 1]))
    def advance(self, ms: int) -> None:
        self.set_now(self.model.now + ms)

    def set_now(self, now: int) -> None:
        self.model.now = now
        for store in self.stores:
            self.run(store.client.hset(store.keys(self.event_id)[0], "test_now_ms", now))

    @precondition(
        lambda self: any(h.state == "RESERVED" and h.charge for h in self.model.holds.values())
    )
    @rule(data=st.data(), offset=st.sampled_from([-1, 0, 1, QUARANTINE // 2]), swept=st.booleans())
    def r42(self, data: st.DataObject, offset: int, swept: bool) -> None:
        """R-42: the cart's capture lands just before, at or after its deadline (or within the
        quarantine), with or without the sweeper first."""
        paying = sorted(
            hid for hid, h in self.model.holds.items() if h.state == "RESERVED" and h.charge
        )
        h = self.model.holds[data.draw(st.sampled_from(paying))]
        __import__("hypothesis").event(f"r42 {self.model.policy} {offset}")
        self.set_now(max(self.model.now, h.expires_ms + offset))
        if swept:
            self.sweep()
        c = self.model.charges[h.charge] if h.charge else None
        if c is not None and c.state == "CHARGING":
            self.deliver(c, captured=True, duplicated=False)

    @rule()
    def sweep(self) -> None:
        self.model.sweep()
        for store in self.stores:
            self.run(store.sweep(self.event_id, batch_max=100))
            self.run(store.sweep_quarantine(self.event_id, batch_max=100))

    @rule(
        sku=st.sampled_from(sorted(SKUS)), loc=st.sampled_from(LOCATIONS),
        mode=st.sampled_from(["set", "adjust"]), value=st.integers(-3, 5), reuse=st.booleans(),
    )  # fmt: skip
    def correct(self, sku: str, loc: str, mode: str, value: int, reuse: bool) -> None:
        if mode == "set":
            value = abs(value)
        if not reuse or not self.model.corrections:
            self.n += 1
        cid = f"k{self.n}"
        kw = {"set_to": value} if mode == "set" else {"adjust_by": value}
        answers = self.each(
            lambda s: attempt(
                s.stock.correct(self.event_id, cid, sku, loc, reason="count", operator="ops", **kw)
            )
        )
        expected = self.model.correct(cid, sku, loc, mode, value)
        self.agree(answers, "OK" if expected in ("APPLIED", "REPLAY") else expected)

    @invariant()
    def engine_matches_model(self) -> None:
        if not self.stores:
            return
        for store in self.stores:
            table = self.run(store.stock.table(self.event_id))
            got = {(s, loc): c for s, e in table.items() for loc, c in e["locations"].items()}
            assert got == self.model.stock, (got, self.model.stock)
            holds = self.run(store.read.holds(self.event_id))
            for hid, m in self.model.holds.items():
                h = holds[hid]
                assert (h.state, h.listing) == (m.state, m.listed), (hid, h, m)
            for cid, m in self.model.charges.items():
                assert self.run(store.read.charge(self.event_id, cid)).state == m.state, cid
            report = self.run(store.read.audit(self.event_id))
            assert report.ok, report.violations


StockMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip
TestStockOnFakeredis = pytest.mark.slow(StockMachine.TestCase)  # ~6 s: not in make test-fast


class StockFakeAndReal(StockMachine):
    use_real_redis = True


TestStockFakeredisAndRealRedisAgree = pytest.mark.redis(StockFakeAndReal.TestCase)
TestStockFakeredisAndRealRedisAgree.settings = settings(
    max_examples=25, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip
