"""The state machine's claims (a mixin of tests/property/test_stateful.py's EngineMachine):
the best seat, one seat, n best, a party of specific seats (all or nothing), by a login with or
without a checkout (two tabs), followed by a charge of the price times the seats and its
capture; each claim through Store.claim on every backend, against the model."""

from collections.abc import Callable
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from engine.model.holds import SeatSpec
from tests.property.backend import Backend, changes, model_snapshot
from tests.property.model import PRICE, Model, Reply

LOGINS = ["alice", "bob", "carol"]
# Three sections: A's three seats are a block; B's ranks 4-6 and 8-9 are blocks split by a gap;
# rank 3 (A) -> 4 (B) and 9 (B) -> 10 (C) are consecutive ranks across sections (not adjacent).
# Blocks at several ranks let a stale "where the last block was" hint show (lua/_lib.lua).
SEAT_MAP = [
    SeatSpec(seat, rank, section)
    for seat, rank, section in [
        ("a1", 1, "A"), ("a2", 2, "A"), ("a3", 3, "A"),
        ("b1", 4, "B"), ("b2", 5, "B"), ("b3", 6, "B"), ("b4", 8, "B"), ("b5", 9, "B"),
        ("c1", 10, "C"), ("c2", 11, "C"),
    ]
]  # fmt: skip
SEAT_IDS = [s.seat_id for s in SEAT_MAP]
MAX_PARTY, CAP = 6, 6  # seats per claim (api/validate.py), seats a login may hold and buy
CHARGE_LIMITS = (0, 0)  # charge starts per second, burst: off
# What a claim asks for: the best seat, one seat (maybe unknown), n best (of 2..6, or most of
# the free seats, or one more than the login could have), specific seats.
WANTS = ["best", "seat", "n best", "n best", "most", "one too many", "seats", "seats"]
# Parties of 2..6, mostly small: "n best" keeps a hint per party size, so sizes must repeat.
QUANTITIES = [2, 2, 2, 3, 3, 4, 5, 6]


