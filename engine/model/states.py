"""The two automata (hold owns the seat, charge owns the money): states, events, and the only
transition tables. The Lua scripts implement these tables; tests/lua/test_parity.py runs every
(state, event) pair through the scripts on real Redis and checks them against these tables."""

from collections.abc import Iterable, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from engine.model.errors import IllegalTransition


class HoldState(StrEnum):
    RESERVED = "RESERVED"
    QUARANTINED = "QUARANTINED"
    CONFIRMED = "CONFIRMED"
    EXPIRED = "EXPIRED"
    RELEASED = "RELEASED"
    # After the sale: the winning money left at the provider (its own refund, a dispute).
    EXCEPTION = "EXCEPTION"  # the seat is still assigned, with no money behind it: ops decide
    REVOKED = "REVOKED"  # the seat was taken back and is on sale again


class HoldEvent(StrEnum):
    DEADLINE_IDLE = "deadline_idle"  # now >= expires_ms, no charge in flight
    DEADLINE_CHARGING = "deadline_charging"  # ... with a charge in flight, quarantine policy
    # ... release_refund policy, or the end of a grace (`grace:<ms>`, ADR 0020)
    DEADLINE_CHARGING_RELEASE = "deadline_charging_release"
    RELEASE = "release"  # the owner gives the hold up (or a new claim replaces it)
    CAPTURE_WINS = "capture_wins"  # a capture that wins the hold
    CHARGE_RESOLVED = "charge_resolved"  # the awaited charge declined, failed or is refunded
    QUARANTINE_TIMEOUT = "quarantine_timeout"  # now >= until_ms (hard timeout)
    # Provider-initiated money movements of the winning charge (ADR 0014).
    MONEY_LEFT = "money_left"  # refunded at the provider or dispute lost; reversal policy manual
    MONEY_LEFT_REVOKE = "money_left_revoke"  # ... reversal policy revoke
    DISPUTE_OPENED = "dispute_opened"  # the money is withdrawn while the dispute runs
    DISPUTE_WON = "dispute_won"  # the money came back
    OPERATOR_REVOKE = "operator_revoke"  # an operator takes the seat back
    # An operator undoes the sale: the event is cancelled, or the whole order given back (ADR
    # 0025, 0043). The seat goes back on sale and the money back to the buyer.
    SALE_UNDONE = "sale_undone"


class ChargeState(StrEnum):
    CHARGING = "CHARGING"
    CAPTURED = "CAPTURED"
    DECLINED = "DECLINED"
    FAILED = "FAILED"
    REFUNDING = "REFUNDING"
    REFUNDED = "REFUNDED"
    # Money the provider moved on its own after a capture that won (ADR 0014).
    PROVIDER_REFUNDED = "PROVIDER_REFUNDED"  # refunded from the provider's side (dashboard)
    DISPUTED = "DISPUTED"  # a dispute is open: the provider withdrew the money meanwhile
    CHARGED_BACK = "CHARGED_BACK"  # the dispute was lost: the money is gone for good


class ChargeEvent(StrEnum):
    CAPTURE_WINS = "capture_wins"
    CAPTURE_LOSES = "capture_loses"  # dead hold, winner already, resolve-by-refund, unknown hold
    DECLINE = "decline"
    FAIL = "fail"
    REFUND_CONFIRMED = "refund_confirmed"
    CAPTURE_AFTER_REFUND = "capture_after_refund"  # re-requests the idempotent refund
    # A capture after the provider's own decline or failure of the same attempt: money to give
    # back, never a seat (it goes down the refund path like any late capture).
    CAPTURE_CONTRADICTS = "capture_contradicts"
    PROVIDER_REFUND = "provider_refund"  # a refund we did not ask for (of a winner)
    DISPUTE_OPENED = "dispute_opened"
    DISPUTE_WON = "dispute_won"  # its hold still holds the seat: the charge wins again
    DISPUTE_WON_NO_SEAT = "dispute_won_no_seat"  # its hold was revoked: money to give back
    DISPUTE_LOST = "dispute_lost"
    SALE_UNDONE = "sale_undone"  # an operator undid the sale (HoldEvent.SALE_UNDONE): refunded


class SeatState(StrEnum):
    FREE = "FREE"
    HELD = "HELD"
    BLOCKED = "BLOCKED"
    SOLD = "SOLD"


class LatePolicy(StrEnum):
    """What happens when the deadline passes while a charge is in flight (per event)."""

    QUARANTINE = "quarantine"
    RELEASE_REFUND = "release_refund"


# A deadline policy (ADR 0020) is what an event does when a hold passes its deadline with a
# charge in flight: a LatePolicy, or `grace:<ms>` (release_refund after a grace: the hold stays
# live <ms> more for that charge, then its seat goes back on sale and a later capture is
# refunded). An event enforces one and may run one candidate in shadow (lua/event_policy.lua).
GRACE_POLICY_PREFIX = "grace:"
GRACE_MS_MIN, GRACE_MS_MAX = 1_000, 600_000  # lua/_lib.lua policy_spec holds the same bounds


