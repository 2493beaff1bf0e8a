"""Read-only views of what the scripts store: holds, charges, seats, an event's counters."""

from dataclasses import dataclass
from typing import Any

import orjson

from engine.states import ChargeState, HoldState, LatePolicy


@dataclass(frozen=True, slots=True)
class SeatSpec:
    seat_id: str
    rank: float
    section: str = ""


@dataclass(frozen=True, slots=True)
class Hold:
    hold_id: str
    login: str
    seat_id: str
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

    @classmethod
    def from_json(cls, raw: str | bytes) -> "Hold":
        d: dict[str, Any] = orjson.loads(raw)
        return cls(
            hold_id=d["id"],
            login=d["login"],
            seat_id=d["seat"],
            state=HoldState(d["state"]),
            created_ms=int(d["created_ms"]),
            expires_ms=int(d["expires_ms"]),
            charge_in_flight=d["charge"],
            blocking_charge=d["blocking"],
            winner=d["winner"],
            until_ms=int(d["until_ms"]),
            decided_ms=int(d["decided_ms"]),
            reason=d["reason"],
            charge_ids=tuple(c for c in d["charges"].split(",") if c),
        )


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
        )


@dataclass(frozen=True, slots=True)
class Availability:
    event_id: str
    status: str
    opens_at_ms: int
    policy: LatePolicy
    hold_ttl_ms: int
    quarantine_ms: int
    seats_total: int
    free: int
    held: int
    blocked: int
    sold: int
    price_minor: int


@dataclass(frozen=True, slots=True)
class Claimed:
    hold_id: str
    seat_id: str
    expires_ms: int
    replay: bool
    state: HoldState


@dataclass(frozen=True, slots=True)
class ChargeStarted:
    charge_id: str
    expires_ms: int
    replay: bool
    state: ChargeState


@dataclass(frozen=True, slots=True)
class ProviderOutcome:
    """One provider callback, already authenticated by the caller."""

    provider_event_id: str
    charge_id: str  # our idempotency key, echoed by the provider in its metadata
    attempt_id: str  # unique per authorization attempt
    intent_id: str  # join key only
    outcome: str  # CAPTURED | DECLINED | FAILED


@dataclass(frozen=True, slots=True)
class OutcomeResult:
    decision: str  # an OutcomeCode value
    charge_id: str
    charge_state: ChargeState
    hold_id: str
    hold_state: HoldState | None
    first_seen: bool  # False: this provider event id was processed before; nothing changed


@dataclass(frozen=True, slots=True)
class SweepResult:
    examined: int
    expired: int
    other: int  # quarantined (deadline sweep) or seats freed (quarantine sweep)
    remaining_due: int
