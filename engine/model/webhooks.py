"""Merchant notifications (ADR 0024): which outbox records a merchant is told about, what each
notification says, its stable id, and how a delivery is signed (Standard Webhooks).

The mapping, from the record the ledger writer mirrors to the notification it fans out in the
same transaction (nothing else is ever notified):

| outbox record (kind, from -> to) | notification |
|---|---|
| charge, CHARGING -> CAPTURED, terminal (the sale's last record, ADR 0016) | `order.confirmed` |
| charge -> REFUNDED, PROVIDER_REFUNDED, CHARGED_BACK, of a charge that won | `order.refunded` |
| hold, CONFIRMED -> EXCEPTION (the order's money left, or is disputed) | `exception.opened` |
| hold, EXCEPTION -> REVOKED (operator, or a lost dispute under `revoke`) | `exception.resolved` |
| hold, EXCEPTION -> CONFIRMED (a dispute won: reinstated) | `exception.resolved` |
| hold, CONFIRMED -> REVOKED (money left under `reversal_policy: revoke`) | `order.revoked` |
| charge -> REFUNDED, a part of an order whose charge won (ADR 0043) | `order.partially_refunded` |
| correction (a stock event's on-hand count set or adjusted) | `stock.corrected` |

"Won its hold" is read from the ledger when the row is written: the charge's terminal CAPTURED
record is there (a refund record of the refund worker does not name the hold's winner). A
capture that never won (late, after a decline, of other money) is money given back, not an
order: the merchant is not told about it."""

import base64
import hashlib
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from standardwebhooks.webhooks import Webhook

from engine.model.keys import part_parent
from engine.model.orders import order_number
from engine.model.records import OutboxRecord, RecordKind
from engine.model.states import ChargeState, HoldState
from engine.model.stock_lines import lines_of

ORDER_CONFIRMED = "order.confirmed"
ORDER_REFUNDED = "order.refunded"
ORDER_REVOKED = "order.revoked"
ORDER_PARTIALLY_REFUNDED = "order.partially_refunded"
EXCEPTION_OPENED = "exception.opened"
EXCEPTION_RESOLVED = "exception.resolved"
STOCK_CORRECTED = "stock.corrected"
EVENT_TYPES: tuple[str, ...] = (
    ORDER_CONFIRMED,
    ORDER_REFUNDED,
    ORDER_REVOKED,
    ORDER_PARTIALLY_REFUNDED,
    EXCEPTION_OPENED,
    EXCEPTION_RESOLVED,
    STOCK_CORRECTED,
)
# Who gave the order's money back, by the charge's state.
REFUNDED_BY: Mapping[str, str] = {
    ChargeState.REFUNDED: "merchant",  # our refund (a dispute won after the seat was taken back)
    ChargeState.PROVIDER_REFUNDED: "provider",  # from the provider's side (its dashboard)
    ChargeState.CHARGED_BACK: "chargeback",  # a dispute the buyer won
}
SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32  # Standard Webhooks: at least 24 random bytes, base64, prefixed whsec_
SIGNATURE_HEADER = "webhook-signature"


@dataclass(frozen=True, slots=True)
class Notification:
    """What one decision tells the merchant. `needs_winner`: the charge id whose win the
    ledger must hold for the notification to exist ('' : none needed)."""

    event_type: str
    event_id: str
    decision_id: str
    decided_ms: int
    data: dict[str, Any]
    needs_winner: str = ""

    @property
    def message_id(self) -> str:
        return message_id(self.event_id, self.decision_id)

    def body(self, currency: str) -> str:
        """The delivery's body, fixed when the ledger writes it (every attempt sends the same
        bytes): Standard Webhooks' `type`, `timestamp` (when it was decided) and `data`."""
        data = dict(self.data)
        if "amount" in data:
            data["currency"] = currency
        payload = {"type": self.event_type, "timestamp": iso_ms(self.decided_ms), "data": data}
        return orjson.dumps(payload).decode()


def message_id(event_id: str, decision_id: str) -> str:
    """The notification's `webhook-id`: the same for every attempt, every endpoint and every
    replay, derived from the decision (the merchant's deduplication key)."""
    digest = hashlib.sha256(f"{event_id}\n{decision_id}".encode()).digest()[:20]
    return "msg_" + base64.b32encode(digest).decode().lower()


