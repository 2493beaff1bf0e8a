"""The invariants of docs/invariants.md, checked over one consistent snapshot of an event: one
small function per invariant, each returning typed violations (so tools count them by kind
instead of matching message strings). `Store.audit` takes the snapshot (one MULTI/EXEC)."""

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from engine.model.holds import Charge, Hold
from engine.model.states import CHARGE_TERMINAL, HOLD_DECIDED, ChargeState, HoldState
from engine.model.stock_lines import lines_of, stock_problems, stock_table


class Invariant(StrEnum):
    TIMERS_INDEXED = "timers_indexed"  # every timed state is in its index, or nothing ends it
    COUNTERS_AGREE = "counters_agree"  # the scripts' counters match the structures
    SEAT_MAP = "seat_map"  # every seat is free or owned, never both
    NEVER_OVERSELL = "never_oversell"  # 1: a seat is sold to at most one hold
    OWNERS_AGREE = "owners_agree"  # a seat's owner and its hold agree on the seat's state
    SEAT_HAS_MONEY = "seat_has_money"  # 3, 9: a sold seat's hold names a winner in the right state
    MONEY_HAS_SEAT = "money_has_seat"  # 2, 4: captured money wins a confirmed hold
    ONE_TERMINAL_RECORD = "one_terminal_record"  # 6
    ENDED_INDEXED = "ended_indexed"  # the trim index lists exactly the holds that may be trimmed
    LOGINS_NAME_HOLDS = "logins_name_holds"  # a login's current checkout is a hold that exists
    BOUGHT_COUNTED = "bought_counted"  # the per-login cap counts exactly the login's sales
    STOCK_AGREES = "stock_agrees"  # per sku and location: on hand adds up, holds own the units


@dataclass(frozen=True, slots=True)
class Violation:
    invariant: Invariant
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant}: {self.detail}"


@dataclass(frozen=True)
class Snapshot:
    event_id: str
    event: dict[str, str]
    seats: list[str]
    free: list[str]
    owners: dict[str, str]  # seat -> "H|B|S:<hold id>"
    holds: list[Hold]
    charges: list[Charge]
    outbox: list[dict[str, str]]
    # deadlines, quarantines, refunds, watch
    timers: tuple[set[str], set[str], set[str], set[str]] | None = None
    ended: set[str] | None = None  # the trim index (ADR 0018)
    logins: dict[str, str] | None = None  # login -> its current hold
    bought: dict[str, int] | None = None  # login -> seats bought (the cap's count, ADR 0019)
    stock: dict[str, str] | None = None  # the stock hash of a stock event (ADR 0022)
    # The event's score in the due index, and its earliest deadline or quarantine end (None:
    # not in the index / none); the sweeper's look (engine/workers/sweeper.py).
    due: tuple[float | None, float | None] | None = None
    # By index kind (trims, refunds, watches): its score there, and the first score of the
    # event's own zset that index follows (ended, refunds, watch); the workers' looks.
    indexed: dict[str, tuple[float | None, float | None]] | None = None

    @property
    def by_hold(self) -> dict[str, Hold]:
        return {h.hold_id: h for h in self.holds}

    @property
    def by_charge(self) -> dict[str, Charge]:
        return {c.charge_id: c for c in self.charges}


@dataclass(frozen=True, slots=True)
class AuditReport:
    event_id: str
    counts: dict[str, int]
    violations: list[Violation] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def of(self, *kinds: Invariant) -> list[Violation]:
        return [v for v in self.violations if v.invariant in kinds]


# Owner kind a seat must have, by the state of the hold that owns it.
SEAT_KIND = {
    HoldState.RESERVED: "H",
    HoldState.QUARANTINED: "B",
    HoldState.CONFIRMED: "S",
    HoldState.EXCEPTION: "S",  # money left after the sale; the seat stays assigned for ops
}
_MONEY_LEFT = frozenset(
    {ChargeState.PROVIDER_REFUNDED, ChargeState.DISPUTED, ChargeState.CHARGED_BACK}
)
# The states a hold's winner may be in, by hold state.
WINNER_STATES: dict[HoldState, frozenset[ChargeState]] = {
    HoldState.CONFIRMED: frozenset({ChargeState.CAPTURED}),
    HoldState.EXCEPTION: _MONEY_LEFT,
    HoldState.REVOKED: _MONEY_LEFT | {ChargeState.REFUNDING, ChargeState.REFUNDED},
}

Check = Callable[[Snapshot], Iterator[Violation]]


