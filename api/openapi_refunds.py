"""The refund operations in the OpenAPI document (api/routes/admin.py): a person's "retry this
refund", and the capture-to-refund bound that the exceptions view reports. api/openapi.py adds
them to its paths and schemas."""

from typing import Any

from api.openapi_parts import (
    ADMIN,
    BODY,
    CHARGE_ID_EXAMPLE,
    CHARGE_STATE,
    PATHED,
    STORE,
    answer,
    json_body,
    nullable,
    operation,
    path,
    record,
)

INT: dict[str, Any] = {"type": "integer", "minimum": 0}
MS = {"type": "integer", "minimum": 0, "description": "milliseconds"}
RETRY_CODES = (*ADMIN, *BODY, *PATHED, *STORE, "charge_not_found", "not_refunding")

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
REFUND_TIMES = record(
    {
        "refunded": INT,
        "p50_ms": nullable(MS),
        "p99_ms": nullable(MS),
        "max_ms": nullable(MS),
        "waiting": INT,
        "oldest_waiting_ms": nullable(MS),
        "bound_ms": nullable(MS),
    },
    {
        "refunded": 31,
        "p50_ms": 219,
        "p99_ms": 1055,
        "max_ms": 1093,
        "waiting": 1,
        "oldest_waiting_ms": 412,
        "bound_ms": 1093,
    },
    description="From the moment a charge went REFUNDING (a late or contradicting capture, a "
    "cancelled sale) to its refund recorded, over the charges Redis still keeps; the refunds "
    "still open count with the time they have waited so far. bound_ms is the largest of both.",
)

REFUND_SCHEMAS: dict[str, dict[str, Any]] = {
    "RefundRetryRequest": REFUND_RETRY_REQUEST,
    "RefundRetried": REFUND_RETRIED,
    "RefundTimes": REFUND_TIMES,
}

REFUND_PATHS: dict[str, Any] = {
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
