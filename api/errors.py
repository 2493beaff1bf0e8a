"""The single map from error codes to HTTP status, and the JSON error body."""

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from api.logs import request_id_from
from engine.config.logs import REQUEST_ID
from engine.model import errors as e
from engine.views.seatmap import BoardFull, SeatMapTooLarge
from engine.views.sections import SectionsInterleaved
from engine.waiting import errors as w


class ApiError(Exception):
    """An error raised by the HTTP layer itself (bad input, auth)."""

    def __init__(self, status: int, code: str, message: str, retry_after_s: int = 0) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.retry_after_s = retry_after_s  # 429: when to try again


STATUS: dict[str, int] = {
    "invalid_request": 400,
    "unauthorized": 401,
    "token_revoked": 401,
    "token_scope": 403,
    "login_disabled": 404,
    "identity_unavailable": 503,
    e.RateLimited.code: 429,
    e.LimitExceeded.code: 409,
    "bad_signature": 401,
    e.NotOwner.code: 403,
    e.HoldNotFound.code: 404,
    e.HoldLost.code: 410,
    e.EventNotFound.code: 404,
    e.ChargeNotFound.code: 404,
    e.UnknownSeat.code: 404,
    "not_found": 404,
    "method_not_allowed": 405,
    e.SoldOut.code: 409,
    e.NotEnoughSeats.code: 409,
    e.PartyTooLarge.code: 400,
    e.WrongKind.code: 400,
    e.UnknownSku.code: 404,
    e.UnknownLocation.code: 404,
    e.InsufficientStock.code: 409,
    e.StockBelowZero.code: 409,
    e.CorrectionIdReused.code: 409,
    SectionsInterleaved.code: 409,
    SeatMapTooLarge.code: 409,  # the seat map pages (ADR 0028)
    BoardFull.code: 503,
    "not_acceptable": 406,  # a seat map stream asked for without Accept: text/event-stream
    e.SeatTaken.code: 409,
    # The waiting room (api/routes/waiting.py, ADR 0029).
    w.NoWaitingRoom.code: 404,
    w.NotInQueue.code: 404,
    w.QueueFull.code: 409,
    w.AdmissionRequired.code: 403,
    w.AdmissionInvalid.code: 403,
    w.AdmissionUsed.code: 409,
    w.AdmissionExpired.code: 409,
    e.HoldExpired.code: 409,
    e.AlreadyConfirmed.code: 409,
    e.HoldRevoked.code: 409,
    e.NotConfirmed.code: 409,
    e.NotInOrder.code: 409,
    e.ChargeCaptured.code: 409,
    e.ChargeNotInFlight.code: 409,
    e.ChargeInFlight.code: 409,
    e.NotAnException.code: 409,
    e.NotRefunding.code: 409,
    e.SaleNotOpen.code: 409,
    e.SaleClosed.code: 409,
    # Presale access codes (ADR 0049).
    e.AccessCodeRequired.code: 403,
    e.AccessCodeInvalid.code: 403,
    e.AccessCodeUsedUp.code: 409,
    e.AccessCodeLimit.code: 409,
    e.PresaleMismatch.code: 409,
    e.AccessCodeExists.code: 409,
    e.AlreadyOpen.code: 409,
    e.DetailsFixed.code: 409,  # details are set while a draft (ADR 0041)
    "not_changeable": 409,  # a PATCH of what the create fixed (api/routes/events.py)
    e.SaleStarted.code: 409,
    e.BadCursor.code: 400,
    e.EventExists.code: 409,
    "body_too_large": 413,
    "unsupported_media_type": 415,
    e.IdempotencyKeyReused.code: 422,
    e.StoreUnavailable.code: 503,
    "not_yet_durable": 503,
    e.Recovering.code: 503,
    "provider_unavailable": 502,
    "provider_not_answering": 503,  # a callback's provider lookup timed out: it retries
    # Merchant webhooks (api/routes/webhooks.py, ADR 0024).
    "invalid_webhook_url": 400,
    "unknown_event_type": 400,
    "webhook_endpoint_not_found": 404,
    "webhook_delivery_not_found": 404,
    "webhook_endpoint_disabled": 409,
    "too_many_webhook_endpoints": 409,
    "webhooks_unavailable": 503,
    "orders_unavailable": 503,  # GET /v1/me/orders without the ledger database
}


def request_id(request: Request) -> str:
    """The request's id (api/logs.py): the one its answer's X-Request-Id header and its log
    lines carry."""
    return REQUEST_ID.get() or request_id_from(request.scope.get("headers", ()))


def error_response(
    request: Request, code: str, message: str, status: int | None = None, **extra: Any
) -> Response:
    status = status or STATUS.get(code, 500)
    rid = request_id(request)
    headers = {"X-Request-Id": rid, "Retry-After": "1"} if status == 503 else {"X-Request-Id": rid}
    if status == 429:  # when to try again: a header, as RFC 9110 has it
        headers["Retry-After"] = str(max(1, int(extra.pop("retry_after_s", 1))))
    body: dict[str, Any] = {"code": code, "message": message, "request_id": rid}
    body.update(extra)
    return Response(
        orjson.dumps({"error": body}),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


def from_engine(request: Request, exc: e.EngineError) -> Response:
    """The client is told the error's summary and its public details, never its message
    (engine/model/errors.py)."""
    if isinstance(exc, e.RateLimited):
        wait_ms = int(str(exc.details.get("retry_after_ms", 1000)))
        return error_response(request, exc.code, exc.summary, retry_after_s=-(-wait_ms // 1000))
    return error_response(request, exc.code, exc.summary, **exc.public_details())