def timers_indexed(s: Snapshot) -> Iterator[Violation]:
    if s.timers is None:
        return
    deadlines, quarantines, refunds, watch = s.timers
    want_deadlines = {h.hold_id for h in s.holds if h.state == HoldState.RESERVED}
    want_quarantines = {
        h.hold_id
        for h in s.holds
        if h.state == HoldState.QUARANTINED or (h.state == HoldState.RELEASED and h.blocking_charge)
    }
    v = Invariant.TIMERS_INDEXED
    if deadlines != want_deadlines:
        yield Violation(v, f"deadline index differs: {sorted(deadlines ^ want_deadlines)[:5]}")
    if quarantines != want_quarantines:
        diff = sorted(quarantines ^ want_quarantines)[:5]
        yield Violation(v, f"quarantine index differs: {diff}")
    refunding = {
        c.charge_id for c in s.charges if c.state == ChargeState.REFUNDING and not c.parked
    }
    refundable = refunding | {c.charge_id for c in s.charges if c.state == ChargeState.REFUNDED}
    if not refunding <= refunds <= refundable:
        yield Violation(
            v,
            f"refund queue differs: missing {sorted(refunding - refunds)[:5]}, "
            f"stray {sorted(refunds - refundable)[:5]}",
        )
    # A CHARGING charge outside the watch index would never be asked about again.
    charging = {c.charge_id for c in s.charges if c.state == ChargeState.CHARGING}
    declined = {
        c.charge_id for c in s.charges if c.state in (ChargeState.DECLINED, ChargeState.FAILED)
    }
    if not charging <= watch <= charging | declined:
        yield Violation(
            v,
            f"watch index differs: missing {sorted(charging - watch)[:5]}, "
            f"stray {sorted(watch - charging - declined)[:5]}",
        )


def indexes_across_events(s: Snapshot) -> Iterator[Violation]:
    """The event's scores in the indexes across events (engine/model/keys.py) are never later
    than its work: else only the workers' periodic look at every event would find it."""
    v = Invariant.TIMERS_INDEXED
    # A deadline later than the event's score in the due index would be swept only by the
    # periodic look at every event; the score mirrors the event's `due_at`.
    if s.due is not None:
        score, earliest = s.due
        if earliest is not None and (score is None or score > earliest):
            yield Violation(v, f"due index says {score}, earliest due is {earliest}")
        mirror = float(s.event.get("due_at") or 0) or None
        if mirror != score:
            yield Violation(v, f"due_at {mirror} differs from the due index's {score}")
    # Work earlier than the event's score in an index would be found only by the workers'
    # periodic look at every event (an ended hold to trim, a refund due, a charge to ask about).
    for kind, (score, first) in (s.indexed or {}).items():
        if first is not None and (score is None or score > first):
            yield Violation(v, f"{kind} index says {score}, its first work is at {first}")


def trimmable(h: Hold) -> bool:
    """Ended without ever having had a charge: what lua/hold_trim.lua may drop once the ledger
    holds its decision (ADR 0018). Anything money touched stays."""
    ended = h.state in (HoldState.RELEASED, HoldState.EXPIRED)
    return ended and not h.charge_ids and not h.blocking_charge


def ended_indexed(s: Snapshot) -> Iterator[Violation]:
    """A trimmable hold outside the index would stay for ever; a hold in it that money touched
    would be trimmed while a late callback may still need it."""
    if s.ended is None:
        return
    want = {h.hold_id for h in s.holds if trimmable(h)}
    if s.ended != want:
        yield Violation(
            Invariant.ENDED_INDEXED,
            f"ended index differs: missing {sorted(want - s.ended)[:5]}, "
            f"stray {sorted(s.ended - want)[:5]}",
        )


def logins_name_holds(s: Snapshot) -> Iterator[Violation]:
    """The next claim of a login reads the hold its entry names: it must exist (a trimmed hold
    takes its entry with it) and be that login's."""
    if s.logins is None:
        return
    by_hold = s.by_hold
    for login, hold_id in s.logins.items():
        h = by_hold.get(hold_id)
        if h is None or h.login != login:
            what = "unknown hold" if h is None else f"hold of {h.login!r}"
            yield Violation(Invariant.LOGINS_NAME_HOLDS, f"login {login!r} names {what} {hold_id}")


