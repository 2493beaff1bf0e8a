"""What each script answers: its reply codes (one StrEnum per script, REPLY_CODES naming them
all, checked against lua/ when the library loads) and the error each refusing code raises."""

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from engine.model import errors


class ClaimCode(StrEnum):
    OK = "OK"
    REPLAY = "REPLAY"
    SOLD_OUT = "SOLD_OUT"
    SEAT_TAKEN = "SEAT_TAKEN"
    UNKNOWN_SEAT = "UNKNOWN_SEAT"
    NOT_OPEN = "NOT_OPEN"
    NOT_FOUND = "NOT_FOUND"
    CHARGE_IN_FLIGHT = "CHARGE_IN_FLIGHT"
    IDEMPOTENCY_KEY_REUSED = "IDEMPOTENCY_KEY_REUSED"
    RATE_LIMITED = "RATE_LIMITED"
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
    NOT_ENOUGH_SEATS = "NOT_ENOUGH_SEATS"
    PARTY_TOO_LARGE = "PARTY_TOO_LARGE"
    WRONG_KIND = "WRONG_KIND"
    UNKNOWN_SKU = "UNKNOWN_SKU"
    UNKNOWN_LOCATION = "UNKNOWN_LOCATION"
    INSUFFICIENT_STOCK = "INSUFFICIENT_STOCK"
    CLOSED = "CLOSED"  # the sale was closed or cancelled by an operator
    # A presale (ADR 0049): a claim before T0 in a window needs one of its codes, with a use left.
    CODE_REQUIRED = "CODE_REQUIRED"
    CODE_INVALID = "CODE_INVALID"
    CODE_USED_UP = "CODE_USED_UP"
    CODE_LIMIT = "CODE_LIMIT"


class ReindexCode(StrEnum):
    """lua/event_reindex.lua: the event's scores in the indexes across events set right."""

    REINDEXED = "REINDEXED"
    NOT_FOUND = "NOT_FOUND"


class CodesAddCode(StrEnum):
    """lua/codes_add.lua: a presale's access codes added in bulk (ADR 0049)."""

    OK = "OK"
    NOT_FOUND = "NOT_FOUND"
    CLOSED = "CLOSED"
    PRESALE_MISMATCH = "PRESALE_MISMATCH"
    CODE_EXISTS = "CODE_EXISTS"


class ReleaseCode(StrEnum):
    RELEASED = "RELEASED"
    ALREADY_TERMINAL = "ALREADY_TERMINAL"
    NOT_OWNER = "NOT_OWNER"
    NOT_FOUND = "NOT_FOUND"


class SweepCode(StrEnum):
    SWEPT = "SWEPT"
    NOT_FOUND = "NOT_FOUND"


class TrimCode(StrEnum):
    TRIMMED = "TRIMMED"
    NOT_FOUND = "NOT_FOUND"


class ChargeStartCode(StrEnum):
    OK = "OK"
    REPLAY = "REPLAY"
    CHARGE_IN_FLIGHT = "CHARGE_IN_FLIGHT"
    HOLD_NOT_LIVE = "HOLD_NOT_LIVE"
    NOT_OWNER = "NOT_OWNER"
    NOT_FOUND = "NOT_FOUND"
    IDEMPOTENCY_KEY_REUSED = "IDEMPOTENCY_KEY_REUSED"
    NOT_OPEN = "NOT_OPEN"
    CLOSED = "CLOSED"
    RATE_LIMITED = "RATE_LIMITED"


class AbandonCode(StrEnum):
    ABANDONED = "ABANDONED"
    NOT_IN_FLIGHT = "NOT_IN_FLIGHT"
    NOT_OWNER = "NOT_OWNER"
    NOT_FOUND = "NOT_FOUND"


class OutcomeCode(StrEnum):
    CONFIRMED = "CONFIRMED"
    REFUND = "REFUND"
    DECLINED = "DECLINED"
    FAILED = "FAILED"
    CONTRADICTION = "CONTRADICTION"  # the provider contradicts its own final word: an alert
    MISMATCH = "MISMATCH"  # the message does not match the charge we created: an alert
    STALE = "STALE"  # an old capture message for money that has moved since
    NOT_FOUND = "NOT_FOUND"
    RETRY_LATER = "RETRY_LATER"