class ReversalPolicy(StrEnum):
    """What happens to a sold seat whose money left at the provider (per event, ADR 0014)."""

    MANUAL = "manual"  # the hold becomes an EXCEPTION: the seat stays assigned, ops decide
    REVOKE = "revoke"  # the seat is taken back and put on sale again at once


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
        (H.CONFIRMED, HE.MONEY_LEFT): H.EXCEPTION,
        (H.CONFIRMED, HE.MONEY_LEFT_REVOKE): H.REVOKED,
        (H.CONFIRMED, HE.DISPUTE_OPENED): H.EXCEPTION,
        (H.CONFIRMED, HE.SALE_UNDONE): H.REVOKED,
        (H.EXCEPTION, HE.MONEY_LEFT_REVOKE): H.REVOKED,
        (H.EXCEPTION, HE.DISPUTE_WON): H.CONFIRMED,
        (H.EXCEPTION, HE.OPERATOR_REVOKE): H.REVOKED,
    }
)
# The first terminal decision of a hold is recorded once (terminal record); the states after
# CONFIRMED follow money the provider moved later and are recorded as further, non-terminal
# records: an entry is never erased, a reversing entry is added.
HOLD_TERMINAL: frozenset[HoldState] = frozenset({H.CONFIRMED, H.EXPIRED, H.RELEASED})
HOLD_AFTER_SALE: frozenset[HoldState] = frozenset({H.EXCEPTION, H.REVOKED})
HOLD_DECIDED: frozenset[HoldState] = HOLD_TERMINAL | HOLD_AFTER_SALE

C, CE = ChargeState, ChargeEvent
CHARGE_TRANSITIONS: Mapping[tuple[ChargeState, ChargeEvent], ChargeState] = MappingProxyType(
    {
        (C.CHARGING, CE.CAPTURE_WINS): C.CAPTURED,
        (C.CHARGING, CE.CAPTURE_LOSES): C.REFUNDING,
        (C.CHARGING, CE.DECLINE): C.DECLINED,
        (C.CHARGING, CE.FAIL): C.FAILED,
        (C.REFUNDING, CE.REFUND_CONFIRMED): C.REFUNDED,
        (C.REFUNDED, CE.CAPTURE_AFTER_REFUND): C.REFUNDED,
        (C.DECLINED, CE.CAPTURE_CONTRADICTS): C.REFUNDING,
        (C.FAILED, CE.CAPTURE_CONTRADICTS): C.REFUNDING,
        (C.REFUNDING, CE.PROVIDER_REFUND): C.REFUNDED,  # the refund we asked for, confirmed
        (C.CAPTURED, CE.PROVIDER_REFUND): C.PROVIDER_REFUNDED,
        (C.CAPTURED, CE.DISPUTE_OPENED): C.DISPUTED,
        (C.CAPTURED, CE.SALE_UNDONE): C.REFUNDING,
        (C.DISPUTED, CE.DISPUTE_WON): C.CAPTURED,
        (C.DISPUTED, CE.DISPUTE_WON_NO_SEAT): C.REFUNDING,
        (C.DISPUTED, CE.DISPUTE_LOST): C.CHARGED_BACK,
        (C.REFUNDING, CE.DISPUTE_OPENED): C.DISPUTED,  # the money we were giving back is withdrawn
    }
)
# As for holds: a charge's first terminal state is its one terminal record; what the provider
# does afterwards (a contradicting capture, its own refund, a dispute) adds non-terminal records.
CHARGE_TERMINAL: frozenset[ChargeState] = frozenset({C.CAPTURED, C.DECLINED, C.FAILED, C.REFUNDED})
# Money the provider holds for us, by charge state: the money invariant (docs/invariants.md)
# is provider captured - provider returned == sum over charges in these states.
CHARGE_HOLDS_MONEY: frozenset[ChargeState] = frozenset({C.CAPTURED, C.REFUNDING})


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


def lua_source() -> str:
    """lua/_states.lua: the states and the moves the tables allow, for the scripts (`hold_move`
    and `charge_move` in lua/_lib.lua refuse any other). `python -m engine.model.states >
    lua/_states.lua` writes it; tests/unit/test_states_lua.py checks it is current."""

    def names(states: Iterable[StrEnum]) -> list[str]:
        return [f"local {s.value} = '{s.value}'" for s in states]

    def moves(name: str, table: Mapping[tuple[Any, Any], StrEnum]) -> list[str]:
        pairs: dict[str, set[str]] = {}
        for (state, _event), to in table.items():
            pairs.setdefault(state.value, set()).add(to.value)
        rows = [
            f"  {state} = {{ {', '.join(f'{to} = true' for to in sorted(pairs[state]))} }},"
            for state in sorted(pairs)
        ]
        return [f"local {name} = {{", *rows, "}"]

    terminal = ", ".join(f"{s.value} = true" for s in sorted(CHARGE_TERMINAL))
    return "\n".join(
        [
            "--[[ _states: the two automata's states and the moves their tables allow, generated",
            "from engine/model/states.py (python -m engine.model.states > lua/_states.lua; a unit",
            "test checks it is current): do not edit. Every hold and charge move of the scripts",
            "goes through hold_move / charge_move (lua/_lib.lua), which refuse a pair not here. ]]",
            "",
            *names(HoldState),
            *names(ChargeState),
            "-- from -> to: the moves HOLD_TRANSITIONS allows, whatever the event",
            *moves("HOLD_MOVES", HOLD_TRANSITIONS),
            "-- from -> to: the moves CHARGE_TRANSITIONS allows, whatever the event",
            *moves("CHARGE_MOVES", CHARGE_TRANSITIONS),
            "-- A charge's first state among these is its one terminal record (CHARGE_TERMINAL).",
            f"local TERMINAL_CHARGE = {{ {terminal} }}",
            "",
        ]
    )


if __name__ == "__main__":
    print(lua_source(), end="")
