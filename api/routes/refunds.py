"""Refunds an operator makes (admin token): part of a confirmed order given back, or all of it
(ADR 0043), and "retry this refund now" for one waiting on the provider."""

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from api.context import admin_post, ctx, endpoint, path_id
from api.contract import refunds as contract
from api.contract.atoms import fields_of
from api.errors import ApiError
from api.refund_now import refund_after
from api.responses import json_response, read_json
from api.routes.stock import cart_of
from api.validate import LIMITS, idempotency_key, ident, obj, only, text
from engine.model import keys
from engine.model.states import ChargeState
from engine.model.stock_lines import StockLine
from engine.model.webhooks import goods

RETRY_FIELDS = fields_of(contract.RefundRetryRequest)
ORPHAN = "orphan/"  # money we could not tie to a charge: its id is the provider's attempt's
REFUND_FIELDS = fields_of(contract.OrderRefundRequest)
SEATS_MAX = int(LIMITS["quantity"].high)  # a party's seats: the most one order holds


def refunded_goods(body: dict[str, Any]) -> tuple[list[str] | None, list[StockLine] | None]:
    """The seats (`seat_ids`) or stock lines (`lines`, each naming its location) given back."""
    if ("seat_ids" in body) == ("lines" in body):
        raise ApiError(400, "invalid_request", "send one of seat_ids, lines")
    if "lines" in body:
        lines = list(cart_of(body["lines"], int(LIMITS["lines"].high)))
        if any(not line.location for line in lines):
            raise ApiError(400, "invalid_request", "each line must name its location")
        return None, lines
    seats = body["seat_ids"]
    if not isinstance(seats, list) or not 1 <= len(seats) <= SEATS_MAX:
        raise ApiError(400, "invalid_request", f"seat_ids must list 1 to {SEATS_MAX} seats")
    if len(set(map(str, seats))) != len(seats):
        raise ApiError(400, "invalid_request", "seat_ids must not repeat a seat")
    return [ident({"seat": s}, "seat") or "" for s in seats], None


@endpoint("admin_refund_order")
async def refund_order(request: Request) -> Response:
    """Give back part of a confirmed order (some of its seats, or units of its cart's lines) or
    all that is left of it, for a reason: exactly those goods' price is refunded, they go back
    on sale, the order keeps the rest. The Idempotency-Key header is required: the same key is
    the same refund (answered again, nothing twice), with other goods 422
    idempotency_key_reused."""
    c = ctx(request)
    c.require_admin(request)
    event_id, hold_id = path_id(request, "event_id"), path_id(request, "hold_id")
    key = idempotency_key(request.headers.get("idempotency-key"), "")
    if not key:
        raise ApiError(400, "invalid_request", "a refund needs an Idempotency-Key header")
    body = obj(await read_json(request, c.settings.body_max_bytes))
    only(body, REFUND_FIELDS, "refund")
    seat_ids, lines = refunded_goods(body)
    reason = text(body, "reason")
    done = await c.store.order_refunds.refund(
        event_id, hold_id, key, seat_ids=seat_ids, lines=lines, reason=reason
    )
    h = await c.store.read.hold(event_id, hold_id)
    answer: contract.OrderRefunded = {
        "hold_id": hold_id,
        "charge_id": done.charge_id,
        "state": ChargeState.REFUNDING,
        "amount": done.amount,
        "whole": done.whole,
        "replay": done.replay,
        "hold_state": h.state,
        "kept": kept_view(h.listing if not done.whole else ""),
    }
    if done.replay:
        return json_response(answer, 200)
    return refund_after(json_response(answer, 202), c, event_id, done.charge_id)


@endpoint("admin_retry_refund")
async def retry_refund(request: Request) -> Response:
    """A person's "retry this refund now": a refund waiting for its next attempt (after the
    provider timed out or refused) is made due at once, and a parked one is unparked. The refund
    worker still asks the provider whose money it is before refunding, so a retry cannot return
    money that is not this charge's; a disowned refund is parked again. Idempotent. Only for a
    charge in REFUNDING (409 not_refunding, with its state, otherwise)."""
    c, _admin, event_id, body = await admin_post(request, RETRY_FIELDS, "refund retry")
    charge_id = body.get("charge_id")
    if not isinstance(charge_id, str) or not keys.valid_charge_id(charge_id.removeprefix(ORPHAN)):
        raise ApiError(400, "invalid_request", "charge_id must be a charge id (orphan/ allowed)")
    attempts, was_parked = await c.store.retry_refund(event_id, charge_id)
    answer: contract.RefundRetried = {
        "charge_id": charge_id,
        "state": ChargeState.REFUNDING,
        "due_now": True,
        "refund_attempts": attempts,
        "was_parked": was_parked,
    }
    return json_response(answer)


def kept_view(listing: str) -> contract.GoodsKept:
    """What the order holds now, as its order shows it (engine/model/webhooks.py goods): seat
    ids, or a stock hold's lines."""
    kept = goods(listing)
    return {"lines": kept["lines"]} if "lines" in kept else {"seat_ids": kept["seat_ids"]}
