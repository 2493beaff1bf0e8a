"""A plain-Python model of one event: the reference the Lua scripts are checked against.

It is written from the transition tables in engine/states.py (every hold and charge state change
goes through hold_transition / charge_transition, so an illegal move raises) and from docs/spec.md's
rules, not from the Lua source. Time is an explicit integer clock. `Provider` is the other side:
the money the payment provider holds per attempt, which the engine's charges must account for."""

from dataclasses import dataclass, field

from engine.states import (
    CHARGE_TERMINAL,
    HOLD_DECIDED,
    HOLD_TERMINAL,
    ChargeEvent,
    ChargeState,
    HoldEvent,
    HoldState,
    LatePolicy,
    ReversalPolicy,
    charge_transition,
    hold_transition,
)

Reply = tuple[str, ...]
PRICE = 100  # minor units every charge asks for
STATUS_OF = {"CAPTURED": "captured", "DECLINED": "declined", "FAILED": "failed"}


@dataclass
class MHold:
    hold_id: str
    login: str
    seat: str
    expires: int
    state: HoldState = HoldState.RESERVED
    charge: str = ""
    blocking: str = ""
    winner: str = ""
    until: int = 0
    given_up: bool = False  # released by its owner while quarantined


@dataclass
class MCharge:
    charge_id: str
    hold_id: str
    state: ChargeState = ChargeState.CHARGING
    refund_only: bool = False
    attempt: str = ""
    abandoned: bool = False
    key: str = ""  # the provider idempotency key: the root charge's id ("" = its own id)
    amount: int = PRICE
    captured: int = 0  # what the provider reported captured
    orphan: bool = False  # captured money tied to no charge of ours
    final: bool = False  # its one terminal record exists

    def __post_init__(self) -> None:
        self.key = self.key or self.charge_id


