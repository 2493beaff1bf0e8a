"""A plain-Python model of one event: the reference the Lua scripts are checked against.

Its seats, holds, parties, sessions and charge starts are tests/property/model_seats.py; this module
adds what the payment provider says (charge_outcome_v2, charge_reversal). Both are written from the
transition tables in engine/model/states.py (every hold and charge state change goes through
hold_transition / charge_transition, so an illegal move raises) and from docs/spec.md's rules, not
from the Lua source. `Provider` is the other side: the money the payment provider holds per attempt,
which the engine's charges must account for."""

from dataclasses import dataclass, field

from engine.model.states import ChargeEvent, ChargeState, HoldEvent, HoldState, ReversalPolicy
from tests.property.model_seats import (
    PRICE,
    STATUS_OF,
    MCharge,
    MHold,
    Reply,
    Seats,
    seat_list,
)

__all__ = ["PRICE", "STATUS_OF", "MCharge", "MHold", "Model", "Provider", "Reply", "seat_list"]

S = ChargeState
OPEN_STATES = (S.CHARGING, S.DECLINED, S.FAILED)
REVERSALS = {  # what the provider says it did -> the model's step for it
    "REFUND": "_provider_refund",
    "DISPUTE_OPENED": "_dispute_opened",
    "DISPUTE_WON": "_dispute_won",
    "DISPUTE_LOST": "_dispute_lost",
}


def incoherent(outcome: str, status: str, amount: int | None) -> list[str]:
    """What makes a message incoherent: a status that disagrees with its type, no amount."""
    problems = []
    if status != STATUS_OF[outcome]:
        problems.append("status")
    if amount is None or amount < 0:
        problems.append("amount")
    return problems


