"""The engine's error taxonomy. Every error carries a stable snake_case `code`; the HTTP layer
maps codes to status codes in one table (api/errors.py).

What a client is told is the class's `summary` and the details its `public` names, never the
`message`: a message is for logs and may name anything (script names, Redis's own words, ids
the client never saw, such as another hold or a charge the server minted)."""

from typing import Any


class EngineError(Exception):
    """An expected outcome that is not a success (sold out, not the owner, ...)."""

    code = "engine_error"
    summary = "the request was refused"  # every subclass says what, for the client
    public: tuple[str, ...] = ()  # names of `details` a client may be told

    def __init__(self, message: str = "", **details: object) -> None:
        super().__init__(message or self.code)
        self.message = message or self.code
        self.details = details

    def public_details(self) -> dict[str, Any]:
        return {name: self.details.get(name) for name in self.public}


class SoldOut(EngineError):
    code = "sold_out"
    summary = "no seat is free"


class SeatTaken(EngineError):
    code = "seat_taken"
    summary = "this seat is not free"


class UnknownSeat(EngineError):
    code = "unknown_seat"
    summary = "the event has no such seat"


class EventNotFound(EngineError):
    code = "event_not_found"
    summary = "no such event"


class SaleClosed(EngineError):
    """`sale_status`: closed or cancelled (ADR 0025)."""

    code = "sale_closed"
    summary = "the sale was closed by the organiser; no new holds or payments are taken"
    public = ("sale_status",)


class AccessCodeRequired(EngineError):
    """Before T0, in a presale window (ADR 0049): a claim needs one of its access codes;
    `closes_at_ms` says when the window closes."""

    code = "access_code_required"
    summary = "a presale is on: a claim needs an access code"
    public = ("closes_at_ms",)


class AccessCodeInvalid(EngineError):
    code = "access_code_invalid"
    summary = "no such access code, or not one for now"


class AccessCodeUsedUp(EngineError):
    code = "access_code_used_up"
    summary = "this access code has no use left"
    public = ("uses",)


class AccessCodeLimit(EngineError):
    code = "access_code_limit"
    summary = "this login used this access code as often as one login may"
    public = ("per_login",)


class PresaleMismatch(EngineError):
    """Codes for a presale that exists with another window."""

    code = "presale_mismatch"
    summary = "this presale exists with another window; give its times or another name"
    public = ("opens_at_ms", "closes_at_ms")


class AccessCodeExists(EngineError):
    code = "access_code_exists"
    summary = "an access code exists already with other terms"
    public = ("access_code",)


class AlreadyOpen(EngineError):
    code = "already_open"
    summary = "the sale is open already; send reschedule: true to move a T0 still to come"
    public = ("opens_at_ms",)


class DetailsFixed(EngineError):
    code = "details_fixed"
    summary = "an event's name, venue, description, image and start are set while it is a draft"


class SaleStarted(EngineError):
    code = "sale_started"
    summary = "the sale has started; its T0 can no longer move"
    public = ("opens_at_ms",)


class BadCursor(EngineError):
    code = "invalid_cursor"
    summary = "the cursor is not one this listing gave"


class EventExists(EngineError):
    code = "event_exists"
    summary = "an event with this id exists already"


class SaleNotOpen(EngineError):
    """`opens_at_ms`: when the sale opens (server clock), None when no time is set yet."""

    code = "sale_not_open"
    summary = "the sale is not open; opens_at_ms says when it opens (null: not scheduled yet)"
    public = ("opens_at_ms",)

    def public_details(self) -> dict[str, Any]:
        return {"opens_at_ms": self.details.get("opens_at_ms") or None}  # 0: none set


class HoldNotFound(EngineError):
    code = "hold_not_found"
    summary = "no such hold for this login"


class HoldLost(EngineError):
    """The event was rebuilt from the ledger after Redis lost it, and this hold was made before
    and never paid: the ledger never had it (ADR 0037). A final answer, not "not found"."""

    code = "hold_lost_in_recovery"
    summary = "this hold was lost when the event was recovered; its seats are on sale again"


class ChargeNotFound(EngineError):
    code = "charge_not_found"
    summary = "no such charge on this hold"


class NotOwner(EngineError):
    code = "not_owner"
    summary = "this hold belongs to another login"


class HoldExpired(EngineError):
    """The hold is no longer RESERVED and live (expired, released, quarantined or confirmed)."""

    code = "hold_expired"
    summary = "the hold is no longer live; state says what it is"
    public = ("state",)


