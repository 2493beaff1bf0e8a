"""The engine's error taxonomy. Every error carries a stable snake_case `code`; the HTTP layer
maps codes to status codes in one table (api/errors.py)."""


class EngineError(Exception):
    """An expected outcome that is not a success (sold out, not the owner, ...)."""

    code = "engine_error"

    def __init__(self, message: str = "", **details: object) -> None:
        super().__init__(message or self.code)
        self.message = message or self.code
        self.details = details


class SoldOut(EngineError):
    code = "sold_out"


class SeatTaken(EngineError):
    code = "seat_taken"


class UnknownSeat(EngineError):
    code = "unknown_seat"


class EventNotFound(EngineError):
    code = "event_not_found"


class EventExists(EngineError):
    code = "event_exists"


class SaleNotOpen(EngineError):
    code = "sale_not_open"


class HoldNotFound(EngineError):
    code = "hold_not_found"


class ChargeNotFound(EngineError):
    code = "charge_not_found"


class NotOwner(EngineError):
    code = "not_owner"


class HoldExpired(EngineError):
    """The hold is no longer RESERVED and live (expired, released, quarantined or confirmed)."""

    code = "hold_expired"


class AlreadyConfirmed(EngineError):
    code = "already_confirmed"


class NotAnException(EngineError):
    """An operator action meant for a hold in EXCEPTION, on a hold in another state."""

    code = "not_an_exception"


class ChargeInFlight(EngineError):
    code = "charge_in_flight"


class IdempotencyKeyReused(EngineError):
    code = "idempotency_key_reused"


class StoreUnavailable(EngineError):
    """Redis did not answer in time or refused the connection: safe to retry (idempotent)."""

    code = "store_unavailable"


class InvariantViolation(Exception):
    """A bug: a script found state that must never exist. Page someone; do not retry."""

    code = "invariant_violation"


class IllegalTransition(InvariantViolation):
    def __init__(self, automaton: str, state: object, event: object) -> None:
        super().__init__(f"illegal {automaton} transition: {event} in state {state}")


class Recovering(EngineError):
    """The event's Redis lost data or went back in time: nothing is decided for it until it
    is rebuilt from the ledger (ADR 0017). Retry later."""

    code = "recovering"