@dataclass
class Model(Seats):
    # -- provider outcomes (charge_outcome_v2) ------------------------------------------------

    def outcome(
        self, event_id: str, key: str, attempt: str, outcome: str, status: str, amount: int | None
    ) -> Reply:
        """A provider message, truthful about its event, hold and charge (charge_outcome_v2).
        `amount` None: not an amount of money."""
        if event_id in self.callbacks:
            recorded = self.callbacks[event_id]
            return (*recorded[:5], "0", recorded[6])
        problems = incoherent(outcome, status, amount)
        c = self.charges.get(self.attempts.get(attempt, ""))
        parent = None if c is not None else self.charges.get(key)
        target = c or parent
        if target is None:
            return self._unknown_money(event_id, key, attempt, outcome, amount, problems)
        if key != target.key:
            problems.append("charge")
        h = self.holds.get(target.hold_id)
        if problems:  # not bound, nothing moves: an alert
            self.alerts.add(f"pev/{event_id}")
            return self._finish(event_id, "MISMATCH", target, h, ",".join(problems))
        assert amount is not None
        if c is None:
            assert parent is not None
            c = self._bind(parent, attempt)
        if h is not None:
            self.settle(h)
        if amount != (c.captured if c.orphan else c.amount):
            return self._other_amount(event_id, c, h, outcome, amount)
        if c.state == ChargeState.CHARGING:
            code = self._decide(c, h, outcome, amount)
            if outcome == "CAPTURED":
                self._moves_due(c, h)  # what the provider moved before this capture reached us
        else:
            code = self._after_decision(event_id, c, outcome, amount)
        return self._finish(event_id, code, c, h, "")

    def _unknown_money(
        self,
        event_id: str,
        key: str,
        attempt: str,
        outcome: str,
        amount: int | None,
        problems: list[str],
    ) -> Reply:
        """A message naming no charge of ours: a coherent capture is an orphan to refund."""
        self.alerts.add(f"pev/{event_id}")
        if outcome == "CAPTURED" and not problems:
            assert amount is not None
            o = MCharge(f"orphan/{attempt}", "", refund_only=True, attempt=attempt, key=key)
            o.amount, o.captured, o.orphan = 0, amount, True
            self._charge_to(o, ChargeEvent.CAPTURE_LOSES)  # captured, tied to no hold
            self.charges[o.charge_id] = o
            self.attempts[attempt] = o.charge_id
            self.refunds.add(o.charge_id)
            return self._finish(event_id, "REFUND", o, None, "")
        return self._finish(event_id, "MISMATCH", None, None, ",".join(problems), key)

    def _bind(self, parent: MCharge, attempt: str) -> MCharge:
        """The first attempt binds to its charge; a further one becomes a child charge."""
        c = parent
        if parent.attempt:
            c = MCharge(f"{parent.charge_id}/{attempt}", parent.hold_id, key=parent.key)
            c.amount = parent.amount
            c.refund_only = parent.refund_only
            self.charges[c.charge_id] = c
        c.attempt = attempt
        self.attempts[attempt] = c.charge_id
        return c

    def _other_amount(
        self, event_id: str, c: MCharge, h: MHold | None, outcome: str, amount: int
    ) -> Reply:
        """Coherent, about our charge, for another amount: captured money that cannot win."""
        self.alerts.add(f"pev/{event_id}")
        code = "MISMATCH"
        before = c.state
        if outcome == "CAPTURED" and before in OPEN_STATES:  # 0 too: the attempt is closed
            c.captured = amount
            charging = before == ChargeState.CHARGING
            self._charge_to(
                c, ChargeEvent.CAPTURE_LOSES if charging else ChargeEvent.CAPTURE_CONTRADICTS
            )
            self.refunds.add(c.charge_id)
            if h is not None and charging:
                self._charge_resolved(h, c)
            self._moves_due(c, h)
            code = "REFUND"
        return self._finish(event_id, code, c, h, "amount")

    def _decide(self, c: MCharge, h: MHold | None, outcome: str, amount: int) -> str:
        """The provider's first word on a CHARGING charge: confirm-if-charge-wins."""
        if outcome != "CAPTURED":
            self._charge_to(c, ChargeEvent.DECLINE if outcome == "DECLINED" else ChargeEvent.FAIL)
            if h is not None:
                self._charge_resolved(h, c)
            return outcome
        c.captured = amount
        live = h is not None and h.state in (HoldState.RESERVED, HoldState.QUARANTINED)
        if not c.refund_only and h is not None and not h.winner and live and not h.given_up:
            self._charge_to(c, ChargeEvent.CAPTURE_WINS)
            if h.charge == c.charge_id:
                h.charge = ""
            h.winner = c.charge_id
            self._seat(h, "S")
            self._hold_to(h, HoldEvent.CAPTURE_WINS)
            return "CONFIRMED"
        self._charge_to(c, ChargeEvent.CAPTURE_LOSES)
        self.refunds.add(c.charge_id)
        if h is not None:
            self._charge_resolved(h, c)
        return "REFUND"

    def _after_decision(self, event_id: str, c: MCharge, outcome: str, amount: int) -> str:
        """A message about a charge the provider decided before."""
        if outcome == "CAPTURED" and c.state in (S.CAPTURED, S.REFUNDING):
            return "CONFIRMED" if c.state == S.CAPTURED else "REFUND"
        if outcome == "CAPTURED" and c.state == S.REFUNDED:
            self._charge_to(c, ChargeEvent.CAPTURE_AFTER_REFUND)
            self.refunds.add(c.charge_id)
            return "REFUND"
        if outcome == "CAPTURED" and c.state in (S.DECLINED, S.FAILED):
            # The provider captured after its own decline: money to give back, never a seat.
            c.captured = amount
            self._charge_to(c, ChargeEvent.CAPTURE_CONTRADICTS)
            self.refunds.add(c.charge_id)
            self.alerts.add(f"pev/{event_id}")
            self._moves_due(c, self.holds.get(c.hold_id))
            return "REFUND"
        if outcome == "CAPTURED":
            return "STALE"  # the money moved since (refunded at the provider, disputed)
        if outcome == c.state:
            return outcome
        self.alerts.add(f"pev/{event_id}")
        return "CONTRADICTION"

    def _finish(
        self,
        event_id: str,
        code: str,
        c: MCharge | None,
        h: MHold | None,
        problems: str,
        key: str = "",
    ) -> Reply:
        reply = (
            code,
            c.charge_id if c else key,
            c.state if c else "",
            c.hold_id if c else "",
            h.state if h else "",
            "1",
            problems,
        )
        self.callbacks[event_id] = reply
        return reply

    # -- money the provider moved after a capture (charge_reversal) ---------------------------

    def reversal(self, event_id: str, key: str, attempt: str, kind: str, amount: int) -> Reply:
        """Money the provider moved after a capture (charge_reversal), truthful about the event
        and currency. One that arrives before its predecessor (the capture, or the dispute's
        opening) is noted and applied when that lands, in the provider's order (ADR 0036)."""
        if event_id in self.callbacks:
            return (*self.callbacks[event_id][:5], "0")
        c = self.charges.get(self.attempts.get(attempt, ""))
        unbound = c is None and key in self.charges
        if unbound:
            c = self.charges[key]  # its capture has not reached us: noted on the key's charge
        if c is None:
            self.alerts.add(f"pev/{event_id}")
            return self._finish(event_id, "MISMATCH", None, None, "", key)[:6]
        h = self.holds.get(c.hold_id)
        if key != c.key:
            self.alerts.add(f"pev/{event_id}")
            return self._finish(event_id, "MISMATCH", c, h, "")[:6]
        if unbound or self._early(c, kind):
            self.charges.get(c.key, c).early.append((attempt, kind, event_id))
            return self._finish(event_id, "NOTED", c, h, "")[:6]
        if amount != (c.captured or c.amount):
            self.alerts.add(f"pev/{event_id}")  # partial or wrong amount: the whole charge moved
        code = self._move(c, h, kind, event_id)
        self._moves_due(c, h)
        return self._finish(event_id, code, c, h, "")[:6]

    @staticmethod
    def _early(c: MCharge, kind: str) -> bool:
        """Before its predecessor: no capture seen yet, or a dispute's end before its start."""
        if c.state in OPEN_STATES:
            return True
        return kind in ("DISPUTE_WON", "DISPUTE_LOST") and c.state != S.DISPUTED and not c.disputed

    def _move(self, c: MCharge, h: MHold | None, kind: str, event_id: str) -> str:
        wins = h if h is not None and h.winner == c.charge_id else None
        code: str = getattr(self, REVERSALS[kind])(c, wins)
        if code == "CONTRADICTION":
            self.alerts.add(f"pev/{event_id}")
        return code

    def _moves_due(self, c: MCharge, h: MHold | None) -> None:
        """The movements noted for c's attempt, in arrival order, each once its predecessor
        is there; the rest keep waiting."""
        parent = self.charges.get(c.key, c)
        due = [m for m in parent.early if m[0] == c.attempt]
        if not due:
            return
        kept = [m for m in parent.early if m[0] != c.attempt]
        progress = True
        while progress:
            progress = False
            waiting = []
            for move in due:
                if self._early(c, move[1]):
                    waiting.append(move)
                else:
                    self._move(c, h, move[1], move[2])
                    progress = True
            due = waiting
        parent.early = kept + due

    def _revoking(self) -> bool:
        return self.reversal_policy == ReversalPolicy.REVOKE

    def _provider_refund(self, c: MCharge, wins: MHold | None) -> str:
        if c.state == S.REFUNDING:
            self._charge_to(c, ChargeEvent.PROVIDER_REFUND)
            self.refunds.discard(c.charge_id)
            return "REFUNDED"
        if c.state == S.CAPTURED:
            self._charge_to(c, ChargeEvent.PROVIDER_REFUND)
            if wins is not None and wins.state == HoldState.CONFIRMED:
                self._after_sale(
                    wins, HoldEvent.MONEY_LEFT_REVOKE if self._revoking() else HoldEvent.MONEY_LEFT
                )
            return "MONEY_LEFT"
        if c.state in (S.REFUNDED, S.PROVIDER_REFUNDED):
            return "DUPLICATE"
        return "CONTRADICTION"

    def _dispute_opened(self, c: MCharge, wins: MHold | None) -> str:
        if c.disputed:  # one dispute per charge: the same one notified again
            return "DUPLICATE"
        if c.state in (S.CAPTURED, S.REFUNDING):
            c.disputed = True
        if c.state == S.CAPTURED:
            self._charge_to(c, ChargeEvent.DISPUTE_OPENED)
            if wins is not None and wins.state == HoldState.CONFIRMED:
                self._after_sale(wins, HoldEvent.DISPUTE_OPENED)
            return "DISPUTED"
        if c.state == S.REFUNDING:  # money we were giving back, withdrawn by the provider
            self._charge_to(c, ChargeEvent.DISPUTE_OPENED)
            self.refunds.discard(c.charge_id)
            return "DISPUTED"
        return "DUPLICATE" if c.state == S.DISPUTED else "CONTRADICTION"

    def _dispute_won(self, c: MCharge, wins: MHold | None) -> str:
        if c.state == S.DISPUTED:
            if wins is not None and wins.state == HoldState.EXCEPTION:
                self._charge_to(c, ChargeEvent.DISPUTE_WON)
                self._after_sale(wins, HoldEvent.DISPUTE_WON)
                return "REINSTATED"
            # The seats were taken back meanwhile: the money goes back to the buyer.
            self._charge_to(c, ChargeEvent.DISPUTE_WON_NO_SEAT)
            self.refunds.add(c.charge_id)
            return "REFUND"
        return "DUPLICATE" if c.state in (S.CAPTURED, S.REFUNDING) else "CONTRADICTION"

    def _dispute_lost(self, c: MCharge, wins: MHold | None) -> str:
        if c.state == S.DISPUTED:
            self._charge_to(c, ChargeEvent.DISPUTE_LOST)
            if wins is not None and wins.state == HoldState.EXCEPTION and self._revoking():
                self._after_sale(wins, HoldEvent.MONEY_LEFT_REVOKE)
            return "CHARGED_BACK"
        return "DUPLICATE" if c.state == S.CHARGED_BACK else "CONTRADICTION"


