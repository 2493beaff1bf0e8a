"""Stripe's objects and events in the engine's words (pure: no I/O; ADR 0023).

One PaymentIntent per charge of ours: its id is the intent (the join key), each of its Charges
is an attempt (a unique attempt id), and its metadata carries our charge id (the idempotency key
we created it under), event, hold, amount and currency. Stripe's events are read field by field,
never coercing a wrong type into a right one (ADR 0014): the deciding scripts check each value
against the charge we created.

| Stripe event | engine message |
|---|---|
| `payment_intent.succeeded` | outcome CAPTURED: attempt `latest_charge`, `amount_received` |
| `payment_intent.payment_failed` | outcome DECLINED (a `card_error`), else FAILED |
| `charge.refunded` | reversal REFUND (amount `amount_refunded`) |
| `charge.refund.updated` | reversal REFUND once the refund `succeeded`; other statuses ignored |
| `charge.dispute.created` | reversal DISPUTE_OPENED; an inquiry (`warning_*`) is ignored |
| `charge.dispute.closed` | reversal DISPUTE_WON / DISPUTE_LOST; a closed inquiry is ignored |
"""

from collections.abc import Mapping
from typing import Any

from engine.model import keys
from engine.model.holds import ProviderOutcome, ProviderReversal
from engine.providers.base import (
    BadCallback,
    Callback,
    Ignored,
    MoneyMovement,
    ProviderCharge,
    amount_of,
    field,
    meta,
    route,
    text,
)

OUTCOME_EVENTS = ("payment_intent.succeeded", "payment_intent.payment_failed")
REVERSAL_EVENTS = (
    "charge.refunded",
    "charge.refund.updated",
    "charge.dispute.created",
    "charge.dispute.closed",
)
# Dispute statuses: an inquiry moves no money; a prevented dispute is settled by a refund.
DISPUTE_NO_MONEY = ("warning_needs_response", "warning_under_review", "warning_closed", "prevented")
DISPUTE_CLOSED = {"won": "DISPUTE_WON", "lost": "DISPUTE_LOST"}
DECLINED_OUTCOMES = ("issuer_declined", "blocked")  # a Charge's outcome.type that is a decline
FAILED_INTENT = ("requires_payment_method", "canceled")  # where an intent goes after a failure


def obj(event: Mapping[str, Any], want: str) -> dict[str, Any]:
    """The event's `data.object`, which must be a Stripe object of kind `want`."""
    data = event.get("data")
    found = data.get("object") if isinstance(data, dict) else None
    if not isinstance(found, dict) or found.get("object") != want:
        raise BadCallback(f"{event.get('type')}: data.object must be a {want}")
    return found


def ref(value: Any) -> str:
    """An id field that may be expanded into its object."""
    if isinstance(value, dict):
        value = value.get("id")
    return value if isinstance(value, str) and keys.valid_id(value) else ""


def metadata_of(o: Mapping[str, Any]) -> dict[str, Any]:
    found = o.get("metadata")
    return found if isinstance(found, dict) else {}


