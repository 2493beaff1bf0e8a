"""The two automata (hold owns the seat, charge owns the money): states, events, and the only
transition tables. The Lua scripts implement these tables; tests/lua/test_parity.py runs every
(state, event) pair through the scripts on real Redis and checks them against these tables."""

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from engine.errors import IllegalTransition


class HoldState(StrEnum):
    RESERVED = "RESERVED"
    QUARANTINED = "QUARANTINED"
    CONFIRMED = "CONFIRMED"
    EXPIRED = "EXPIRED"
    RELEASED = "RELEASED"


class HoldEvent(StrEnum):
    DEADLINE_IDLE = "deadline_idle"  # now >= expires_ms, no charge in flight
    DEADLINE_CHARGING = "deadline_charging"  # ... with a charge in flight, quarantine policy
    DEADLINE_CHARGING_RELEASE = "deadline_charging_release"  # ... release_refund policy
    RELEASE = "release"  # the owner gives the hold up (or a new claim replaces it)
    CAPTURE_WINS = "capture_wins"  # a capture that wins the hold
    CHARGE_RESOLVED = "charge_resolved"  # the awaited charge declined, failed or is refunded
    QUARANTINE_TIMEOUT = "quarantine_timeout"  # now >= until_ms (hard timeout)


class ChargeState(StrEnum):
    CHARGING = "CHARGING"
    CAPTURED = "CAPTURED"
    DECLINED = "DECLINED"
    FAILED = "FAILED"
    REFUNDING = "REFUNDING"
    REFUNDED = "REFUNDED"


class ChargeEvent(StrEnum):
    CAPTURE_WINS = "capture_wins"
    CAPTURE_LOSES = "capture_loses"  # dead hold, winner already, resolve-by-refund, unknown hold
    DECLINE = "decline"
    FAIL = "fail"
    REFUND_CONFIRMED = "refund_confirmed"
    CAPTURE_AFTER_REFUND = "capture_after_refund"  # re-requests the idempotent refund


class SeatState(StrEnum):
    FREE = "FREE"
    HELD = "HELD"
    BLOCKED = "BLOCKED"
    SOLD = "SOLD"


class LatePolicy(StrEnum):
    """What happens when the deadline passes while a charge is in flight (per event)."""

    QUARANTINE = "quarantine"
    RELEASE_REFUND = "release_refund"


H, HE = HoldState, HoldEvent
HOLD_TRANSITIONS: Mapping[tuple[HoldState, HoldEvent], HoldState] = MappingProxyType(
    {
        (H.RESERVED, HE.DEADLINE_IDLE): H.EXPIRED,
        (H.RESERVED, HE.DEADLINE_CHARGING): H.QUARANTINED,
        (H.RESERVED, HE.DEADLINE_CHARGING_RELEASE): H.EXPIRED,
        (H.RESERVED, HE.RELEASE): H.RELEASED,
        (H.RESERVED, HE.CAPTURE_WINS): H.CONFIRMED,
        (H.QUARANTINED, HE.CAPTURE_WINS): H.CONFIRMED,
        (H.QUARANTINED, HE.CHARGE_RESOLVED): H.EXPIRED,
        (H.QUARANTINED, HE.QUARANTINE_TIMEOUT): H.EXPIRED,
    }
)
HOLD_TERMINAL: frozenset[HoldState] = frozenset({H.CONFIRMED, H.EXPIRED, H.RELEASED})

C, CE = ChargeState, ChargeEvent
CHARGE_TRANSITIONS: Mapping[tuple[ChargeState, ChargeEvent], ChargeState] = MappingProxyType(
    {
        (C.CHARGING, CE.CAPTURE_WINS): C.CAPTURED,
        (C.CHARGING, CE.CAPTURE_LOSES): C.REFUNDING,
        (C.CHARGING, CE.DECLINE): C.DECLINED,
        (C.CHARGING, CE.FAIL): C.FAILED,
        (C.REFUNDING, CE.REFUND_CONFIRMED): C.REFUNDED,
        (C.REFUNDED, CE.CAPTURE_AFTER_REFUND): C.REFUNDED,
    }
)
CHARGE_TERMINAL: frozenset[ChargeState] = frozenset({C.CAPTURED, C.DECLINED, C.FAILED, C.REFUNDED})


def hold_transition(state: HoldState, event: HoldEvent) -> HoldState:
    try:
        return HOLD_TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalTransition("hold", state, event) from None


def charge_transition(state: ChargeState, event: ChargeEvent) -> ChargeState:
    try:
        return CHARGE_TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalTransition("charge", state, event) from None