class ReversalCode(StrEnum):
    REFUNDED = "REFUNDED"  # the refund we asked for is confirmed
    MONEY_LEFT = "MONEY_LEFT"  # a winner refunded at the provider: its hold is an exception
    DISPUTED = "DISPUTED"
    REINSTATED = "REINSTATED"  # dispute won: the seat has its money again
    REFUND = "REFUND"  # dispute won after the seat was revoked: the money goes back
    CHARGED_BACK = "CHARGED_BACK"
    DUPLICATE = "DUPLICATE"
    NOTED = "NOTED"  # before its predecessor: applied once that lands (lua/_money.lua, ADR 0036)
    CONTRADICTION = "CONTRADICTION"
    MISMATCH = "MISMATCH"
    RETRY_LATER = "RETRY_LATER"  # the event is being rebuilt: nothing recorded
    NOT_FOUND = "NOT_FOUND"


class RefundCode(StrEnum):
    REFUNDED = "REFUNDED"
    ALREADY_REFUNDED = "ALREADY_REFUNDED"
    RETRY_SCHEDULED = "RETRY_SCHEDULED"
    PARKED = "PARKED"
    DUE_NOW = "DUE_NOW"
    NOT_REFUNDING = "NOT_REFUNDING"
    NOT_FOUND = "NOT_FOUND"


class RevokeCode(StrEnum):
    REVOKED = "REVOKED"
    NOT_EXCEPTION = "NOT_EXCEPTION"
    NOT_FOUND = "NOT_FOUND"


class HoldRefundCode(StrEnum):
    """lua/hold_refund.lua: part (or all) of a confirmed order given back (ADR 0043)."""

    PART = "PART"
    WHOLE = "WHOLE"
    REPLAY = "REPLAY"
    IDEMPOTENCY_KEY_REUSED = "IDEMPOTENCY_KEY_REUSED"
    NOT_CONFIRMED = "NOT_CONFIRMED"
    NOT_IN_ORDER = "NOT_IN_ORDER"
    RECOVERING = "RECOVERING"
    NOT_FOUND = "NOT_FOUND"


class EventCreateCode(StrEnum):
    CREATED = "CREATED"
    EXISTS = "EXISTS"


class SeatsAddCode(StrEnum):
    ADDED = "ADDED"
    NOT_FOUND = "NOT_FOUND"
    NOT_DRAFT = "NOT_DRAFT"
    DUPLICATE_SEAT = "DUPLICATE_SEAT"
    WRONG_KIND = "WRONG_KIND"


class StockAddCode(StrEnum):
    ADDED = "ADDED"
    NOT_FOUND = "NOT_FOUND"
    NOT_DRAFT = "NOT_DRAFT"
    WRONG_KIND = "WRONG_KIND"
    DUPLICATE_SKU = "DUPLICATE_SKU"


class CorrectionCode(StrEnum):
    APPLIED = "APPLIED"
    REPLAY = "REPLAY"
    BELOW_ZERO = "BELOW_ZERO"
    CORRECTION_ID_REUSED = "CORRECTION_ID_REUSED"
    UNKNOWN_SKU = "UNKNOWN_SKU"
    UNKNOWN_LOCATION = "UNKNOWN_LOCATION"
    WRONG_KIND = "WRONG_KIND"
    NOT_OPEN = "NOT_OPEN"
    NOT_FOUND = "NOT_FOUND"


class OpenCode(StrEnum):
    OPENED = "OPENED"
    ALREADY_OPEN = "ALREADY_OPEN"  # open already; T0 moves only when asked (reschedule)
    STARTED = "STARTED"  # a reschedule after T0: the sale started, T0 stays
    CLOSED = "CLOSED"
    NOT_FOUND = "NOT_FOUND"


class CloseCode(StrEnum):
    CLOSED = "CLOSED"
    ALREADY_CLOSED = "ALREADY_CLOSED"
    FENCED = "FENCED"
    NOT_FOUND = "NOT_FOUND"


class CancelCode(StrEnum):
    CANCELLING = "CANCELLING"  # this call's batch is done; holds remain: call again
    CANCELLED = "CANCELLED"  # nothing is held, blocked or sold any more
    FENCED = "FENCED"
    NOT_FOUND = "NOT_FOUND"


class FenceCode(StrEnum):
    FENCED = "FENCED"
    ALREADY_FENCED = "ALREADY_FENCED"
    REBUILDING = "REBUILDING"  # never fenced half built; CURRENT: caught up with the ledger
    CURRENT = "CURRENT"
    NOT_FOUND = "NOT_FOUND"


class RestoreCode(StrEnum):
    RESTORED = "RESTORED"
    EXISTS = "EXISTS"
    NOT_DRAFT = "NOT_DRAFT"
    SEAT_NOT_FREE = "SEAT_NOT_FREE"
    NOT_FOUND = "NOT_FOUND"