def route_intent(pi_metadata: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(event id, our key, metadata event or "-") from an intent's metadata; None for a payment
    that is not ours (no key we minted, no event named)."""
    key = pi_metadata.get("charge_id")
    if key is None and "event_id" not in pi_metadata:
        return None
    return route(key, pi_metadata, "the intent's metadata.charge_id")


def currency(o: Mapping[str, Any]) -> str:
    """Stripe's lowercase ISO code in the engine's uppercase (any other value stays as sent,
    for the script to refuse)."""
    return text(o, "currency").upper()


def outcome_of(event: Mapping[str, Any]) -> Callback | Ignored:
    """A payment_intent.* event: the outcome of the intent's latest attempt."""
    pev = field(event, "id")
    pi = obj(event, "payment_intent")
    routed = route_intent(metadata_of(pi))
    if routed is None:
        return Ignored(pev, "not_ours")
    event_id, key, meta_event = routed
    succeeded = event.get("type") == "payment_intent.succeeded"
    error = pi.get("last_payment_error")
    error = error if isinstance(error, dict) else {}
    if succeeded:
        outcome, attempt, amount = "CAPTURED", ref(pi.get("latest_charge")), "amount_received"
    else:
        outcome = "DECLINED" if error.get("type") == "card_error" else "FAILED"
        attempt, amount = ref(error.get("charge")) or ref(pi.get("latest_charge")), "amount"
    if not attempt:
        if succeeded:
            raise BadCallback("a succeeded intent names no charge")
        return Ignored(pev, "no_attempt")  # nothing reached a card network: no money moved
    status = pi.get("status")
    if status == "succeeded":
        word = "captured"
    elif status in FAILED_INTENT and not succeeded:
        word = outcome.lower()
    else:
        word = text(pi, "status")  # disagrees with the type: the script calls it incoherent
    message = ProviderOutcome(
        pev,
        key,
        attempt,
        field(pi, "id"),
        outcome,
        status=word,
        amount=amount_of(pi, amount),
        currency=currency(pi),
        meta_event=meta_event,
        meta_hold=meta(metadata_of(pi), "hold_id"),
        meta_charge=meta(metadata_of(pi), "charge_id"),
    )
    return Callback(event_id, message)


def reversal_kind(event: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | Ignored:
    """What a charge.* event says moved, and its object; Ignored when it moved nothing."""
    pev, kind = field(event, "id"), event.get("type")
    if kind == "charge.refunded":
        return "REFUND", obj(event, "charge")
    if kind == "charge.refund.updated":
        refund = obj(event, "refund")
        status = refund.get("status")
        return ("REFUND", refund) if status == "succeeded" else Ignored(pev, f"refund_{status}")
    dispute = obj(event, "dispute")
    status = text(dispute, "status")
    if status in DISPUTE_NO_MONEY:
        return Ignored(pev, f"dispute_{status}")
    if kind == "charge.dispute.created":
        return "DISPUTE_OPENED", dispute
    if status not in DISPUTE_CLOSED:
        raise BadCallback("a closed dispute's status is won or lost")
    return DISPUTE_CLOSED[status], dispute


def intent_ref(o: Mapping[str, Any]) -> str:
    """The intent a charge, refund or dispute names ("" when it names none)."""
    return ref(o.get("payment_intent"))


def attempt_ref(o: Mapping[str, Any]) -> str:
    """The attempt (a Charge) a charge, refund or dispute is about."""
    return ref(o.get("id")) if o.get("object") == "charge" else ref(o.get("charge"))


def reversal_of(
    event: Mapping[str, Any], kind: str, moved: Mapping[str, Any], pi: Mapping[str, Any]
) -> Callback | Ignored:
    """A reversal of the attempt `moved` is about, routed by its intent's metadata."""
    pev = field(event, "id")
    routed = route_intent(metadata_of(pi))
    if routed is None:
        return Ignored(pev, "not_ours")
    event_id, key, meta_event = routed
    attempt = attempt_ref(moved)
    if not attempt:
        raise BadCallback(f"{event.get('type')} names no charge")
    name = "amount_refunded" if moved.get("object") == "charge" else "amount"
    reversal = ProviderReversal(
        pev, key, attempt, kind, amount_of(moved, name), currency(moved), meta_event
    )
    return Callback(event_id, reversal)


def attempt_status(charge: Mapping[str, Any]) -> str:
    """A Charge's status in the engine's words."""
    status = charge.get("status")
    if status == "succeeded":
        return "captured" if charge.get("captured") is True else "processing"
    if status == "failed":
        outcome = charge.get("outcome")
        kind = outcome.get("type") if isinstance(outcome, dict) else None
        return "declined" if kind in DECLINED_OUTCOMES else "failed"
    return "processing"


def dispute_word(status: str) -> str:
    """A dispute's status as ProviderCharge.disputed says it."""
    if not status or status in DISPUTE_NO_MONEY:
        return ""
    return status if status in DISPUTE_CLOSED else "open"


def record_of(
    pi: Mapping[str, Any], charge: Mapping[str, Any] | None, dispute_status: str = ""
) -> ProviderCharge:
    """The provider's record of one attempt: a Charge of the intent, or the intent alone while
    it has none (an intent canceled before any attempt is its own failed attempt)."""
    metadata = {str(k): str(v) for k, v in metadata_of(pi).items()}
    key = metadata.get("charge_id", "")
    if charge is None:
        canceled = pi.get("status") == "canceled"
        return ProviderCharge(
            attempt_id=ref(pi.get("id")) if canceled else "",
            intent_id=ref(pi.get("id")),
            idempotency_key=key,
            status="failed" if canceled else "processing",
            amount=amount_of(pi, "amount"),
            currency=currency(pi),
            metadata=metadata,
            client_secret=str(pi.get("client_secret") or ""),
        )
    status = attempt_status(charge)
    refunded = amount_of(charge, "amount_refunded")
    return ProviderCharge(
        attempt_id=ref(charge.get("id")),
        intent_id=ref(pi.get("id")),
        idempotency_key=key,
        status=status,
        amount=amount_of(charge, "amount_captured" if status == "captured" else "amount"),
        currency=currency(charge),
        metadata=metadata,
        refunded=charge.get("refunded") is True,  # in full (a part of an order: not yet)
        amount_refunded=refunded or 0,
        disputed=dispute_word(dispute_status),
        client_secret=str(pi.get("client_secret") or ""),
    )


def movement(kind: str, attempt: str, amount: int, pi: Mapping[str, Any]) -> MoneyMovement:
    """One movement of an attempt, named by its intent's metadata (our key and event)."""
    metadata = metadata_of(pi)
    return MoneyMovement(
        kind=kind,
        attempt_id=attempt,
        idempotency_key=str(metadata.get("charge_id", "")),
        amount=amount,
        event_id=str(metadata.get("event_id", "")),
    )


def charge_movements(charge: Mapping[str, Any], pi: Mapping[str, Any]) -> list[MoneyMovement]:
    """What one Charge moved: its capture and its refunds."""
    attempt = ref(charge.get("id"))
    captured = amount_of(charge, "amount_captured") or 0
    refunded = amount_of(charge, "amount_refunded") or 0
    moved = [("capture", captured if charge.get("captured") is True else 0), ("refund", refunded)]
    return [movement(kind, attempt, amount, pi) for kind, amount in moved if amount > 0]


def dispute_movements(dispute: Mapping[str, Any], pi: Mapping[str, Any]) -> list[MoneyMovement]:
    """What one dispute moved: the money withdrawn, and given back if it was won."""
    status = text(dispute, "status")
    amount = amount_of(dispute, "amount") or 0
    if status in DISPUTE_NO_MONEY or amount <= 0:
        return []
    kinds = ["dispute_withdrawal"] + (["dispute_reinstatement"] if status == "won" else [])
    return [movement(kind, attempt_ref(dispute), amount, pi) for kind in kinds]
