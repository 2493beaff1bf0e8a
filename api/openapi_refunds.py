"""The refund operations in the OpenAPI document (api/routes/refunds.py): part of an order given
back (ADR 0043), a person's "retry this refund", and the capture-to-refund bound that the
exceptions view reports. api/openapi.py adds them to its paths and schemas."""

from typing import Any

from api.openapi_parts import (
    ADMIN,
    BODY,
    CHARGE_ID_EXAMPLE,
    CHARGE_STATE,
    HOLD_ID,
    HOLD_STATE,
    ID,
    IDEMPOTENCY_KEY,
    PATHED,
    STOCK_ID,
    STORE,
    answer,
    array,
    json_body,
    limit,
    operation,
    path,
    record,
    ref,
)
from api.validate import LIMITS

INT: dict[str, Any] = {"type": "integer", "minimum": 0}
MS = {"type": "integer", "minimum": 0, "description": "milliseconds"}
RETRY_CODES = (*ADMIN, *BODY, *PATHED, *STORE, "charge_not_found", "not_refunding")
ORDER_REFUND_CODES = (
    *ADMIN, *BODY, *PATHED, *STORE, "hold_not_found", "hold_lost_in_recovery", "not_confirmed",
    "not_in_order", "idempotency_key_reused",
)  # fmt: skip
REFUND_LINE = record(
    {"sku": STOCK_ID, "location": STOCK_ID, "quantity": limit("line_quantity")},
    {"sku": "wheel-700c", "location": "east", "quantity": 1},
    closed=True,
    description="Units of one of the order's lines, from the location it was taken from.",
)
ORDER_REFUND_REQUEST = record(
    {
        "seat_ids": array(ID, minItems=1, maxItems=int(LIMITS["quantity"].high), uniqueItems=True),
        "lines": limit("lines", items=ref("RefundLine")),
        "reason": limit("reason"),
    },
    {"seat_ids": ["B-3-5"], "reason": "seat broken; the buyer keeps the other three"},
    optional=("seat_ids", "lines"),
    closed=True,
    description="One of seat_ids (seats of the order) or lines (units of the cart's lines).",
)
GOODS_KEPT = record(
    {"seat_ids": array({"type": "string"}), "lines": array(ref("HeldLine"))},
    {"seat_ids": ["B-3-6", "B-3-7", "B-3-8"]},
    optional=("seat_ids", "lines"),
    description="What the order holds now: its seats, or a cart's lines.",
)
ORDER_REFUNDED = record(
    {
        "hold_id": {"type": "string"},
        "charge_id": {
            "type": "string",
            "description": "the part's own charge ('<order's charge>:r<12 hex>'), or the "
            "order's charge when the whole rest was given back",
        },
        "state": CHARGE_STATE,
        "amount": {**INT, "description": "minor units this refund gives back"},
        "whole": {"type": "boolean", "description": "the whole rest: the hold is REVOKED"},
        "replay": {"type": "boolean", "description": "made before with this key; nothing new"},
        "hold_state": HOLD_STATE,
        "kept": ref("GoodsKept"),
    },
    {
        "hold_id": HOLD_ID,
        "charge_id": CHARGE_ID_EXAMPLE + ":r5c0e1d2a3b4f",
        "state": "REFUNDING",
        "amount": 4500,
        "whole": False,
        "replay": False,
        "hold_state": "CONFIRMED",
        "kept": {"seat_ids": ["B-3-6", "B-3-7", "B-3-8"]},
    },
)

REFUND_RETRY_REQUEST = record(
    {
        "charge_id": {
            "type": "string",
            "pattern": "^(orphan/)?[A-Za-z0-9_.:-]{1,64}(~[0-9a-f]{24})?$",
            "description": "a charge id, or an orphan's (orphan/<the provider's attempt id>)",
        }
    },
    {"charge_id": CHARGE_ID_EXAMPLE},
    closed=True,
)
REFUND_RETRIED = record(
    {
        "charge_id": {"type": "string"},
        "state": CHARGE_STATE,
        "due_now": {"type": "boolean"},
        "refund_attempts": INT,
        "was_parked": {"type": "boolean"},
    },
    {
        "charge_id": CHARGE_ID_EXAMPLE,
        "state": "REFUNDING",
        "due_now": True,
        "refund_attempts": 3,
        "was_parked": False,
    },
    description="The refund is due now; the refund worker makes it on its next pass, after "
    "asking the provider whose money it is.",
)
REFUND_SCHEMAS: dict[str, dict[str, Any]] = {
    "RefundLine": REFUND_LINE,
    "OrderRefundRequest": ORDER_REFUND_REQUEST,
    "GoodsKept": GOODS_KEPT,
    "OrderRefunded": ORDER_REFUNDED,
    "RefundRetryRequest": REFUND_RETRY_REQUEST,
    "RefundRetried": REFUND_RETRIED,
}

REFUND_PATHS: dict[str, Any] = {
    "/v1/admin/events/{event_id}/holds/{hold_id}/refunds": {
        "post": operation(
            "refundOrder",
            "Give back part of an order, or all of it",
            {
                **answer(202, "OrderRefunded", "given back: the refund is on its way"),
                **answer(200, "OrderRefunded", "this key's refund, made before (replay)"),
            },
            ORDER_REFUND_CODES,
            description="Some seats of a confirmed order, or units of its cart's lines, are "
            "given back for a reason: exactly their price is refunded (a part of the order, a "
            "charge of its own on the order's provider payment), they go back on sale at once, "
            "and the order keeps the rest; naming all that is left gives the whole rest back "
            "and the hold is REVOKED. The merchant's webhooks say order.partially_refunded "
            "when the part's money is back. Only a CONFIRMED order whose money we hold (409 "
            "not_confirmed); a seat or line it does not hold is 409 not_in_order. The "
            "Idempotency-Key header is required: the same key is the same refund, with other "
            "goods 422 idempotency_key_reused.",
            parameters=[path("event_id"), path("hold_id"), {**IDEMPOTENCY_KEY, "required": True}],
            body=json_body("OrderRefundRequest"),
        )
    },
    "/v1/admin/events/{event_id}/refunds/retry": {
        "post": operation(
            "retryRefund",
            "Retry a refund now",
            answer(200, "RefundRetried", "due now (idempotent)"),
            RETRY_CODES,
            description="A refund waiting for its next attempt (the provider timed out or "
            "refused) is made due at once; a parked one (the provider's records disowned it) "
            "is unparked. The refund worker still asks the provider whose money it is before "
            "refunding, so a retry never returns money that is not this charge's. Only for a "
            "charge in REFUNDING; anything else is 409 not_refunding.",
            parameters=[path("event_id")],
            body=json_body("RefundRetryRequest"),
        )
    },
}