class QueueRestoreCode(StrEnum):
    """lua/queue_restore.lua: a waiting room put back from the ledger (ADR 0029)."""

    RESTORED = "RESTORED"
    NO_QUEUE = "NO_QUEUE"
    NOT_DRAFT = "NOT_DRAFT"
    NOT_FOUND = "NOT_FOUND"


class PolicyCode(StrEnum):
    """lua/event_policy.lua: a change of an event's deadline policies (ADR 0020)."""

    SHADOWED = "SHADOWED"
    PROMOTED = "PROMOTED"
    ROLLED_BACK = "ROLLED_BACK"
    RESTORED = "RESTORED"  # a rebuild put back what the ledger's policy records left
    NO_SHADOW = "NO_SHADOW"  # promote, or stop shadowing, with no candidate in shadow
    NO_PREVIOUS = "NO_PREVIOUS"  # rollback with nothing promoted since the last rollback
    SAME_AS_ENFORCED = "SAME_AS_ENFORCED"  # a shadow of the enforced policy would learn nothing
    NOT_DRAFT = "NOT_DRAFT"  # a restore, on an event that is not being rebuilt
    FENCED = "FENCED"
    NOT_FOUND = "NOT_FOUND"


class QueueSetupCode(StrEnum):
    """lua/queue_setup.lua: an event's waiting room set up, before T0 (ADR 0029)."""

    CONFIGURED = "CONFIGURED"
    STARTED = "STARTED"
    CLOSED = "CLOSED"
    FENCED = "FENCED"
    NOT_FOUND = "NOT_FOUND"


class QueuePollCode(StrEnum):
    """lua/queue_poll.lua: a login's state in the waiting room, or why it has none."""

    WAITING = "WAITING"
    ADMITTED = "ADMITTED"
    USED = "USED"
    LAPSED = "LAPSED"
    SOLD_OUT = "SOLD_OUT"
    NOT_IN_QUEUE = "NOT_IN_QUEUE"
    FULL = "FULL"
    NO_QUEUE = "NO_QUEUE"
    NOT_OPEN = "NOT_OPEN"
    CLOSED = "CLOSED"
    NOT_FOUND = "NOT_FOUND"


class QueueUseCode(StrEnum):
    """lua/queue_use.lua: an admission spent on a claim, or why not."""

    OK = "OK"
    REPLAY = "REPLAY"
    USED = "USED"
    EXPIRED = "EXPIRED"
    NOT_ADMITTED = "NOT_ADMITTED"
    NO_FREE = "NO_FREE"
    SOLD_OUT = "SOLD_OUT"
    NOT_OPEN = "NOT_OPEN"
    NO_QUEUE = "NO_QUEUE"
    NOT_FOUND = "NOT_FOUND"


# One refusal table per script: the error each refusing code raises (store, PostgreSQL baseline).
CLAIM_REFUSALS: Mapping[str, type[errors.EngineError]] = MappingProxyType(
    {
        ClaimCode.SOLD_OUT: errors.SoldOut,
        ClaimCode.SEAT_TAKEN: errors.SeatTaken,
        ClaimCode.UNKNOWN_SEAT: errors.UnknownSeat,
        ClaimCode.NOT_OPEN: errors.SaleNotOpen,
        ClaimCode.NOT_FOUND: errors.EventNotFound,
        ClaimCode.CHARGE_IN_FLIGHT: errors.ChargeInFlight,
        ClaimCode.IDEMPOTENCY_KEY_REUSED: errors.IdempotencyKeyReused,
        ClaimCode.RATE_LIMITED: errors.RateLimited,
        ClaimCode.LIMIT_EXCEEDED: errors.LimitExceeded,
        ClaimCode.NOT_ENOUGH_SEATS: errors.NotEnoughSeats,
        ClaimCode.PARTY_TOO_LARGE: errors.PartyTooLarge,
        ClaimCode.WRONG_KIND: errors.WrongKind,
        ClaimCode.UNKNOWN_SKU: errors.UnknownSku,
        ClaimCode.UNKNOWN_LOCATION: errors.UnknownLocation,
        ClaimCode.INSUFFICIENT_STOCK: errors.InsufficientStock,
        ClaimCode.CLOSED: errors.SaleClosed,
        ClaimCode.CODE_REQUIRED: errors.AccessCodeRequired,
        ClaimCode.CODE_INVALID: errors.AccessCodeInvalid,
        ClaimCode.CODE_USED_UP: errors.AccessCodeUsedUp,
        ClaimCode.CODE_LIMIT: errors.AccessCodeLimit,
    }
)
CORRECTION_REFUSALS: Mapping[str, type[errors.EngineError]] = MappingProxyType(
    {
        CorrectionCode.BELOW_ZERO: errors.StockBelowZero,
        CorrectionCode.CORRECTION_ID_REUSED: errors.CorrectionIdReused,
        CorrectionCode.UNKNOWN_SKU: errors.UnknownSku,
        CorrectionCode.UNKNOWN_LOCATION: errors.UnknownLocation,
        CorrectionCode.WRONG_KIND: errors.WrongKind,
        CorrectionCode.NOT_OPEN: errors.SaleNotOpen,
        CorrectionCode.NOT_FOUND: errors.EventNotFound,
    }
)
CHARGE_START_REFUSALS: Mapping[str, type[errors.EngineError]] = MappingProxyType(
    {
        ChargeStartCode.CHARGE_IN_FLIGHT: errors.ChargeInFlight,
        ChargeStartCode.NOT_OWNER: errors.NotOwner,
        ChargeStartCode.NOT_FOUND: errors.HoldNotFound,
        ChargeStartCode.IDEMPOTENCY_KEY_REUSED: errors.IdempotencyKeyReused,
        ChargeStartCode.NOT_OPEN: errors.SaleNotOpen,
        ChargeStartCode.RATE_LIMITED: errors.RateLimited,
        ChargeStartCode.CLOSED: errors.SaleClosed,
    }
)


