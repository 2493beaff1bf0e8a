"""The simulator's books as Stripe shows them (`python -m loadtest.provider_sim.server --wire
stripe`): PaymentIntents, Charges, Refunds and Disputes in the shapes of Stripe's published API
description, and its facts as Stripe events signed with `Stripe-Signature: t=...,v1=...`
(HMAC-SHA256 of "t.payload" with the endpoint secret). Each attempt is a Charge (`ch_...`) of a
PaymentIntent (`pi_...`); the simulator plays the buyer's browser too, confirming every intent at
once with a test card. The HTTP API is loadtest/provider_sim/stripe_api.py."""

import hashlib
import secrets
import time
from typing import Any

from engine.model.signing import sign
from loadtest.provider_sim.attempt import Attempt
from loadtest.provider_sim.charges import Simulator

API_VERSION = "2026-10-28.endive"  # what the stripe library in use speaks
SIGNATURE_HEADER = "Stripe-Signature"
# The simulator's facts, in Stripe's event types.
EVENT_TYPES = {
    "charge.captured": "payment_intent.succeeded",
    "charge.declined": "payment_intent.payment_failed",
    "charge.failed": "payment_intent.payment_failed",
    "refund.succeeded": "charge.refunded",
    "refund.updated": "charge.refund.updated",
    "charge.dispute.created": "charge.dispute.created",
    "charge.dispute.closed": "charge.dispute.closed",
}
OUTCOMES: dict[str, dict[str, Any] | None] = {
    "captured": {"type": "authorized", "network_status": "approved_by_network",
                 "reason": None, "risk_level": "normal", "seller_message": "Payment complete."},
    "declined": {"type": "issuer_declined", "network_status": "declined_by_network",
                 "reason": "generic_decline", "risk_level": "normal",
                 "seller_message": "The bank did not return any further details."},
    "failed": {"type": "invalid", "network_status": "not_sent_to_network", "reason": None,
               "risk_level": "not_assessed", "seller_message": "The payment could not be sent."},
    "processing": None,
}  # fmt: skip
DISPUTE_STATUS = {"open": "needs_response", "won": "won", "lost": "lost"}


def payment_error(a: Attempt) -> dict[str, Any] | None:
    """The intent's `last_payment_error` after attempt `a` failed (None otherwise)."""
    if a.status == "declined":
        return {"type": "card_error", "code": "card_declined", "decline_code": "generic_decline",
                "message": "Your card was declined.", "charge": a.attempt_id}  # fmt: skip
    if a.status == "failed":
        return {"type": "api_error", "message": "The payment could not be processed.",
                "charge": a.attempt_id}  # fmt: skip
    return None


def focus(sim: Simulator, intent_id: str) -> Attempt:
    """The attempt an intent shows: the one captured, else the latest."""
    attempts = sim.by_intent[intent_id]
    return next((a for a in attempts if a.status == "captured"), attempts[-1])


# One secret per simulator process: an intent's client secret is the same on every read, as
# Stripe's is, and not guessable from its id.
_SECRET_KEY = secrets.token_bytes(16)


def client_secret(intent_id: str) -> str:
    digest = hashlib.blake2b(intent_id.encode(), key=_SECRET_KEY, digest_size=12).hexdigest()
    return f"{intent_id}_secret_{digest}"