@dataclass
class Provider:
    """The payment provider's side, played by the test: the money it holds per attempt. Money is
    captured once per attempt, at its first coherent CAPTURED message (0 included: then it holds
    nothing; replays and duplicate notifications move none); a refund (ours or its own) returns
    what it holds; a dispute opened withdraws it, a dispute won puts it back, a dispute lost
    keeps it gone; one dispute per attempt."""

    keys: dict[str, str] = field(default_factory=dict)  # attempt -> the key its messages name
    captured: dict[str, int] = field(default_factory=dict)  # attempt -> amount captured
    net: dict[str, int] = field(default_factory=dict)  # attempt -> money it holds now
    disputed: dict[str, int] = field(default_factory=dict)  # attempt -> withdrawn, dispute open
    made: list[tuple[str, str]] = field(default_factory=list)  # movements made: (attempt, kind)
    # Attempts it captured whose capture message has not reached the engine yet: what it holds
    # for them is on its way, not missing.
    unheard: set[str] = field(default_factory=set)

    def told(self, attempt: str, key: str) -> None:
        self.keys.setdefault(attempt, key)

    def capture(self, attempt: str, amount: int) -> None:
        if attempt not in self.captured:  # 0 too: the attempt's one capture, of nothing
            self.captured[attempt] = amount
            self.net[attempt] = amount

    def can(self, attempt: str, kind: str) -> bool:
        """Whether the provider can make this movement now (else it only notifies again)."""
        if kind == "DISPUTE_OPENED" and (attempt, kind) in self.made:
            return False  # one dispute per charge, as at Stripe
        if kind in ("REFUND", "DISPUTE_OPENED"):
            return self.net.get(attempt, 0) > 0
        return attempt in self.disputed

    def move(self, attempt: str, kind: str) -> None:
        if not self.can(attempt, kind):
            return
        self.made.append((attempt, kind))
        if kind == "REFUND":
            self.net[attempt] = 0
        elif kind == "DISPUTE_OPENED":
            self.disputed[attempt] = self.net[attempt]
            self.net[attempt] = 0
        elif kind == "DISPUTE_WON":
            self.net[attempt] += self.disputed.pop(attempt)
        else:
            del self.disputed[attempt]

    def holding(self) -> dict[str, int]:
        """What it holds for attempts whose capture the engine has heard of."""
        return {a: n for a, n in self.net.items() if n and a not in self.unheard}