def iso_ms(ms: int) -> str:
    """A server-clock time in ms as ISO 8601 UTC, to the millisecond (exactly: no float)."""
    at = datetime.fromtimestamp(ms // 1000, tz=UTC).replace(microsecond=ms % 1000 * 1000)
    return at.isoformat(timespec="milliseconds").removesuffix("+00:00") + "Z"


def goods(seat_field: str) -> dict[str, Any]:
    """What a hold owns, as its order shows it: seat ids, or a stock hold's lines."""
    lines = lines_of(seat_field) if seat_field else ()
    if lines:
        return {
            "lines": [{"sku": x.sku, "location": x.location, "quantity": x.quantity} for x in lines]
        }
    return {"seat_ids": [s for s in seat_field.split(",") if s]}


def _common(r: OutboxRecord) -> dict[str, Any]:
    return {"event_id": r.event_id, "decision_id": r.decision_id, "seq": r.seq}


def _order(r: OutboxRecord, charge_id: str) -> dict[str, Any]:
    return {
        **_common(r),
        "hold_id": r.hold_id,
        "order_number": order_number(r.event_id, r.hold_id),  # ADR 0042
        "charge_id": charge_id,
        "buyer": r.login,
        **goods(r.seat_id),
        "reason": r.reason,
    }


def _charge_notification(r: OutboxRecord) -> tuple[str, dict[str, Any], str] | None:
    money = r.captured or r.amount
    parent = part_parent(r.entity_id)
    if parent is not None:  # a part of the order: told once its money is back
        if r.to_state != ChargeState.REFUNDED:
            return None
        return ORDER_PARTIALLY_REFUNDED, {**_order(r, parent), "amount": money}, parent
    if r.to_state == ChargeState.CAPTURED and r.terminal:
        return ORDER_CONFIRMED, {**_order(r, r.entity_id), "amount": money}, ""
    if r.to_state in REFUNDED_BY:  # the rest, when parts of the order went back before
        data = {**_order(r, r.entity_id), "amount": r.returned,
                "refunded_by": REFUNDED_BY[r.to_state]}  # fmt: skip
        return ORDER_REFUNDED, data, r.entity_id
    return None


def _hold_notification(r: OutboxRecord) -> tuple[str, dict[str, Any], str] | None:
    """The order's data is built only for a record that notifies: the ledger writer asks this
    of every hold decision, expiries by the thousand included."""
    was, now = r.from_state, r.to_state
    if was == HoldState.CONFIRMED and now == HoldState.EXCEPTION:
        return EXCEPTION_OPENED, _order(r, r.winner), ""
    if was == HoldState.EXCEPTION and now in (HoldState.REVOKED, HoldState.CONFIRMED):
        resolution = "revoked" if now == HoldState.REVOKED else "reinstated"
        return EXCEPTION_RESOLVED, {**_order(r, r.winner), "resolution": resolution}, ""
    if was == HoldState.CONFIRMED and now == HoldState.REVOKED:
        return ORDER_REVOKED, _order(r, r.winner), ""
    return None


def _correction_notification(r: OutboxRecord) -> tuple[str, dict[str, Any], str]:
    sku, _, location = r.seat_id.partition("@")
    data = {
        **_common(r),
        "correction_id": r.entity_id,
        "sku": sku,
        "location": location,
        "mode": r.mode,
        "value": r.value,
        "on_hand_before": int(r.from_state),
        "on_hand_after": int(r.to_state),
        "reason": r.reason,
        "operator": r.login,
    }
    return STOCK_CORRECTED, data, ""


def notification_of(r: OutboxRecord) -> Notification | None:
    """The notification a mirrored record makes (the table above), or None."""
    found: tuple[str, dict[str, Any], str] | None = None
    if r.kind == RecordKind.CHARGE:
        found = _charge_notification(r)
    elif r.kind == RecordKind.HOLD:
        found = _hold_notification(r)
    elif r.kind == RecordKind.CORRECTION:
        found = _correction_notification(r)
    if found is None:
        return None
    event_type, data, needs_winner = found
    return Notification(event_type, r.event_id, r.decision_id, r.decided_ms, data, needs_winner)


def new_secret() -> str:
    """An endpoint's signing secret, shown to the merchant once."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def signed_headers(
    msg_id: str, body: str, secrets_in_use: Sequence[str], at: datetime
) -> dict[str, str]:
    """The Standard Webhooks headers of one attempt: its id, the attempt's time (unix seconds)
    and one `v1` signature per secret in use (the current one, and during a rotation the
    previous one too), space-separated: a merchant accepts any one that verifies."""
    signatures = [Webhook(s).sign(msg_id, at, body) for s in secrets_in_use if s]
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(at.timestamp())),
        SIGNATURE_HEADER: " ".join(signatures),
        "content-type": "application/json",
    }
