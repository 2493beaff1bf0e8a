"""The state machine's rules for what the payment provider says and does (a mixin of
tests/property/test_stateful.py's EngineMachine): outcomes duplicated, reordered, late, unknown,
contradicting, of another amount or incoherent; refunds and disputes it makes on its own; our
refunds' results; an operator's revoke. Every message about a charge carries, unless it is meant
to be wrong, the charge's own amount: the price times its hold's seats."""

from collections.abc import Callable
from types import EllipsisType
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from engine.model.holds import Charge
from tests.property.backend import Backend
from tests.property.model import PRICE, STATUS_OF, Model, Provider, Reply

REVERSALS = ["REFUND", "DISPUTE_OPENED", "DISPUTE_WON", "DISPUTE_LOST"]


class ProviderRules:
    # Set by the machine (tests/property/test_stateful.py EngineMachine): annotations only,
    # so nothing here shadows them.
    model: Model
    provider: Provider
    backends: list[Backend]
    event_id: str
    charge_ids: list[str]
    hold_ids: list[str]
    ghosts: list[str]
    # Provider messages delivered and recorded, for at-least-once replays: (op, arguments).
    deliveries: list[tuple[str, tuple[Any, ...]]]
    run: Callable[[Any], Any]
    both: Callable[[str, list[Any], Reply], None]
    fresh: Callable[[str], str]

    def price_of(self, key: str) -> int:
        """What the charge named by `key` asks for (a ghost's: one seat's price)."""
        c = self.model.charges.get(key)
        return c.amount if c is not None else PRICE

    def deliver(
        self,
        event_id: str,
        key: str,
        attempt: str,
        outcome: str,
        status: str = "",
        amount: int | EllipsisType | None = ...,
    ) -> None:
        """One provider message about an attempt (charge_outcome_v2): truthful about the event,
        hold, charge and currency; its status and amount are what the provider says (by
        default the charge's own amount)."""
        status = status or STATUS_OF[outcome]
        if isinstance(amount, EllipsisType):
            amount = self.price_of(key)
        if attempt in self.provider.unheard and outcome == "CAPTURED" and amount is not None:
            amount = self.provider.captured[attempt]  # the message of a capture it already made
        if event_id not in self.model.callbacks:  # a replay moves no money
            self.deliveries.append(
                ("charge_outcome_v2", (event_id, key, attempt, outcome, status, amount))
            )
            self.provider.told(attempt, key)
            if outcome == "CAPTURED" and status == "captured" and amount is not None:
                self.provider.capture(attempt, amount)
                self.provider.unheard.discard(attempt)
        ours = self.model.charges.get(key)
        hold = ours.hold_id if ours is not None else ""
        party = self.model.holds[hold] if hold else None
        if party is not None and len(party.seats) > 1 and outcome == "CAPTURED":
            late = self.model.now >= party.expires
            event(f"capture of a party's charge{' past its deadline' if late else ''}")
        expected = self.model.outcome(event_id, key, attempt, outcome, status, amount)
        argv: list[Any] = [event_id, key, attempt, f"pi-{key}", outcome, status]
        argv += ["invalid" if amount is None else amount, "EUR", self.event_id, hold, key]
        self.both("charge_outcome_v2", argv, expected)

    def reverse(self, event_id: str, key: str, attempt: str, kind: str) -> None:
        """Money the provider moved after a capture, or says it moved (charge_reversal)."""
        amount = self.provider.captured.get(attempt, self.price_of(key))
        first = event_id not in self.model.callbacks
        expected = self.model.reversal(event_id, key, attempt, kind, amount)
        if first:  # a replay moves no money; a duplicate notification finds nothing to move
            self.provider.move(attempt, kind)
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
        amount=st.sampled_from([1, 250, 250, 0, PRICE]),
        new_attempt=st.integers(0, 4),
    )
    def wrong_amount(
        self, data: st.DataObject, outcome: str, amount: int, new_attempt: int
    ) -> None:
        """A coherent message for another amount than the charge's (one seat's price for a
        party's charge, say): a capture of it is refunded and never confirms."""
        suffix = "-2" if new_attempt == 0 else ""
        ok = list(self.charge_ids)
        pending = [c for c in ok if self.model.charges[c].state == "CHARGING"]
        pool = pending if pending and data.draw(st.integers(0, 3)) != 0 else ok
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
        amount = None if broken in ("amount", "both") else self.price_of(key)
        self.deliver(self.fresh("pe"), key, f"att-{key}{suffix}", outcome, status, amount)

    @precondition(lambda self: self.provider.keys or self.charge_ids)
    @rule(data=st.data())
    def provider_reversal(self, data: st.DataObject) -> None:
        """The provider moves money on its own after a capture: its own refund, a dispute opened,
        won or lost (mostly of a sold seat's money). Or it captures a charge and moves that money
        at once, the capture's message still on its way (delivered later, like a replay: the
        movement is noted and applied when it lands, ADR 0036). Or it notifies a movement it made
        again (a new provider event about the same movement)."""
        told = sorted(self.provider.keys)
        moves = [(a, k) for a in told for k in REVERSALS if self.provider.can(a, k)]
        sold = [(a, k) for a, k in moves if self.wins(a)]
        charging = [
            c
            for c in self.charge_ids
            if self.model.charges[c].state == "CHARGING" and f"att-{c}" not in self.provider.keys
        ]
        pick = data.draw(st.integers(0, 3), label="movement")
        if moves and pick:
            attempt, kind = data.draw(st.sampled_from(sold if sold and pick > 1 else moves))
        elif charging and data.draw(st.booleans(), label="before its capture's message"):
            charge_id = data.draw(st.sampled_from(charging))
            attempt, amount = f"att-{charge_id}", self.price_of(charge_id)
            self.provider.told(attempt, charge_id)
            self.provider.capture(attempt, amount)
            self.provider.unheard.add(attempt)
            kind = data.draw(st.sampled_from(["REFUND", "DISPUTE_OPENED"]))
            on_its_way = (self.fresh("pe"), charge_id, attempt, "CAPTURED", "captured", amount)
            self.deliveries.append(("charge_outcome_v2", on_its_way))
        elif self.provider.made:
            attempt, kind = data.draw(st.sampled_from(self.provider.made))
        else:
            return
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
        """An operator takes back the seats of a hold whose money left (EXCEPTION)."""
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