class ClaimRules:
    # Set by the machine (tests/property/test_stateful.py EngineMachine) and the other mixin
    # (tests/property/provider_rules.py): annotations only, so nothing here shadows them.
    model: Model
    backends: list[Backend]
    hold_ids: list[str]
    charge_ids: list[str]
    run: Callable[[Any], Any]
    both: Callable[[str, list[Any], Reply], None]
    fresh: Callable[[str], str]
    advance_clock: Callable[[int], None]
    deliver: Callable[..., None]

    def claim_both(
        self,
        hold_id: str,
        login: str,
        seats: tuple[str, ...] = (),
        quantity: int = 1,
        tab: str = "",
    ) -> Reply:
        """One claim through Store.claim on every backend, against the model. A refusal that
        leaves the model as it was must leave Redis byte for byte as it was. A party larger
        than what is free may be refused as `sold_out` or `not_enough_seats`."""
        before = model_snapshot(self.model)
        expected = self.model.claim(hold_id, login, seats, quantity)
        if hold_id in self.model.holds and hold_id not in self.hold_ids:
            self.hold_ids.append(hold_id)
        accepted = {expected}
        if expected == ("SOLD_OUT",) and not seats and quantity > 1:
            accepted.add(("NOT_ENOUGH_SEATS",))
        quiet = expected[0] not in ("OK", "REPLAY") and model_snapshot(self.model) == before
        how = "seats" if len(seats) > 1 else "n best" if quantity > 1 else "one"
        replaced = " (replaced a hold)" if expected[0] == "OK" and expected[2] else ""
        event(f"claim {how}{tab} -> {expected[0]}{replaced}")
        for b in self.backends:
            was = self.run(b.written()) if quiet else {}
            got = self.run(b.claim(hold_id, login, seats, quantity, self.model.ttl))
            asked = seats or quantity
            assert got in accepted, f"claim {hold_id} {login} {asked}: {got} != model {expected}"
            if quiet:
                changed = changes(was, self.run(b.written()))
                assert not changed, f"refused claim {hold_id} ({got[0]}) wrote {changed}"
        return expected

    def want(self, data: st.DataObject, login: str) -> tuple[tuple[str, ...], int]:
        """What a claim asks for: (seats, quantity)."""
        kind = data.draw(st.sampled_from(WANTS), label="asks for")
        if kind == "seat":
            return (data.draw(st.sampled_from([*SEAT_IDS, "nope"]), label="seat"),), 1
        if kind == "one too many":
            return (), self.one_too_many(login)
        if kind == "most":  # all but 0-2 of the free seats: crowded events come quickly
            left = data.draw(st.integers(0, 2), label="seats left")
            return (), max(2, min(MAX_PARTY, len(self.model.free) - left))
        if kind == "n best":
            return (), data.draw(st.sampled_from(QUANTITIES), label="quantity")
        if kind == "seats":
            return self.party(data, ()), 1
        return (), 1

    def one_too_many(self, login: str) -> int:
        """One seat more than the login could have: the free seats and those of its live hold
        (given up by a claim that succeeds), within 2..6."""
        return max(2, min(MAX_PARTY, len(self.model.free) + self.mine(login) + 1))

    def mine(self, login: str) -> int:
        prev = self.model.holds.get(self.model.logins.get(login, ""))
        return len(prev.seats) if prev is not None and prev.state == "RESERVED" else 0

    def party(self, data: st.DataObject, mine: tuple[str, ...]) -> tuple[str, ...]:
        """Specific seats: mostly free ones (and the login's own, for a second tab), else any,
        an unknown one included (all or nothing)."""
        free = sorted(self.model.free, key=self.model.ranks.__getitem__)
        pool = [*mine, *free]
        smallest = 1 if mine else 2
        if len(pool) < smallest or data.draw(st.integers(0, 2), label="any seat") == 0:
            pool = [*SEAT_IDS, "nope"]
        most = min(MAX_PARTY, len(pool))
        party = st.lists(st.sampled_from(pool), min_size=smallest, max_size=most, unique=True)
        return tuple(data.draw(party, label="seats"))

    def price(self, hold_id: str) -> int:
        return PRICE * len(self.model.holds[hold_id].seats)

    def charge_both(self, hold_id: str, login: str, charge_id: str) -> Reply:
        """Start a charge of the price times the hold's seats."""
        amount = self.price(hold_id)
        expected = self.model.start_charge(hold_id, login, charge_id, amount)
        if expected[0] == "OK":
            self.charge_ids.append(charge_id)
        self.both("charge_start", [hold_id, login, charge_id, amount, *CHARGE_LIMITS], expected)
        return expected

    @rule(data=st.data(), login=st.sampled_from(LOGINS))
    def claim(self, data: st.DataObject, login: str) -> None:
        """A claim, sometimes the replay of an earlier one; often by a login whose checkout
        the claim may replace (two tabs)."""
        replay = self.hold_ids and data.draw(st.integers(0, 5), label="replay") == 0
        hold_id = data.draw(st.sampled_from(self.hold_ids)) if replay else self.fresh("h")
        idle = self.idle_logins()
        if idle and bool(data.draw(st.booleans(), label="a login with a checkout")):
            login = data.draw(st.sampled_from(idle))
        self.claim_both(hold_id, login, *self.want(data, login))

    def idle_logins(self) -> list[str]:
        """Logins whose checkout has no charge in flight: a new claim of theirs replaces it."""
        logins = self.model.logins
        return sorted(x for x in logins if not self.model.holds[logins[x]].charge)

    @precondition(lambda self: self.model.logins)
    @rule(data=st.data(), how=st.sampled_from(["n best", "seats", "seats"]))
    def second_tab(self, data: st.DataObject, how: str) -> None:
        """A login with a checkout claims again from another tab: the previous hold is
        replaced only if the new claim succeeds and no charge of it is in flight; its own
        seats are available to the new claim."""
        logins, idle = sorted(self.model.logins), self.idle_logins()
        if idle and bool(data.draw(st.integers(0, 3), label="no charge in flight")):
            logins = idle  # mostly a hold the new claim may replace
        login = data.draw(st.sampled_from(logins))
        prev = self.model.holds[self.model.logins[login]]
        seats: tuple[str, ...] = ()
        quantity = data.draw(st.sampled_from([1, *QUANTITIES]), label="quantity")
        if how == "seats":
            seats, quantity = self.party(data, prev.seats), 1
        self.claim_both(self.fresh("h"), login, seats, quantity, f" (second tab, {how})")

    @precondition(lambda self: self.short_tabs())
    @rule(data=st.data())
    def second_tab_one_too_many(self, data: st.DataObject) -> None:
        """A second tab asks for one seat more than the login could have (the free seats and
        those of its checkout, which a claim that succeeds gives up): refused, and the
        checkout stays exactly as it was."""
        login = data.draw(st.sampled_from(self.short_tabs()))
        self.claim_both(self.fresh("h"), login, (), self.one_too_many(login), " (one too many)")

    def short_tabs(self) -> list[str]:
        """Logins with a live checkout that one too many seats would not take past the cap,
        while some seats are free."""
        m = self.model
        short = []
        for login in self.idle_logins():
            n = len(m.free) + self.mine(login) + 1
            live = m.now < m.holds[m.logins[login]].expires
            if m.free and live and 2 <= n <= MAX_PARTY and m.bought.get(login, 0) + n <= CAP:
                short.append(login)
        return short

    @rule(data=st.data(), login=st.sampled_from(LOGINS), slow=st.sampled_from([0, 0, 1]))
    def checkout(self, data: st.DataObject, login: str, slow: int) -> None:
        """Claim then start a charge at once: reaches charges in flight in few steps. A slow
        buyer is still paying when the deadline comes: the payment will be late."""
        hold_id = self.fresh("h")
        if self.claim_both(hold_id, login, *self.want(data, login))[0] != "OK":
            return
        if self.charge_both(hold_id, login, self.fresh("c"))[0] == "OK" and slow:
            self.advance_clock(self.model.holds[hold_id].expires - self.model.now)

    @rule(data=st.data(), login=st.sampled_from(LOGINS))
    def buy(self, data: st.DataObject, login: str) -> None:
        """Claim, charge and capture at once: reaches sold seats, the per-login cap, and the
        provider's later movements of their money, in few steps."""
        hold_id, charge_id = self.fresh("h"), self.fresh("c")
        if self.claim_both(hold_id, login, *self.want(data, login))[0] != "OK":
            return
        if self.charge_both(hold_id, login, charge_id)[0] == "OK":
            self.deliver(self.fresh("pe"), charge_id, f"att-{charge_id}", "CAPTURED")