@dataclass
class Model:
    ranks: dict[str, int]
    ttl: int
    quarantine: int
    policy: LatePolicy
    now: int
    reversal_policy: ReversalPolicy = ReversalPolicy.MANUAL
    free: set[str] = field(default_factory=set)
    owners: dict[str, tuple[str, str]] = field(default_factory=dict)  # seat -> (H|B|S, hold)
    holds: dict[str, MHold] = field(default_factory=dict)
    charges: dict[str, MCharge] = field(default_factory=dict)
    logins: dict[str, str] = field(default_factory=dict)
    attempts: dict[str, str] = field(default_factory=dict)
    callbacks: dict[str, Reply] = field(default_factory=dict)
    refunds: set[str] = field(default_factory=set)
    terminal_records: list[tuple[str, str]] = field(default_factory=list)
    alerts: set[str] = field(default_factory=set)  # alert ids (provider messages for ops)

    def __post_init__(self) -> None:
        self.free = set(self.ranks)

    # -- seats and helpers ----------------------------------------------------------------

    def _seat(self, h: MHold, kind: str | None) -> None:
        assert self.owners[h.seat][1] == h.hold_id
        if kind is None:
            del self.owners[h.seat]
            self.free.add(h.seat)
        else:
            self.owners[h.seat] = (kind, h.hold_id)

    def _hold_to(self, h: MHold, event: HoldEvent) -> None:
        """The first decision of a hold is its one terminal record; the moves after the sale
        (money left, a dispute won, a revoke) are not."""
        decided = h.state in HOLD_DECIDED
        h.state = hold_transition(h.state, event)
        if h.state in HOLD_TERMINAL and not decided:
            self.terminal_records.append(("hold", h.hold_id))
            if self.logins.get(h.login) == h.hold_id:
                del self.logins[h.login]

    def _charge_to(self, c: MCharge, event: ChargeEvent) -> None:
        """A charge's first terminal state is its one terminal record; later moves the
        provider forces are not."""
        c.state = charge_transition(c.state, event)
        if c.state in CHARGE_TERMINAL and not c.final:
            c.final = True
            self.terminal_records.append(("charge", c.charge_id))

    def _after_sale(self, h: MHold, event: HoldEvent) -> None:
        self._hold_to(h, event)
        if h.state == HoldState.REVOKED:
            self._seat(h, None)

    def _refund_only(self, charge_id: str) -> None:
        if charge_id:
            self.charges[charge_id].refund_only = True

    def settle(self, h: MHold) -> None:
        """The deadline rule (docs/spec.md): live while now < expires."""
        if h.state == HoldState.RESERVED and self.now >= h.expires:
            if h.charge and self.policy == LatePolicy.QUARANTINE:
                self._hold_to(h, HoldEvent.DEADLINE_CHARGING)
                h.until = h.expires + self.quarantine
                self._seat(h, "B")
            else:
                event = HoldEvent.DEADLINE_IDLE
                if h.charge:
                    event = HoldEvent.DEADLINE_CHARGING_RELEASE
                    self._refund_only(h.charge)
                    h.charge = ""
                self._seat(h, None)
                self._hold_to(h, event)
        if h.state == HoldState.QUARANTINED and self.now >= h.until:
            self._refund_only(h.charge)
            h.charge = ""
            self._seat(h, None)
            self._hold_to(h, HoldEvent.QUARANTINE_TIMEOUT)
        if h.state == HoldState.RELEASED and h.blocking and self.now >= h.until:
            self._seat(h, None)
            h.blocking = ""

    def _charge_resolved(self, h: MHold, c: MCharge) -> None:
        if h.charge == c.charge_id:
            h.charge = ""
            if h.state == HoldState.QUARANTINED:
                self._seat(h, None)
                self._hold_to(h, HoldEvent.CHARGE_RESOLVED)
                return
        if h.state == HoldState.RELEASED and h.blocking == c.charge_id:
            self._seat(h, None)
            h.blocking = ""

    # -- operations (same replies as the scripts) -------------------------------------------

    def claim(self, hold_id: str, login: str, want: str) -> Reply:
        if hold_id in self.holds:
            h = self.holds[hold_id]
            if h.login != login:
                return ("IDEMPOTENCY_KEY_REUSED",)
            self.settle(h)
            return ("REPLAY", h.state)
        prev = self.holds.get(self.logins.get(login, ""))
        if prev is not None:
            self.settle(prev)
            if prev.state == HoldState.QUARANTINED or (
                prev.state == HoldState.RESERVED and prev.charge
            ):
                return ("CHARGE_IN_FLIGHT",)
            if prev.state != HoldState.RESERVED:
                prev = None
        if want:
            if want not in self.ranks:
                return ("UNKNOWN_SEAT",)
            mine = prev is not None and prev.seat == want
            if not mine and want not in self.free:
                return ("SEAT_TAKEN",)
        elif not self.free:  # with or without a previous hold: it keeps the one it has
            return ("SOLD_OUT",)
        if prev is not None:
            self._seat(prev, None)
            self._hold_to(prev, HoldEvent.RELEASE)
        seat = want or min(self.free, key=lambda s: (self.ranks[s], s))
        self.free.remove(seat)
        self.owners[seat] = ("H", hold_id)
        self.holds[hold_id] = MHold(hold_id, login, seat, self.now + self.ttl)
        self.logins[login] = hold_id
        return ("OK", seat)

    def release(self, hold_id: str, login: str) -> Reply:
        h = self.holds.get(hold_id)
        if h is None:
            return ("NOT_FOUND",)
        if h.login != login:
            return ("NOT_OWNER",)
        self.settle(h)
        if h.state == HoldState.RESERVED:
            if not h.charge:
                self._seat(h, None)
            else:
                self._refund_only(h.charge)
                self._seat(h, "B")
                h.blocking, h.charge = h.charge, ""
                h.until = self.now + self.quarantine
            self._hold_to(h, HoldEvent.RELEASE)
            return ("RELEASED", h.state)
        if h.state == HoldState.QUARANTINED:
            self._refund_only(h.charge)
            h.given_up = True
            if self.logins.get(h.login) == h.hold_id:
                del self.logins[h.login]
            return ("RELEASED", h.state)
        return ("ALREADY_TERMINAL", h.state)

    def start_charge(self, hold_id: str, login: str, charge_id: str) -> Reply:
        h = self.holds.get(hold_id)
        if h is None:
            return ("NOT_FOUND",)
        if h.login != login:
            return ("NOT_OWNER",)
        if charge_id in self.charges:
            c = self.charges[charge_id]
            if c.hold_id != hold_id:
                return ("IDEMPOTENCY_KEY_REUSED",)
            return ("REPLAY", c.state)
        self.settle(h)
        if h.state != HoldState.RESERVED:
            return ("HOLD_NOT_LIVE", h.state)
        if h.charge:
            return ("CHARGE_IN_FLIGHT", h.charge)
        self.charges[charge_id] = MCharge(charge_id, hold_id)
        h.charge = charge_id
        return ("OK", charge_id)

    def abandon(self, hold_id: str, login: str, charge_id: str) -> Reply:
        h, c = self.holds.get(hold_id), self.charges.get(charge_id)
        if h is None or c is None or c.hold_id != hold_id:
            return ("NOT_FOUND",)
        if h.login != login:
            return ("NOT_OWNER",)
        self.settle(h)
        if c.abandoned:
            return ("ABANDONED",)
        if h.state != HoldState.RESERVED or h.charge != charge_id:
            return ("NOT_IN_FLIGHT", c.state)
        if not c.refund_only:
            c.abandoned = True
        c.refund_only = True
        h.charge = ""
        return ("ABANDONED",)

    def outcome(
        self, event_id: str, key: str, attempt: str, outcome: str, status: str, amount: int | None
    ) -> Reply:
        """A provider message, truthful about its event, hold and charge (charge_outcome_v2).
        `amount` None: not an amount of money."""
        if event_id in self.callbacks:
            recorded = self.callbacks[event_id]
            return (*recorded[:5], "0", recorded[6])
        alert = f"pev/{event_id}"
        problems = []
        if status != STATUS_OF[outcome]:
            problems.append("status")
        if amount is None or amount < 0:
            problems.append("amount")
        c = self.charges.get(self.attempts.get(attempt, ""))
        parent = None if c is not None else self.charges.get(key)
        target = c or parent
        if target is None:
            self.alerts.add(alert)
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
        if key != target.key:
            problems.append("charge")
        h = self.holds.get(target.hold_id)
        if problems:  # not bound, nothing moves: an alert
            self.alerts.add(alert)
            return self._finish(event_id, "MISMATCH", target, h, ",".join(problems))
        assert amount is not None
        if c is None:
            assert parent is not None
            if not parent.attempt:
                c = parent
            else:
                c = MCharge(f"{parent.charge_id}/{attempt}", parent.hold_id, key=parent.key)
                c.refund_only = parent.refund_only
                self.charges[c.charge_id] = c
            c.attempt = attempt
            self.attempts[attempt] = c.charge_id
        if h is not None:
            self.settle(h)
        if amount != (c.captured if c.orphan else c.amount):
            # Coherent, about our charge, for another amount: captured money that cannot win.
            self.alerts.add(alert)
            code = "MISMATCH"
            before = c.state
            open_states = (ChargeState.CHARGING, ChargeState.DECLINED, ChargeState.FAILED)
            if outcome == "CAPTURED" and before in open_states and amount > 0:
                c.captured = amount
                event = (
                    ChargeEvent.CAPTURE_LOSES
                    if before == ChargeState.CHARGING
                    else ChargeEvent.CAPTURE_CONTRADICTS
                )
                self._charge_to(c, event)
                self.refunds.add(c.charge_id)
                if h is not None and before == ChargeState.CHARGING:
                    self._charge_resolved(h, c)
                code = "REFUND"
            return self._finish(event_id, code, c, h, "amount")
        if c.state == ChargeState.CHARGING:
            if outcome == "CAPTURED":
                c.captured = amount
                live = h is not None and h.state in (HoldState.RESERVED, HoldState.QUARANTINED)
                if not c.refund_only and h is not None and not h.winner and live and not h.given_up:
                    self._charge_to(c, ChargeEvent.CAPTURE_WINS)
                    if h.charge == c.charge_id:
                        h.charge = ""
                    h.winner = c.charge_id
                    self._seat(h, "S")
                    self._hold_to(h, HoldEvent.CAPTURE_WINS)
                    code = "CONFIRMED"
                else:
                    self._charge_to(c, ChargeEvent.CAPTURE_LOSES)
                    self.refunds.add(c.charge_id)
                    if h is not None:
                        self._charge_resolved(h, c)
                    code = "REFUND"
            else:
                self._charge_to(
                    c, ChargeEvent.DECLINE if outcome == "DECLINED" else ChargeEvent.FAIL
                )
                if h is not None:
                    self._charge_resolved(h, c)
                code = outcome
        elif outcome == "CAPTURED" and c.state in (ChargeState.CAPTURED, ChargeState.REFUNDING):
            code = "CONFIRMED" if c.state == ChargeState.CAPTURED else "REFUND"
        elif outcome == "CAPTURED" and c.state == ChargeState.REFUNDED:
            self._charge_to(c, ChargeEvent.CAPTURE_AFTER_REFUND)
            self.refunds.add(c.charge_id)
            code = "REFUND"
        elif outcome == "CAPTURED" and c.state in (ChargeState.DECLINED, ChargeState.FAILED):
            # The provider captured after its own decline: money to give back, never a seat.
            c.captured = amount
            self._charge_to(c, ChargeEvent.CAPTURE_CONTRADICTS)
            self.refunds.add(c.charge_id)
            self.alerts.add(alert)
            code = "REFUND"
        elif outcome == "CAPTURED":
            code = "STALE"  # the money moved since (refunded at the provider, disputed)
        elif outcome == c.state:
            code = outcome
        else:
            self.alerts.add(alert)
            code = "CONTRADICTION"
        return self._finish(event_id, code, c, h, "")

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

    def reversal(self, event_id: str, key: str, attempt: str, kind: str, amount: int) -> Reply:
        """Money the provider moved after a capture (charge_reversal), truthful about the event
        and currency."""
        if event_id in self.callbacks:
            return (*self.callbacks[event_id][:5], "0")
        alert = f"pev/{event_id}"
        c = self.charges.get(self.attempts.get(attempt, ""))
        if c is None and key in self.charges:
            k = self.charges[key]  # its capture has not reached us: nothing is recorded
            return ("RETRY_LATER", k.charge_id, k.state, k.hold_id, "", "1")
        if c is None:
            self.alerts.add(alert)
            return self._finish(event_id, "MISMATCH", None, None, "", key)[:6]
        h = self.holds.get(c.hold_id)
        if key != c.key:
            self.alerts.add(alert)
            return self._finish(event_id, "MISMATCH", c, h, "")[:6]
        if c.state == ChargeState.CHARGING:  # reported before its capture: nothing recorded
            return ("RETRY_LATER", c.charge_id, c.state, c.hold_id, h.state if h else "", "1")
        if amount != c.captured:
            self.alerts.add(alert)  # partial or wrong amount: the whole charge moved
        wins = h is not None and h.winner == c.charge_id
        S = ChargeState
        if kind == "REFUND":
            if c.state == S.REFUNDING:
                self._charge_to(c, ChargeEvent.PROVIDER_REFUND)
                self.refunds.discard(c.charge_id)
                code = "REFUNDED"
            elif c.state == S.CAPTURED:
                self._charge_to(c, ChargeEvent.PROVIDER_REFUND)
                if h is not None and wins and h.state == HoldState.CONFIRMED:
                    revoke = self.reversal_policy == ReversalPolicy.REVOKE
                    self._after_sale(
                        h, HoldEvent.MONEY_LEFT_REVOKE if revoke else HoldEvent.MONEY_LEFT
                    )
                code = "MONEY_LEFT"
            elif c.state in (S.REFUNDED, S.PROVIDER_REFUNDED):
                code = "DUPLICATE"
            else:
                self.alerts.add(alert)
                code = "CONTRADICTION"
        elif kind == "DISPUTE_OPENED":
            if c.state == S.CAPTURED:
                self._charge_to(c, ChargeEvent.DISPUTE_OPENED)
                if h is not None and wins and h.state == HoldState.CONFIRMED:
                    self._after_sale(h, HoldEvent.DISPUTE_OPENED)
                code = "DISPUTED"
            elif c.state == S.REFUNDING:  # money we were giving back, withdrawn by the provider
                self._charge_to(c, ChargeEvent.DISPUTE_OPENED)
                self.refunds.discard(c.charge_id)
                code = "DISPUTED"
            elif c.state == S.DISPUTED:
                code = "DUPLICATE"
            else:
                self.alerts.add(alert)
                code = "CONTRADICTION"
        elif kind == "DISPUTE_WON":
            if c.state == S.DISPUTED:
                if h is not None and wins and h.state == HoldState.EXCEPTION:
                    self._charge_to(c, ChargeEvent.DISPUTE_WON)
                    self._after_sale(h, HoldEvent.DISPUTE_WON)
                    code = "REINSTATED"
                else:  # the seat was taken back meanwhile: the money goes back to the buyer
                    self._charge_to(c, ChargeEvent.DISPUTE_WON_NO_SEAT)
                    self.refunds.add(c.charge_id)
                    code = "REFUND"
            elif c.state in (S.CAPTURED, S.REFUNDING):
                code = "DUPLICATE"
            else:
                self.alerts.add(alert)
                code = "CONTRADICTION"
        else:
            assert kind == "DISPUTE_LOST", kind
            if c.state == S.DISPUTED:
                self._charge_to(c, ChargeEvent.DISPUTE_LOST)
                revoke = self.reversal_policy == ReversalPolicy.REVOKE
                if h is not None and wins and h.state == HoldState.EXCEPTION and revoke:
                    self._after_sale(h, HoldEvent.MONEY_LEFT_REVOKE)
                code = "CHARGED_BACK"
            elif c.state == S.CHARGED_BACK:
                code = "DUPLICATE"
            else:
                self.alerts.add(alert)
                code = "CONTRADICTION"
        return self._finish(event_id, code, c, h, "")[:6]

    def revoke(self, hold_id: str) -> Reply:
        """An operator takes back the seat of a hold in EXCEPTION (hold_revoke)."""
        h = self.holds.get(hold_id)
        if h is None:
            return ("NOT_FOUND",)
        if h.state != HoldState.EXCEPTION:
            return ("NOT_EXCEPTION", h.state)
        self._after_sale(h, HoldEvent.OPERATOR_REVOKE)
        return ("REVOKED",)

    def refund_result(self, charge_id: str, ok: bool) -> Reply:
        c = self.charges.get(charge_id)
        if c is None:
            return ("NOT_FOUND",)
        queued = charge_id in self.refunds
        if c.state == ChargeState.REFUNDED and ok:
            self.refunds.discard(charge_id)
            return ("ALREADY_REFUNDED",)
        if c.state != ChargeState.REFUNDING and not (c.state == ChargeState.REFUNDED and queued):
            return ("NOT_REFUNDING", c.state)
        if not ok:
            return ("RETRY_SCHEDULED",)
        self.refunds.discard(charge_id)
        self._charge_to(c, ChargeEvent.REFUND_CONFIRMED)
        return ("REFUNDED",)

    def sweep(self) -> None:
        for h in sorted(self.holds.values(), key=lambda h: h.expires):
            if h.state == HoldState.RESERVED and self.now >= h.expires:
                self.settle(h)

    def sweep_quarantine(self) -> None:
        for h in list(self.holds.values()):
            if h.state in (HoldState.QUARANTINED, HoldState.RELEASED) and h.until:
                self.settle(h)


