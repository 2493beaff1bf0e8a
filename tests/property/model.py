"""A plain-Python model of one event: the reference the Lua scripts are checked against.

It is written from the transition tables in engine/states.py (every hold and charge state change
goes through hold_transition / charge_transition, so an illegal move raises) and from SPEC's
rules, not from the Lua source. Time is an explicit integer clock."""

from dataclasses import dataclass, field

from engine.states import (
    ChargeEvent,
    ChargeState,
    HoldEvent,
    HoldState,
    LatePolicy,
    charge_transition,
    hold_transition,
)

Reply = tuple[str, ...]


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


@dataclass
class Model:
    ranks: dict[str, int]
    ttl: int
    quarantine: int
    policy: LatePolicy
    now: int
    free: set[str] = field(default_factory=set)
    owners: dict[str, tuple[str, str]] = field(default_factory=dict)  # seat -> (H|B|S, hold)
    holds: dict[str, MHold] = field(default_factory=dict)
    charges: dict[str, MCharge] = field(default_factory=dict)
    logins: dict[str, str] = field(default_factory=dict)
    attempts: dict[str, str] = field(default_factory=dict)
    callbacks: dict[str, Reply] = field(default_factory=dict)
    refunds: set[str] = field(default_factory=set)
    terminal_records: list[tuple[str, str]] = field(default_factory=list)

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
        h.state = hold_transition(h.state, event)
        if h.state in (HoldState.CONFIRMED, HoldState.EXPIRED, HoldState.RELEASED):
            self.terminal_records.append(("hold", h.hold_id))
            if self.logins.get(h.login) == h.hold_id:
                del self.logins[h.login]

    def _charge_to(self, c: MCharge, event: ChargeEvent) -> None:
        c.state = charge_transition(c.state, event)
        if event in (
            ChargeEvent.CAPTURE_WINS,
            ChargeEvent.DECLINE,
            ChargeEvent.FAIL,
            ChargeEvent.REFUND_CONFIRMED,
        ):
            self.terminal_records.append(("charge", c.charge_id))

    def _refund_only(self, charge_id: str) -> None:
        if charge_id:
            self.charges[charge_id].refund_only = True

    def settle(self, h: MHold) -> None:
        """SPEC's deadline rule: live while now < expires."""
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

    def outcome(self, event_id: str, charge_id: str, attempt: str, outcome: str) -> Reply:
        if event_id in self.callbacks:
            return (*self.callbacks[event_id][:-1], "0")
        if attempt in self.attempts:
            c = self.charges[self.attempts[attempt]]
        else:
            parent = self.charges.get(charge_id)
            if parent is not None and not parent.attempt:
                c = parent
            elif parent is not None:
                c = MCharge(f"{parent.charge_id}/{attempt}", parent.hold_id)
                c.refund_only = parent.refund_only
                self.charges[c.charge_id] = c
            else:
                c = MCharge(charge_id, "", refund_only=True)
                self.charges[c.charge_id] = c
            c.attempt = attempt
            self.attempts[attempt] = c.charge_id
        h = self.holds.get(c.hold_id)
        if h is not None:
            self.settle(h)
        if c.state == ChargeState.CHARGING:
            if outcome == "CAPTURED":
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
        elif outcome == c.state:
            code = outcome
        else:
            code = "CONTRADICTION"
        reply = (code, c.charge_id, c.state, c.hold_id, h.state if h else "", "1")
        self.callbacks[event_id] = reply
        return reply

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
