"""Admin (create event, open sale, revoke a seat whose money left) and ops (the exceptions
view). Admin token required."""

import re

from starlette.requests import Request
from starlette.responses import Response

from api.context import ctx, endpoint, path_id
from api.errors import ApiError
from api.responses import json_response, read_json
from api.validate import ident, integer, obj
from engine.holds import Alert, Charge, Hold, SeatSpec
from engine.states import ChargeState, HoldState, LatePolicy, ReversalPolicy

SEATS_MAX = 1_000_000
CURRENCY_RE = re.compile(r"^[A-Z]{3}$")
ALERTS_SHOWN_MAX = 500


@endpoint("admin_create_event")
async def create_event(request: Request) -> Response:
    c = ctx(request)
    c.require_admin(request)
    body = obj(await read_json(request, c.settings.admin_body_max_bytes))
    event_id = ident(body, "event_id")
    assert event_id is not None
    policy_raw = body.get("policy", LatePolicy.QUARANTINE.value)
    if policy_raw not in {p.value for p in LatePolicy}:
        raise ApiError(400, "invalid_request", "policy must be quarantine or release_refund")
    reversal_raw = body.get("reversal_policy", ReversalPolicy.MANUAL.value)
    if reversal_raw not in {p.value for p in ReversalPolicy}:
        raise ApiError(400, "invalid_request", "reversal_policy must be manual or revoke")
    currency = body.get("currency", "EUR")
    if not isinstance(currency, str) or not CURRENCY_RE.match(currency):
        raise ApiError(400, "invalid_request", "currency must be an ISO 4217 code such as EUR")
    seats_raw = body.get("seats")
    if not isinstance(seats_raw, list) or not 1 <= len(seats_raw) <= SEATS_MAX:
        raise ApiError(400, "invalid_request", f"seats must be a list of 1..{SEATS_MAX} seats")
    seats: list[SeatSpec] = []
    seen: set[str] = set()
    for n, raw in enumerate(seats_raw):
        seat = obj(raw)
        seat_id = ident(seat, "seat_id")
        assert seat_id is not None
        if seat_id in seen:
            raise ApiError(400, "invalid_request", f"seat {seat_id} appears twice")
        seen.add(seat_id)
        rank = seat.get("rank", n)
        if isinstance(rank, bool) or not isinstance(rank, int | float):
            raise ApiError(400, "invalid_request", f"rank of {seat_id} must be a number")
        section = seat.get("section", "")
        if not isinstance(section, str) or len(section) > 64:
            raise ApiError(400, "invalid_request", f"section of {seat_id} must be a short string")
        seats.append(SeatSpec(seat_id, float(rank), section))
    n_seats = await c.store.create_event(
        event_id,
        seats,
        hold_ttl_ms=integer(body, "hold_ttl_ms", default=480_000, low=1_000, high=86_400_000),
        quarantine_ms=integer(
            body, "quarantine_ms", default=900_000, low=1_000, high=7 * 86_400_000
        ),
        policy=LatePolicy(policy_raw),
        price_minor=integer(body, "price_minor", default=0, high=10**12),
        currency=currency,
        reversal_policy=ReversalPolicy(reversal_raw),
    )
    opens_at = body.get("opens_at_ms")
    if opens_at is not None:
        await c.store.open_sale(event_id, integer(body, "opens_at_ms"))
    return json_response({"event_id": event_id, "seats": n_seats}, 201)


@endpoint("admin_open_sale")
async def open_sale(request: Request) -> Response:
    c = ctx(request)
    c.require_admin(request)
    event_id = path_id(request, "event_id")
    body = obj(await read_json(request, c.settings.body_max_bytes, allow_empty=True))
    opens_at = await c.store.open_sale(event_id, integer(body, "opens_at_ms", default=0))
    return json_response({"event_id": event_id, "opens_at_ms": opens_at})


@endpoint("admin_revoke_hold")
async def revoke_hold(request: Request) -> Response:
    """Take back the seat of a hold in EXCEPTION (its money left at the provider): the seat goes
    back on sale. Only for holds in EXCEPTION; anything else is 409 not_an_exception."""
    c = ctx(request)
    c.require_admin(request)
    event_id, hold_id = path_id(request, "event_id"), path_id(request, "hold_id")
    await c.store.revoke_hold(event_id, hold_id, "admin")
    h = await c.store.read.hold(event_id, hold_id)
    return json_response({"hold_id": hold_id, "state": h.state, "seat_id": h.seat_id})


