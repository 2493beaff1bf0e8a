"""Read-only views of what the scripts store: holds, charges, seats, an event's counters."""

from dataclasses import dataclass, field
from typing import Any

import orjson

from engine.model.event_config import EventConfig
from engine.model.event_details import EventDetails
from engine.model.states import ChargeState, HoldState
from engine.model.stock_lines import is_stock_listing


@dataclass(frozen=True, slots=True)
class SeatSpec:
    seat_id: str
    rank: float
    section: str = ""
    price_minor: int | None = None  # its level's price (None: the event's), engine/store/prices.py


@dataclass(frozen=True, slots=True)
class Hold:
    hold_id: str
    login: str
    # What it holds, as its claim listed it: one seat id, a party's seat ids comma-separated,
    # or a cart's stock lines ('<sku>@<location>*<qty>', comma-separated).
    listing: str
    state: HoldState
    created_ms: int
    expires_ms: int
    charge_in_flight: str  # the CHARGING charge the hold waits for, or ""
    blocking_charge: str  # RELEASED hold: the charge that keeps its seat BLOCKED, or ""
    winner: str  # the captured charge that confirmed the hold, or ""
    until_ms: int  # QUARANTINED / blocked seat: the quarantine hard timeout
    decided_ms: int
    reason: str
    charge_ids: tuple[str, ...]
    given_up: bool = False  # QUARANTINED and released by its owner: no capture may confirm it
    # The outbox id of the sale's last record: the sale is durable once the ledger holds it
    # ("" for a sale restored from the ledger, durable by construction).
    record: str = ""
    amount: int = 0  # a stock hold: what its lines cost (minor units), fixed at the claim

    @classmethod
    def from_json(cls, raw: str | bytes) -> "Hold":
        d: dict[str, Any] = orjson.loads(raw)
        return cls(
            hold_id=d["id"],
            login=d["login"],
            listing=d["seat"],
            state=HoldState(d["state"]),
            created_ms=int(d["created_ms"]),
            expires_ms=int(d["expires_ms"]),
            # A fresh claim stores none of these until they are set (lua/_lib.lua HOLD_EMPTY).
            charge_in_flight=d.get("charge", ""),
            blocking_charge=d.get("blocking", ""),
            winner=d.get("winner", ""),
            until_ms=int(d.get("until_ms", 0)),
            decided_ms=int(d.get("decided_ms", 0)),
            reason=d.get("reason", ""),
            charge_ids=tuple(c for c in d.get("charges", "").split(",") if c),
            given_up=bool(d.get("given_up")),
            record=str(d.get("record", "")),
            amount=int(d.get("amount") or 0),
        )

    @property
    def seat_ids(self) -> tuple[str, ...]:
        return tuple(s for s in self.listing.split(",") if s)

    @property
    def is_stock(self) -> bool:
        """Its `listing` lists stock lines ('<sku>@<location>*<qty>'), not seats."""
        return is_stock_listing(self.listing)


_TERMINAL_CHARGE = {"CAPTURED", "DECLINED", "FAILED", "REFUNDED"}


@dataclass(frozen=True, slots=True)
class Charge:
    charge_id: str
    hold_id: str
    seat_id: str
    login: str
    state: ChargeState
    attempt_id: str
    intent_id: str
    refund_only: bool  # the "resolve by refund" mark: if ever captured, it is refunded
    amount: int  # minor units
    created_ms: int
    decided_ms: int
    refund_attempts: int
    reason: str
    key: str = ""  # the provider idempotency key (the root charge's id; an orphan's claimed key)
    captured: int = 0  # minor units the provider reported captured (0 before a capture)
    parked: bool = False  # its refund was stopped: the provider's records disown it
    orphan: bool = False  # money we could not tie to a charge; refunded after the provider agrees
    final: bool = False  # its one terminal record exists (later provider moves add others)
    refunding_ms: int = 0  # when it last went REFUNDING (kept once REFUNDED), 0 if never
    # Parts of an order given back (ADR 0043): a part names the charge it returns money of;
    # that charge counts what its parts gave back, and what the provider gave back on its own.
    part_of: str = ""
    parted: int = 0
    moved: int = 0  # PROVIDER_REFUNDED by less than it held: that amount (0: all of it)

    @classmethod
    def from_json(cls, raw: str | bytes) -> "Charge":
        d: dict[str, Any] = orjson.loads(raw)
        return cls(
            charge_id=d["id"],
            hold_id=d["hold"],
            seat_id=d["seat"],
            login=d["login"],
            state=ChargeState(d["state"]),
            attempt_id=d["attempt"],
            intent_id=d["intent"],
            refund_only=bool(d["refund_only"]),
            amount=int(d["amount"]),
            created_ms=int(d["created_ms"]),
            decided_ms=int(d["decided_ms"]),
            refund_attempts=int(d["refund_attempts"]),
            reason=d["reason"],
            key=d.get("key") or d["id"],
            captured=int(d.get("captured") or 0),
            parked=bool(d.get("parked")),
            orphan=d["id"].startswith("orphan/"),
            final=bool(d["final"]) if "final" in d else d["state"] in _TERMINAL_CHARGE,
            refunding_ms=int(d.get("refunding_ms") or 0),
            part_of=str(d.get("part_of") or ""),
            parted=int(d.get("parted") or 0),
            moved=int(d.get("moved") or 0),
        )

    @property
    def holds_money(self) -> int:
        """Minor units the provider holds for us on this charge (docs/invariants.md): what it
        captured, less what its parts give back (those are charges of their own)."""
        if self.state == ChargeState.CAPTURED:
            return (self.captured or self.amount) - self.parted
        if self.state == ChargeState.REFUNDING:
            return self.captured - self.parted
        if self.state == ChargeState.PROVIDER_REFUNDED and self.moved:
            return max(0, (self.captured or self.amount) - self.parted - self.moved)
        return 0