def bought_counted(s: Snapshot) -> Iterator[Violation]:
    """The per-login cap counts a login's sales: its CONFIRMED holds and those in EXCEPTION
    (sold, money in question), not the REVOKED ones."""
    if s.bought is None:
        return
    sold: Counter[str] = Counter()
    for h in s.holds:
        if h.state in (HoldState.CONFIRMED, HoldState.EXCEPTION):
            sold[h.login] += units(h)
    for login in sorted(set(sold) | {k for k, n in s.bought.items() if n}):
        if sold[login] != s.bought.get(login, 0):
            detail = f"login {login!r} counted {s.bought.get(login, 0)}, sold {sold[login]}"
            yield Violation(Invariant.BOUGHT_COUNTED, detail)


def units(h: Hold) -> int:
    """Seats of a hold, or units of a stock hold's lines."""
    return sum(line.quantity for line in lines_of(h.listing)) if h.is_stock else len(h.seat_ids)


def unit_kind(h: Hold) -> str | None:
    """Where a hold's units must be: H held, B blocked, S sold, None given back."""
    return SEAT_KIND.get(h.state, "B" if h.blocking_charge else None)


def _stock_counts(s: Snapshot) -> dict[str, int]:
    table = stock_table(s.stock or {})
    total = Counter(
        {n: sum(c.get(n, 0) for e in table.values() for c in e["locations"].values()) for n in
         ("on_hand", "available", "held", "blocked", "sold")}
    )  # fmt: skip
    return {"seats": total["on_hand"], "free": total["available"], "held": total["held"],
            "blocked": total["blocked"], "sold": total["sold"]}  # fmt: skip


def counts_of(s: Snapshot) -> dict[str, int]:
    kinds = Counter(v[0] for v in s.owners.values())
    stock = _stock_counts(s) if s.stock else {}
    return {
        "seats": len(s.seats),
        "free": len(s.free),
        "held": kinds["H"],
        "blocked": kinds["B"],
        "sold": kinds["S"],
        **stock,
        "holds": len(s.holds),
        "charges": len(s.charges),
        "captured_winners": sum(c.state == ChargeState.CAPTURED for c in s.charges),
        # Seats of CONFIRMED holds (a party counts each of its seats)
        "seats_confirmed": sum(units(h) for h in s.holds if h.state == HoldState.CONFIRMED),
        "refunding": sum(c.state == ChargeState.REFUNDING for c in s.charges),
        "refunded": sum(c.state == ChargeState.REFUNDED for c in s.charges),
    }


def counters_agree(s: Snapshot) -> Iterator[Violation]:
    counts = counts_of(s)
    for name in ("free", "held", "blocked", "sold"):
        if int(s.event.get(name, -1)) != counts[name]:
            detail = f"counter {name}={s.event.get(name)} but structures say {counts[name]}"
            yield Violation(Invariant.COUNTERS_AGREE, detail)
    if int(s.event.get("seats_total", -1)) != counts["seats"]:
        yield Violation(Invariant.COUNTERS_AGREE, "seats_total differs from the seat set")


def stock_agrees(s: Snapshot) -> Iterator[Violation]:
    """Per sku and location: available + held + blocked + sold = on hand, none below zero,
    and the held, blocked and sold counters are exactly what the stock holds own."""
    if not s.stock:
        return
    table = stock_table(s.stock)
    for problem in stock_problems(table):
        yield Violation(Invariant.STOCK_AGREES, problem)
    owned: Counter[tuple[str, str, str]] = Counter()
    for h in s.holds:
        kind = unit_kind(h) if h.is_stock else None
        for line in lines_of(h.listing) if kind else ():
            owned[(line.sku, line.location, OWNER_COUNTER[kind or ""])] += line.quantity
    for sku, entry in table.items():
        for location, c in entry["locations"].items():
            for counter in ("held", "blocked", "sold"):
                if c.get(counter, 0) != owned[(sku, location, counter)]:
                    detail = f"{sku}@{location} {counter}={c.get(counter)}, holds own "
                    yield Violation(
                        Invariant.STOCK_AGREES, detail + str(owned[(sku, location, counter)])
                    )


OWNER_COUNTER = {"H": "held", "B": "blocked", "S": "sold"}


def seat_map(s: Snapshot) -> Iterator[Violation]:
    both = set(s.free) & set(s.owners)
    if both:
        yield Violation(Invariant.SEAT_MAP, f"seats both free and owned: {sorted(both)[:5]}")
    if set(s.free) | set(s.owners) != set(s.seats):
        yield Violation(Invariant.SEAT_MAP, "some seat is neither free nor owned")