class AlreadyConfirmed(EngineError):
    code = "already_confirmed"
    summary = "the hold is confirmed: its seat is sold"
    public = ("state",)


class HoldRevoked(EngineError):
    """The seat was taken back by an operator after the payment for it left (ADR 0014)."""

    code = "hold_revoked"
    summary = "the seat of this hold was taken back after its payment left"
    public = ("state",)


class NotRefunding(EngineError):
    """A refund retry asked for a charge that is not waiting for its refund."""

    code = "not_refunding"
    summary = "the charge is not waiting for a refund"


class NotConfirmed(EngineError):
    """A refund of an order asked of a hold that is not a paid, confirmed order (`state`)."""

    code = "not_confirmed"
    summary = "the hold is not a confirmed order whose money we hold"
    public = ("state",)


class NotInOrder(EngineError):
    """A refund named a seat or stock line the order does not hold (`item`)."""

    code = "not_in_order"
    summary = "the order does not hold this seat or these units"
    public = ("item",)


class NotAnException(EngineError):
    """An operator action meant for a hold in EXCEPTION, on a hold in another state."""

    code = "not_an_exception"
    summary = "the hold is not in EXCEPTION"


class ChargeInFlight(EngineError):
    code = "charge_in_flight"
    summary = "a charge of this login's hold is in flight: wait for its outcome or abandon it"


class ChargeCaptured(EngineError):
    """Abandon of a charge that captured: too late, the money is taken (and the seat sold, or
    the money on its way back)."""

    code = "charge_captured"
    summary = "the charge captured: it can no longer be abandoned"
    public = ("charge_state",)


class ChargeNotInFlight(EngineError):
    """Abandon of a charge that is decided (declined, failed, refunding, ...) or whose hold is
    no longer live: there is nothing to abandon; `charge_state` says where it stands."""

    code = "charge_not_in_flight"
    summary = "the charge is not in flight; charge_state says where it stands"
    public = ("charge_state",)


class IdempotencyKeyReused(EngineError):
    code = "idempotency_key_reused"
    summary = "this Idempotency-Key was used for another request; send a new key"
    public = ("first_request",)  # what the key's first request holds (a claim: its seats)


class StoreUnavailable(EngineError):
    """Redis did not answer in time or refused the connection: safe to retry (idempotent)."""

    code = "store_unavailable"
    summary = "the store did not answer in time; retry (every request is safe to retry)"


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
    summary = "the event is being recovered; retry later"


class RateLimited(EngineError):
    """Too many claims or charge starts by one login in one event; `retry_after_ms` says when
    the next one is allowed."""

    code = "rate_limited"
    summary = "too many requests from this login; retry after the Retry-After header's seconds"


class LimitExceeded(EngineError):
    """A login reached the number of seats it may hold and buy in one event."""

    code = "limit_exceeded"
    summary = "this login holds or bought as many seats as one login may (cap)"
    public = ("cap",)


class NotEnoughSeats(EngineError):
    """A party larger than the seats still free: seats are free (not sold out), only fewer
    than asked; `available` says how many this claim could have had."""

    code = "not_enough_seats"
    summary = "fewer seats are free than this party asks for; available says how many"
    public = ("available",)


class PartyTooLarge(EngineError):
    code = "party_too_large"
    summary = "this event sells at most max_party seats in one claim"
    public = ("max_party",)


class WrongKind(EngineError):
    """Seats asked of a stock event, stock lines of a seat event."""

    code = "wrong_event_kind"
    summary = "this event does not sell what the request asks for; kind says what it sells"
    public = ("kind",)


class UnknownSku(EngineError):
    code = "unknown_sku"
    summary = "the event sells no such SKU"
    public = ("sku",)


class UnknownLocation(EngineError):
    code = "unknown_location"
    summary = "the event has no such stock location"
    public = ("location",)


class InsufficientStock(EngineError):
    """No location (or not the one asked for) has the whole line's quantity available;
    `available` is the most any of them has."""

    code = "insufficient_stock"
    summary = "not enough of this SKU is available at one location; available says the most"
    public = ("sku", "available")


class StockBelowZero(EngineError):
    """A stock correction that would leave fewer units on hand than holds and sales own."""

    code = "stock_below_zero"
    summary = "the correction would take available stock below zero given what is held and sold"
    public = ("available", "held", "blocked", "sold")


class CorrectionIdReused(EngineError):
    code = "correction_id_reused"
    summary = "this correction id was applied with another body"