@dataclass(frozen=True, slots=True)
class Availability:
    event_id: str
    status: str
    opens_at_ms: int
    config: EventConfig  # the terms it sells under
    seats_total: int
    free: int
    held: int
    blocked: int
    sold: int
    price_minor: int
    kind: str = "seats"  # what the event sells: seats, or quantity stock (ADR 0022)
    details: EventDetails = field(default_factory=EventDetails)  # its name, venue, ... (ADR 0041)


@dataclass(frozen=True, slots=True)
class Claimed:
    hold_id: str
    listing: str  # what it holds, as Hold.listing says
    expires_ms: int
    replay: bool
    state: HoldState
    replaced: str = ""  # the login's previous hold, released by this claim (two tabs)
    amount: int = 0  # a cart's (stock lines, fixed at the claim); 0 for seats

    @property
    def is_stock(self) -> bool:
        return is_stock_listing(self.listing)

    @classmethod
    def of_reply(cls, reply: list[Any]) -> "Claimed":
        """From hold_claim's OK (hold, seats, expires, replaced, amount) or REPLAY (hold,
        seats, expires, state, amount) reply."""
        if reply[0] == "OK":
            return cls(reply[1], reply[2], int(reply[3]), False, HoldState.RESERVED, reply[4],
                       int(reply[5]))  # fmt: skip
        return cls(reply[1], reply[2], int(reply[3]), True, HoldState(reply[4]),
                   amount=int(reply[5]))  # fmt: skip

    @property
    def seat_ids(self) -> tuple[str, ...]:
        return tuple(s for s in self.listing.split(",") if s)


@dataclass(frozen=True, slots=True)
class LoginLimits:
    """Per login and event, enforced by the claim and charge-start scripts; 0 is no limit."""

    claims_per_s: int = 0
    claims_burst: int = 0
    charges_per_s: int = 0
    charges_burst: int = 0
    cap: int = 0  # seats a login may hold and buy

    def __post_init__(self) -> None:
        assert self.claims_per_s == 0 or self.claims_burst >= 1, "a claim limit needs a burst"
        assert self.charges_per_s == 0 or self.charges_burst >= 1, "a charge limit needs a burst"


@dataclass(frozen=True, slots=True)
class ChargeStarted:
    charge_id: str
    expires_ms: int
    replay: bool
    state: ChargeState


@dataclass(frozen=True, slots=True)
class ProviderOutcome:
    """One provider message about an attempt, authenticated by the caller but not yet believed:
    the deciding script checks every field against the charge we created (charge_outcome_v2)."""

    provider_event_id: str
    charge_id: str  # the provider idempotency key the message names (our charge id)
    attempt_id: str  # unique per authorization attempt
    intent_id: str  # join key only
    outcome: str  # CAPTURED | DECLINED | FAILED: what the message type says
    status: str = ""  # what its status field says; "" = the same as the type
    amount: int | None = None  # None: not an integer (a mismatch, never coerced)
    currency: str = "EUR"
    meta_event: str = ""  # metadata the provider echoes; "" = the event it is applied to
    meta_hold: str = ""
    meta_charge: str = ""


@dataclass(frozen=True, slots=True)
class ProviderReversal:
    """Money the provider moved after a capture: a refund (ours or its own) or a dispute."""

    provider_event_id: str
    charge_id: str  # the provider idempotency key
    attempt_id: str
    kind: str  # REFUND | DISPUTE_OPENED | DISPUTE_WON | DISPUTE_LOST
    amount: int | None
    currency: str
    meta_event: str


@dataclass(frozen=True, slots=True)
class Alert:
    """A provider message the engine refused to act on (or acted on only partly), for ops."""

    alert_id: str
    reason: str
    at_ms: int
    charge_id: str
    hold_id: str
    detail: dict[str, Any]

    @classmethod
    def from_json(cls, raw: str | bytes) -> "Alert":
        d: dict[str, Any] = orjson.loads(raw)
        return cls(
            alert_id=d.pop("id"),
            reason=d.pop("reason"),
            at_ms=int(d.pop("at_ms")),
            charge_id=d.pop("charge", ""),
            hold_id=d.pop("hold", ""),
            detail=d,
        )


@dataclass(frozen=True, slots=True)
class OutcomeResult:
    decision: str  # an OutcomeCode (or ReversalCode) value
    charge_id: str
    charge_state: ChargeState | None  # None: the message named no charge of ours
    hold_id: str
    hold_state: HoldState | None
    first_seen: bool  # False: this provider event id was processed before; nothing changed
    problems: str = ""  # what did not match, comma-separated (MISMATCH, a refused capture)

    @classmethod
    def of_reply(cls, code: str, reply: list[Any]) -> "OutcomeResult":
        """From charge_outcome_v2's or charge_reversal's reply."""
        return cls(
            decision=code,
            charge_id=reply[1],
            charge_state=ChargeState(reply[2]) if reply[2] else None,
            hold_id=reply[3],
            hold_state=HoldState(reply[4]) if reply[4] else None,
            first_seen=bool(int(reply[5])),
            problems=str(reply[6]) if len(reply) > 6 else "",
        )


@dataclass(frozen=True, slots=True)
class SweepResult:
    examined: int
    expired: int
    other: int  # quarantined (deadline sweep) or seats freed (quarantine sweep)
    remaining_due: int