def intent(a: Attempt) -> dict[str, Any]:
    """The PaymentIntent of attempt `a`, as it stands after `a`."""
    status = {"captured": "succeeded", "processing": a.stage or "processing"}.get(
        a.status, "requires_payment_method"
    )
    action = {"type": "use_stripe_sdk", "use_stripe_sdk": {"type": "three_d_secure_redirect"}}
    return {
        "id": a.intent_id, "object": "payment_intent", "amount": a.amount,
        "amount_capturable": 0,
        "amount_received": a.captured_amount if a.status == "captured" else 0,
        "automatic_payment_methods": None, "canceled_at": None, "cancellation_reason": None,
        "capture_method": "automatic",
        "client_secret": client_secret(a.intent_id),
        "confirmation_method": "automatic", "created": int(a.created_s),
        "currency": a.currency.lower(), "customer": None, "description": None,
        "last_payment_error": payment_error(a),
        "latest_charge": None if a.stage else a.attempt_id,  # no charge before the confirm
        "livemode": False, "metadata": dict(a.metadata),
        "next_action": action if status == "requires_action" else None,
        "payment_method": "pm_card_visa", "payment_method_types": ["card"],
        "status": status,
    }  # fmt: skip


def charge(a: Attempt) -> dict[str, Any]:
    captured = a.status == "captured"
    status = {"captured": "succeeded", "processing": "pending"}.get(a.status, "failed")
    error = payment_error(a) or {}
    return {
        "id": a.attempt_id, "object": "charge", "amount": a.amount,
        "amount_captured": a.captured_amount if captured else 0,
        "amount_refunded": a.refunded_amount,
        "balance_transaction": None, "captured": captured, "created": int(a.created_s),
        "currency": a.currency.lower(), "customer": None, "description": None,
        "disputed": bool(a.disputed), "failure_code": error.get("code"),
        "failure_message": error.get("message"), "livemode": False,
        "metadata": dict(a.metadata), "outcome": OUTCOMES.get(a.status), "paid": captured,
        "payment_intent": a.intent_id, "payment_method": "pm_card_visa",
        "refunded": a.refunded, "status": status,
    }  # fmt: skip


def refund(sim: Simulator, r: dict[str, Any]) -> dict[str, Any]:
    a = sim.by_attempt[r["attempt_id"]]
    return {
        "id": r["refund_id"], "object": "refund", "amount": r["amount"],
        "balance_transaction": None, "charge": a.attempt_id, "created": r["created"],
        "currency": a.currency.lower(), "metadata": dict(r.get("request_metadata") or {}),
        "payment_intent": a.intent_id, "reason": None, "status": r["status"],
    }  # fmt: skip


def dispute(a: Attempt) -> dict[str, Any]:
    return {
        "id": f"dp_{a.attempt_id}", "object": "dispute", "amount": a.captured_amount,
        "balance_transactions": [], "charge": a.attempt_id, "created": int(a.disputed_s),
        "currency": a.currency.lower(), "evidence": {}, "is_charge_refundable": False,
        "livemode": False, "metadata": {}, "payment_intent": a.intent_id,
        "reason": "general", "status": DISPUTE_STATUS.get(a.disputed, "needs_response"),
    }  # fmt: skip


class StripeWire:
    """The simulator's facts as Stripe events."""

    name, attempt_prefix, intent_prefix = "stripe", "ch_", "pi_"

    def event(
        self, sim: Simulator, kind: str, a: Attempt, data: dict[str, Any], overrides: dict[str, Any]
    ) -> dict[str, Any]:
        stripe_type = EVENT_TYPES.get(kind, kind)
        if stripe_type.startswith("payment_intent."):
            o = intent(a)
        elif stripe_type == "charge.refund.updated":
            o = refund(sim, data)
        elif stripe_type.startswith("charge.dispute."):
            o = dispute(a)
        else:
            o = charge(a)
        o.update(overrides.get("data", {}))
        o["metadata"] = {**o["metadata"], **overrides.get("metadata", {})}
        return {
            "id": sim.new_id("evt"), "object": "event", "api_version": API_VERSION,
            "created": int(time.time()), "data": {"object": o}, "livemode": False,
            "pending_webhooks": 1, "request": {"id": None, "idempotency_key": None},
            "type": stripe_type,
        }  # fmt: skip

    def signature(self, secret: str, body: bytes, timestamp: int) -> tuple[str, str]:
        return SIGNATURE_HEADER, sign(secret, body, timestamp)