def charge_view(ch: Charge) -> dict[str, object]:
    return {
        "charge_id": ch.charge_id,
        "hold_id": ch.hold_id or None,
        "state": ch.state,
        "amount": ch.amount,
        "reason": ch.reason or None,
        "refund_attempts": ch.refund_attempts,
        "attempt_id": ch.attempt_id or None,
        "captured": ch.captured,
        "parked": ch.parked,
    }


def money_views(charges: list[Charge], refunds_due: set[str]) -> dict[str, object]:
    """Money without a seat and where its refund stands."""
    return {
        "captured_without_seat": [
            charge_view(ch)
            for ch in charges
            if ch.state in (ChargeState.REFUNDING, ChargeState.REFUNDED)
        ],
        "refunds_pending": [
            charge_view(ch)
            for ch in charges
            if ch.charge_id in refunds_due and ch.refund_attempts == 0
        ],
        "refunds_retrying": [
            charge_view(ch)
            for ch in charges
            if ch.charge_id in refunds_due and ch.refund_attempts > 0
        ],
        "refunds_parked": [charge_view(ch) for ch in charges if ch.parked],
        "disputes": [
            charge_view(ch)
            for ch in charges
            if ch.state in (ChargeState.DISPUTED, ChargeState.CHARGED_BACK)
        ],
    }


def after_sale_views(holds: dict[str, Hold], charges: list[Charge]) -> dict[str, object]:
    """Sold seats whose money left at the provider (its own refund, a dispute): still assigned
    (revoke it, or wait for the dispute's outcome), or taken back; and the money invariant's
    right-hand side: what the provider should hold for this event."""
    by_charge = {ch.charge_id: ch for ch in charges}
    return {
        "seats_without_money": [
            {
                "hold_id": h.hold_id,
                "seat_id": h.seat_id,
                "login": h.login,
                "reason": h.reason,
                "winner": charge_view(by_charge[h.winner]) if h.winner in by_charge else None,
            }
            for h in holds.values()
            if h.state == HoldState.EXCEPTION
        ],
        "revoked": [
            {"hold_id": h.hold_id, "seat_id": h.seat_id, "reason": h.reason}
            for h in holds.values()
            if h.state == HoldState.REVOKED
        ],
        "money": {
            "sold_seats_value": sum(
                by_charge[h.winner].holds_money
                for h in holds.values()
                if h.state == HoldState.CONFIRMED and h.winner in by_charge
            ),
            "to_refund": sum(ch.holds_money for ch in charges if ch.state == ChargeState.REFUNDING),
            "provider_should_hold": sum(ch.holds_money for ch in charges),
        },
    }


def alert_view(a: Alert) -> dict[str, object]:
    return {
        "alert_id": a.alert_id,
        "reason": a.reason,
        "at_ms": a.at_ms,
        "charge_id": a.charge_id or None,
        "hold_id": a.hold_id or None,
        "claimed": a.detail,
    }


@endpoint("ops_exceptions")
async def exceptions(request: Request) -> Response:
    """What the business must look at: captured money without a seat and its refund state,
    refunds pending, retrying or parked, seats whose money left, disputes, provider messages
    refused (alerts), blocked seats and their deadlines, old in-flight charges."""
    c = ctx(request)
    c.require_admin(request)
    event_id = path_id(request, "event_id")
    raw = request.query_params.get("charging_older_than_ms", "300000")
    if not raw.isdigit():
        raise ApiError(400, "invalid_request", "charging_older_than_ms must be an integer")
    await c.store.read.availability(event_id)  # 404 for an unknown event
    now = await c.store.read.server_time_ms()
    charges = await c.store.read.scan_charges(event_id)
    refunds_due = set(await c.store.read.due_refunds(event_id, 2**62))
    holds = await c.store.read.holds(event_id)
    return json_response(
        {
            "event_id": event_id,
            "server_time_ms": now,
            **money_views(charges, refunds_due),
            **after_sale_views(holds, charges),
            "alerts": [
                alert_view(a) for a in await c.store.read.alerts(event_id, ALERTS_SHOWN_MAX)
            ],
            "blocked_seats": [
                {
                    "hold_id": h.hold_id,
                    "seat_id": h.seat_id,
                    "state": h.state,
                    "until_ms": h.until_ms,
                    "charge_id": h.charge_in_flight or h.blocking_charge,
                }
                for h in await c.store.read.quarantined(event_id)
            ],
            "charging_too_long": [
                charge_view(ch)
                for ch in charges
                if ch.state == ChargeState.CHARGING and now - ch.created_ms > int(raw)
            ],
        }
    )