@dataclass
class Provider:
    """The payment provider's side, played by the test: the money it holds per attempt. Money is
    captured once per attempt, at its first coherent CAPTURED message with an amount > 0 (replays
    and duplicate notifications move none); a refund (ours or its own) returns what it holds; a
    dispute opened withdraws it, a dispute won puts it back, a dispute lost keeps it gone."""

    keys: dict[str, str] = field(default_factory=dict)  # attempt -> the key its messages name
    captured: dict[str, int] = field(default_factory=dict)  # attempt -> amount captured
    net: dict[str, int] = field(default_factory=dict)  # attempt -> money it holds now
    disputed: dict[str, int] = field(default_factory=dict)  # attempt -> withdrawn, dispute open

    def told(self, attempt: str, key: str) -> None:
        self.keys.setdefault(attempt, key)

    def capture(self, attempt: str, amount: int) -> None:
        if amount > 0 and attempt not in self.captured:
            self.captured[attempt] = amount
            self.net[attempt] = amount

    def can(self, attempt: str, kind: str) -> bool:
        """Whether the provider can make this movement now (else it only notifies again)."""
        if kind in ("REFUND", "DISPUTE_OPENED"):
            return self.net.get(attempt, 0) > 0
        return attempt in self.disputed

    def move(self, attempt: str, kind: str) -> None:
        if not self.can(attempt, kind):
            return
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
        return {a: n for a, n in self.net.items() if n}
