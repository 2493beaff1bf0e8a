"""The model's seats, holds and sessions (the provider's messages are tests/property/model.py).

Written from the transition tables in engine/model/states.py (every hold and charge state change
goes through hold_transition / charge_transition, so an illegal move raises), docs/spec.md and the
decision records, not from the Lua source: a hold owns a party of seats, claimed whole or not at
all, moved together by every transition (ADR 0021); "n best" is the best block of consecutive
ranks in one section, else the n best free seats by rank; one live checkout per login (two tabs:
a new claim replaces the previous live hold when no charge of it is in flight); a login holds
and buys at most `cap` seats (ADR 0019: bought + the new hold's seats). Time is an explicit
integer clock."""

from dataclasses import dataclass, field

from engine.model.states import (
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
PRICE = 100  # minor units per seat: a party's charge asks for PRICE x its seats
STATUS_OF = {"CAPTURED": "captured", "DECLINED": "declined", "FAILED": "failed"}
OWNER_COUNTERS = {"H": "held", "B": "blocked", "S": "sold"}


def seat_list(seats: tuple[str, ...] | list[str]) -> str:
    """The seats of a hold as compared with the engine's: which seats, not in which order."""
    return ",".join(sorted(seats))


@dataclass
class MHold:
    hold_id: str
    login: str
    seats: tuple[str, ...]
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
    disputed: bool = False  # a dispute was ever opened on it
    # Movements noted before their predecessor (on the key's charge): (attempt, kind, event id).
    early: list[tuple[str, str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.key = self.key or self.charge_id


@dataclass
class Seats:
    ranks: dict[str, float]
    sections: dict[str, str]
    ttl: int
    quarantine: int
    policy: LatePolicy
    now: int
    reversal_policy: ReversalPolicy = ReversalPolicy.MANUAL
    cap: int = 0  # seats a login may hold and buy (0: no cap)
    free: set[str] = field(default_factory=set)
    owners: dict[str, tuple[str, str]] = field(default_factory=dict)  # seat -> (H|B|S, hold)
    holds: dict[str, MHold] = field(default_factory=dict)
    charges: dict[str, MCharge] = field(default_factory=dict)
    logins: dict[str, str] = field(default_factory=dict)
    bought: dict[str, int] = field(default_factory=dict)  # login -> seats of its sales
    attempts: dict[str, str] = field(default_factory=dict)
    callbacks: dict[str, Reply] = field(default_factory=dict)
    refunds: set[str] = field(default_factory=set)
    terminal_records: list[tuple[str, str]] = field(default_factory=list)
    alerts: set[str] = field(default_factory=set)  # alert ids (provider messages for ops)

    def __post_init__(self) -> None:
        self.free = set(self.ranks)

    # -- seats and helpers ----------------------------------------------------------------

    def _seat(self, h: MHold, kind: str | None) -> None:
        """Every seat of the hold's party moves together."""
        for seat in h.seats:
            assert self.owners[seat][1] == h.hold_id
            if kind is None:
                del self.owners[seat]
                self.free.add(seat)
            else:
                self.owners[seat] = (kind, h.hold_id)

    def _hold_to(self, h: MHold, event: HoldEvent) -> None:
        """The first decision of a hold is its one terminal record; the moves after the sale
        (money left, a dispute won, a revoke) are not. A sale counts its seats as bought by the
        login, a revoke gives them back."""
        decided = h.state in HOLD_DECIDED
        h.state = hold_transition(h.state, event)
        if h.state == HoldState.CONFIRMED and not decided:
            self.bought[h.login] = self.bought.get(h.login, 0) + len(h.seats)
        if h.state == HoldState.REVOKED:
            self.bought[h.login] -= len(h.seats)
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

    # -- claims (same replies as lua/hold_claim.lua) -----------------------------------------

    def claim(
        self, hold_id: str, login: str, seats: tuple[str, ...] = (), quantity: int = 1
    ) -> Reply:
        """Those `seats` (all or nothing), or else the `quantity` best. OK names the seats and
        the login's previous hold this claim replaced ("" if none)."""
        if hold_id in self.holds:
            h = self.holds[hold_id]
            if h.login != login:
                return ("IDEMPOTENCY_KEY_REUSED",)
            self.settle(h)
            return ("REPLAY", h.state, seat_list(h.seats))
        prev = self.holds.get(self.logins.get(login, ""))
        if prev is not None:
            self.settle(prev)
            if prev.state == HoldState.QUARANTINED or (
                prev.state == HoldState.RESERVED and prev.charge
            ):
                return ("CHARGE_IN_FLIGHT",)
            if prev.state != HoldState.RESERVED:
                prev = None
        n = len(seats) or quantity
        if self.cap and self.bought.get(login, 0) + n > self.cap:
            return ("LIMIT_EXCEEDED",)
        mine = set(prev.seats) if prev is not None else set()
        refused = self._refuse_seats(seats, mine) if seats else self._refuse_best(n, mine)
        if refused:
            return refused
        if prev is not None:  # given up in the same step, only now the claim succeeds
            self._seat(prev, None)
            self._hold_to(prev, HoldEvent.RELEASE)
        taken = seats or self.best(n)
        for seat in taken:
            self.free.remove(seat)
            self.owners[seat] = ("H", hold_id)
        self.holds[hold_id] = MHold(hold_id, login, taken, self.now + self.ttl)
        self.logins[login] = hold_id
        return ("OK", seat_list(taken), prev.hold_id if prev is not None else "")

    def _refuse_seats(self, seats: tuple[str, ...], mine: set[str]) -> Reply:
        """One unknown or taken seat refuses the whole claim (the previous hold's own seats
        are available to its login's new claim)."""
        if any(s not in self.ranks for s in seats):
            return ("UNKNOWN_SEAT",)
        if any(s not in self.free and s not in mine for s in seats):
            return ("SEAT_TAKEN",)
        return ()

    def _refuse_best(self, n: int, mine: set[str]) -> Reply:
        """No free seat, or fewer than the party (counting the seats the login gives up): the
        login keeps the hold it has and nothing is written. The engine may name the second
        case `not_enough_seats`; the machine accepts either code for it."""
        if not self.free or len(self.free) + len(mine) < n:
            return ("SOLD_OUT",)
        return ()

    def adjacent(self, a: str, b: str) -> bool:
        return self.ranks[b] == self.ranks[a] + 1 and self.sections[a] == self.sections[b]

    def best(self, n: int) -> tuple[str, ...]:
        """The best block of n adjacent free seats (the one whose first seat ranks best), else
        the n best free seats by rank."""
        by_rank = sorted(self.free, key=lambda s: (self.ranks[s], s))
        block: list[str] = []
        for seat in by_rank:
            if block and not self.adjacent(block[-1], seat):
                block = []
            block.append(seat)
            if len(block) == n:
                return tuple(block)
        return tuple(by_rank[:n])

    # -- sessions and charges ---------------------------------------------------------------

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

    def start_charge(self, hold_id: str, login: str, charge_id: str, amount: int) -> Reply:
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
        self.charges[charge_id] = MCharge(charge_id, hold_id, amount=amount)
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

    def revoke(self, hold_id: str) -> Reply:
        """An operator takes back the seats of a hold in EXCEPTION (hold_revoke)."""
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

    # -- what the machine compares ----------------------------------------------------------

    def counters(self) -> dict[str, int]:
        """Seats FREE, HELD, BLOCKED and SOLD: the event's counters."""
        counts = {"free": len(self.free), "held": 0, "blocked": 0, "sold": 0}
        for kind, _hold in self.owners.values():
            counts[OWNER_COUNTERS[kind]] += 1
        return counts

    def sellable(self, h: MHold) -> bool:
        """The hold may still be sold to its login: live, or quarantined and not given up."""
        return h.state == HoldState.RESERVED or (
            h.state == HoldState.QUARANTINED and not h.given_up
        )