def refusal(
    table: Mapping[str, type[errors.EngineError]], code: str, reply: list[Any]
) -> errors.EngineError:
    """The error a refusing reply raises, with the reply's figures as details."""
    details: dict[str, Any] = {}
    if code == "RATE_LIMITED":
        details["retry_after_ms"] = int(reply[1])
    elif code == "LIMIT_EXCEEDED":
        details["cap"] = int(reply[1])
    elif code == "NOT_OPEN" and len(reply) > 1 and str(reply[1]).isdigit():
        details["opens_at_ms"] = int(reply[1])
    details.update(_STOCK_DETAILS.get(code, lambda r: {})(reply))
    # The message is for logs; a client is told the error's summary (engine/model/errors.py).
    return table[code](code.lower().replace("_", " "), reply=reply[1:], **details)


_STOCK_DETAILS: Mapping[str, Any] = MappingProxyType(
    {
        "NOT_ENOUGH_SEATS": lambda r: {"available": int(r[1])},
        "PARTY_TOO_LARGE": lambda r: {"max_party": int(r[1])},
        "WRONG_KIND": lambda r: {"kind": str(r[1])},
        "UNKNOWN_SKU": lambda r: {"sku": str(r[1]) if len(r) > 1 else None},
        "UNKNOWN_LOCATION": lambda r: {"location": str(r[1]) if len(r) > 1 else None},
        "INSUFFICIENT_STOCK": lambda r: {"sku": str(r[1]), "available": int(r[2])},
        "CLOSED": lambda r: {"sale_status": str(r[1])},
        "CODE_REQUIRED": lambda r: {"closes_at_ms": int(r[1])},
        "CODE_USED_UP": lambda r: {"uses": int(r[1])},
        "CODE_LIMIT": lambda r: {"per_login": int(r[1])},
        "BELOW_ZERO": lambda r: dict(
            zip(("available", "held", "blocked", "sold"), map(int, r[1:5]), strict=True)
        ),
    }
)


REPLY_CODES: Mapping[str, type[StrEnum]] = MappingProxyType(
    {
        "event_create": EventCreateCode,
        "event_seats_add": SeatsAddCode,
        "stock_add": StockAddCode,
        "stock_correct": CorrectionCode,
        "event_open": OpenCode,
        "event_close": CloseCode,
        "event_cancel": CancelCode,
        "event_restore": RestoreCode,
        "queue_restore": QueueRestoreCode,
        "event_fence": FenceCode,
        "event_policy": PolicyCode,
        "hold_claim": ClaimCode,
        "codes_add": CodesAddCode,
        "event_reindex": ReindexCode,
        "hold_release": ReleaseCode,
        "hold_expire": SweepCode,
        "hold_quarantine_timeout": SweepCode,
        "hold_trim": TrimCode,
        "charge_start": ChargeStartCode,
        "charge_abandon": AbandonCode,
        "charge_outcome_v2": OutcomeCode,
        "charge_reversal": ReversalCode,
        "charge_refund": RefundCode,
        "hold_revoke": RevokeCode,
        "hold_refund": HoldRefundCode,
        "queue_setup": QueueSetupCode,  # the waiting room (ADR 0029)
        "queue_poll": QueuePollCode,
        "queue_use": QueueUseCode,
    }
)
