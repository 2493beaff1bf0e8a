"""The refund operations in the OpenAPI document (api/routes/refunds.py): part of an order given
back (ADR 0043), a person's "retry this refund", and the capture-to-refund bound that the
exceptions view reports. api/openapi.py adds them to its paths; the requests and answers are
declared as types (api/contract/refunds.py, admin.py RefundTimes; ADR 0054)."""

from typing import Any

from api.openapi_parts import (
    ADMIN,
    BODY,
    IDEMPOTENCY_KEY,
    PATHED,
    STORE,
    answer,
    json_body,
    operation,
)

RETRY_CODES = (*ADMIN, *BODY, *PATHED, *STORE, "charge_not_found", "not_refunding")
ORDER_REFUND_CODES = (
    *ADMIN, *BODY, *PATHED, *STORE, "hold_not_found", "hold_lost_in_recovery", "not_confirmed",
    "not_in_order", "idempotency_key_reused",
)  # fmt: skip

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
            parameters=[{**IDEMPOTENCY_KEY, "required": True}],
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
            body=json_body("RefundRetryRequest"),
        )
    },
}