def never_oversell(s: Snapshot) -> Iterator[Violation]:
    sold = Counter(seat for h in _seated(s) if SEAT_KIND.get(h.state) == "S" for seat in h.seat_ids)
    for seat, n in sold.items():
        if n > 1:
            yield Violation(Invariant.NEVER_OVERSELL, f"seat {seat} sold to {n} holds")


def owners_agree(s: Snapshot) -> Iterator[Violation]:
    by_hold = s.by_hold
    v = Invariant.OWNERS_AGREE
    for seat, owner in s.owners.items():
        kind, hold_id = owner[0], owner[2:]
        h = by_hold.get(hold_id)
        if h is None or seat not in h.seat_ids:
            yield Violation(v, f"seat {seat} owned by unknown hold {hold_id}")
        elif kind != SEAT_KIND.get(h.state, "B" if h.blocking_charge else None):
            yield Violation(v, f"seat {seat} is {kind} but hold {hold_id} is {h.state}")
    for h in _seated(s):
        should = h.state in SEAT_KIND or bool(h.blocking_charge)
        for seat in h.seat_ids:
            holds_seat = s.owners.get(seat, "")[2:] == h.hold_id
            if should and not holds_seat:
                yield Violation(v, f"hold {h.hold_id} ({h.state}) does not own seat {seat}")
            elif holds_seat and not should:
                yield Violation(v, f"{h.state} hold {h.hold_id} still owns seat {seat}")


def _seated(s: Snapshot) -> list[Hold]:
    return [h for h in s.holds if not h.is_stock]


def seat_has_money(s: Snapshot) -> Iterator[Violation]:
    by_charge = s.by_charge
    for h in s.holds:
        if h.state not in WINNER_STATES:
            continue
        w = by_charge.get(h.winner)
        if w is None or w.state not in WINNER_STATES[h.state] or w.hold_id != h.hold_id:
            what = "captured winner" if h.state == HoldState.CONFIRMED else "fitting winner"
            detail = f"{h.state} hold {h.hold_id} without {what} ({h.winner!r})"
            yield Violation(Invariant.SEAT_HAS_MONEY, detail)


def money_has_seat(s: Snapshot) -> Iterator[Violation]:
    by_hold = s.by_hold
    for c in s.charges:
        if c.state != ChargeState.CAPTURED:
            continue
        h = by_hold.get(c.hold_id)
        if h is None or h.state != HoldState.CONFIRMED or h.winner != c.charge_id:
            detail = f"captured charge {c.charge_id} is not the winner of its hold"
            yield Violation(Invariant.MONEY_HAS_SEAT, detail)


def one_terminal_record(s: Snapshot) -> Iterator[Violation]:
    """Exactly one terminal record per decided hold and charge, none for live ones; entities
    restored from the ledger after a Redis loss (made before the restore: every one that
    existed then was restored) have theirs in the ledger, not here, even once a later
    decision (a capture after its decline, an after-sale move) has changed their reason."""
    v = Invariant.ONE_TERMINAL_RECORD
    restored_at = int(s.event.get("restored_at_ms", 0))
    records = Counter((r["kind"], r["id"]) for r in s.outbox if r.get("terminal") == "1")
    for (kind, ident), n in records.items():
        if n != 1:
            yield Violation(v, f"{kind} {ident} has {n} terminal records")
    for h in s.holds:
        n = records.get(("hold", h.hold_id), 0)
        restored = h.created_ms <= restored_at and n == 0
        if not restored and (h.state in HOLD_DECIDED) != (n == 1):
            yield Violation(v, f"hold {h.hold_id} is {h.state} with {n} terminal records")
    for c in s.charges:
        n = records.get(("charge", c.charge_id), 0)
        if c.created_ms <= restored_at and n == 0:
            continue
        if c.final != (n == 1) or (c.state in CHARGE_TERMINAL and not c.final):
            yield Violation(v, f"charge {c.charge_id} is {c.state} with {n} terminal records")


CHECKS: tuple[Check, ...] = (
    timers_indexed,
    indexes_across_events,
    counters_agree,
    seat_map,
    never_oversell,
    owners_agree,
    seat_has_money,
    money_has_seat,
    one_terminal_record,
    ended_indexed,
    logins_name_holds,
    bought_counted,
    stock_agrees,
)


def audit(s: Snapshot) -> AuditReport:
    return AuditReport(s.event_id, counts_of(s), [v for check in CHECKS for v in check(s)])
