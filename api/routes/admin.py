"""Admin (create a seat or stock event, open sale, revoke a seat whose money left) and ops (the
exceptions view, with the capture-to-refund bound). Admin token required. Stock corrections are
in api/routes/stock.py, refunds an operator makes in api/routes/refunds.py."""

import re
from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from api.context import admin_post, ctx, endpoint, path_id
from api.contract import admin as admin_answers
from api.contract import event_setup as setup
from api.contract.atoms import fields_of
from api.errors import ApiError
from api.responses import json_response, parse_json, read_body
from api.routes.events import EVENT_FIELDS, details_of
from api.routes.seatmap import price_table, seat_layout, seat_price
from api.routes.stock import NewStock, new_stock
from api.validate import (
    LIMITS,
    SEATS_MAX,
    SECTION_CHARS_MAX,
    ident,
    number,
    obj,
    one_of,
    only,
    query_integer,
    whole,
)
from engine.model.event_config import EventConfig
from engine.model.holds import Alert, Charge, Hold, SeatSpec
from engine.model.states import ChargeState, HoldState, LatePolicy, ReversalPolicy
from engine.store.event_catalogue import describe
from engine.views.seatmap import SeatPlace, save_layout

CURRENCY_RE = re.compile(r"^[A-Z]{3}$")
ALERTS_SHOWN_MAX = 500
KINDS = ("seats", "stock")
STOCK_ONLY = ("locations", "skus")
SEAT_FIELDS = fields_of(setup.SeatSpec)  # with its place on the map (ADR 0028)
OPEN_FIELDS = fields_of(setup.OpenSaleRequest)


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An admin's create request, checked whole: nothing is written before all of it passed."""

    event_id: str
    seats: list[SeatSpec]
    config: EventConfig  # the terms it sells under
    price_minor: int
    opens_at_ms: int | None  # None: stays a DRAFT
    stock: NewStock | None = None  # a stock event's locations and SKUs (then no seats)
    places: list[SeatPlace] | None = None  # the drawn map, rank order (None: too large to draw)
    details: dict[str, Any] | None = None  # name, venue, ... (ADR 0041)
    price_levels: dict[str, int] | None = None  # level -> price (None: levels are display only)


def new_event(raw: bytes, content_type: str | None) -> NewEvent:
    """Parse and check the whole create request. CPU only, and most of a second for an 8 MiB
    seat map: the handler runs it off the event loop."""
    body = obj(parse_json(raw, content_type))
    only(body, EVENT_FIELDS, "event")
    event_id = ident(body, "event_id")
    assert event_id is not None
    currency = body.get("currency", "EUR")
    if not isinstance(currency, str) or not CURRENCY_RE.match(currency):
        raise ApiError(400, "invalid_request", "currency must be an ISO 4217 code such as EUR")
    opens_at_ms = body.get("opens_at_ms")
    stock = new_stock(body) if one_of(body, "kind", KINDS, "seats") == "stock" else None
    given = [name for name in STOCK_ONLY if name in body]
    if stock is None and given:
        raise ApiError(400, "invalid_request", f"{given[0]} is for events of kind stock")
    levels = price_table(body)
    seats = [] if stock else seat_map(body.get("seats"), levels)
    return NewEvent(
        event_id=event_id,
        seats=seats,
        config=terms(body, currency),
        price_minor=whole(body, "price_minor", 0),
        opens_at_ms=None if opens_at_ms is None else whole(body, "opens_at_ms"),
        stock=stock,
        places=None if stock else seat_layout(body["seats"], seats),
        price_levels=levels,
        details=details_of(body),
    )


def terms(body: dict[str, Any], currency: str) -> EventConfig:
    """The create's terms, each absent one its default (engine/model/event_config.py)."""
    default = EventConfig()
    return EventConfig(
        hold_ttl_ms=whole(body, "hold_ttl_ms", default.hold_ttl_ms),
        quarantine_ms=whole(body, "quarantine_ms", default.quarantine_ms),
        policy=LatePolicy(one_of(body, "policy", tuple(LatePolicy), default.policy)),
        currency=currency,
        reversal_policy=ReversalPolicy(
            one_of(body, "reversal_policy", tuple(ReversalPolicy), default.reversal_policy)
        ),
        login_cap=None if body.get("login_cap") is None else whole(body, "login_cap"),
        max_party=0 if body.get("max_party") is None else whole(body, "max_party"),
    )


def seat_map(raw: Any, prices: dict[str, int] | None = None) -> list[SeatSpec]:
    if not isinstance(raw, list) or not 1 <= len(raw) <= SEATS_MAX:
        raise ApiError(400, "invalid_request", f"seats must be a list of 1..{SEATS_MAX} seats")
    seen: set[str] = set()
    return [seat_spec(item, n, seen, prices) for n, item in enumerate(raw)]


def seat_spec(item: Any, n: int, seen: set[str], prices: dict[str, int] | None) -> SeatSpec:
    """Seat `n` of the map; its rank defaults to its position; its price its level's when the
    event prices its levels (`prices`)."""
    if not isinstance(item, dict):
        raise ApiError(400, "invalid_request", f"seats[{n}] must be an object")
    only(item, SEAT_FIELDS, f"seats[{n}]")
    seat_id = ident(item, "seat_id")
    assert seat_id is not None
    if seat_id in seen:
        raise ApiError(400, "invalid_request", f"seat {seat_id} appears twice")
    seen.add(seat_id)
    rank = number(item.get("rank", n), f"rank of {seat_id}", LIMITS["rank"])
    section = item.get("section", "")
    if not isinstance(section, str) or len(section) > SECTION_CHARS_MAX:
        raise ApiError(
            400,
            "invalid_request",
            f"section of {seat_id} must be a string of at most {SECTION_CHARS_MAX} characters",
        )
    return SeatSpec(seat_id, rank, section, seat_price(item, seat_id, prices))


@endpoint("admin_create_event")
async def create_event(request: Request) -> Response:
    """A seat event from its seat map, or a stock event from its locations and SKUs (each
    initial count recorded as a correction by this admin)."""
    c = ctx(request)
    admin = c.require_admin(request)
    raw = await read_body(request, c.settings.admin_body_max_bytes)
    new = await run_in_threadpool(new_event, raw, request.headers.get("content-type"))
    answer: admin_answers.EventCreated
    if new.stock is not None:
        units = await c.store.stock.create_event(
            new.event_id, new.stock.locations, new.stock.skus, new.config, operator=admin
        )
        answer = {"event_id": new.event_id, "kind": "stock", "skus": len(new.stock.skus),
                  "units": units}  # fmt: skip
    else:
        # The seats go to Redis in chunks (engine/store/transitions.py), each a short script call of
        # its own: buyers of other events are answered between them.
        n_seats = await c.store.create_event(
            new.event_id, new.seats, new.config, price_minor=new.price_minor
        )
        answer = {"event_id": new.event_id, "kind": "seats", "seats": n_seats}
        if new.places is not None:  # off the hot path: no script reads it (ADR 0028)
            await save_layout(c.store.read, new.event_id, new.places, new.price_levels)
    if new.details:  # while a draft, before any open (ADR 0041)
        await describe(c.store.runner, new.event_id, new.details)
    if new.opens_at_ms is not None:
        await c.store.open_sale(new.event_id, new.opens_at_ms)
    return json_response(answer, 201)


@endpoint("admin_open_sale")
async def open_sale(request: Request) -> Response:
    c, _admin, event_id, body = await admin_post(request, OPEN_FIELDS, "open", empty=True)
    reschedule = body.get("reschedule", False)
    if not isinstance(reschedule, bool):
        raise ApiError(400, "invalid_request", "reschedule must be true or false")
    opens_at_ms = whole(body, "opens_at_ms", 0)
    # A second open answers 409 already_open: T0 moves only when asked, before it (ADR 0025).
    opens_at = await c.store.lifecycle.open(event_id, opens_at_ms, reschedule=reschedule)
    opened: admin_answers.SaleOpened = {"event_id": event_id, "opens_at_ms": opens_at}
    return json_response(opened)


@endpoint("admin_revoke_hold")
async def revoke_hold(request: Request) -> Response:
    """Take back the seat of a hold in EXCEPTION (its money left at the provider): the seat goes
    back on sale. Only for holds in EXCEPTION; anything else is 409 not_an_exception."""
    c = ctx(request)
    c.require_admin(request)
    event_id, hold_id = path_id(request, "event_id"), path_id(request, "hold_id")
    await c.store.revoke_hold(event_id, hold_id, "admin")
    h = await c.store.read.hold(event_id, hold_id)
    revoked: admin_answers.RevokedHold = {
        "hold_id": hold_id,
        "state": h.state,
        "seat_id": h.listing,
    }
    return json_response(revoked)


def percentile(ordered: list[int], pct: int) -> int | None:
    """Nearest-rank percentile of an ascending list (None when empty)."""
    if not ordered:
        return None
    return ordered[max(0, -(-len(ordered) * pct // 100) - 1)]


def refund_times(charges: list[Charge], now: int) -> admin_answers.RefundTimes:
    """The capture-to-refund bound as this event's charges show it: from the moment a charge
    went REFUNDING (a late or contradicting capture, a cancelled sale) to its refund recorded,
    and how long the refunds still open have waited so far; `bound_ms` is the larger."""
    done = sorted(
        ch.decided_ms - ch.refunding_ms
        for ch in charges
        if ch.refunding_ms and ch.state == ChargeState.REFUNDED
    )
    waiting = [
        now - ch.refunding_ms
        for ch in charges
        if ch.refunding_ms and ch.state == ChargeState.REFUNDING
    ]
    return {
        "refunded": len(done),
        "p50_ms": percentile(done, 50),
        "p99_ms": percentile(done, 99),
        "max_ms": percentile(done, 100),
        "waiting": len(waiting),
        "oldest_waiting_ms": max(waiting, default=None),
        "bound_ms": max([*done[-1:], *waiting], default=None),
    }


def charge_view(ch: Charge) -> admin_answers.AdminCharge:
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


def money_views(charges: list[Charge], refunds_due: set[str]) -> admin_answers.MoneyViews:
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


def after_sale_views(holds: dict[str, Hold], charges: list[Charge]) -> admin_answers.AfterSale:
    """Sold seats whose money left at the provider (its own refund, a dispute): still assigned
    (revoke it, or wait for the dispute's outcome), or taken back; and the money invariant's
    right-hand side: what the provider should hold for this event."""
    by_charge = {ch.charge_id: ch for ch in charges}
    return {
        "seats_without_money": [
            {
                "hold_id": h.hold_id,
                "seat_id": h.listing,
                "login": h.login,
                "reason": h.reason,
                "winner": charge_view(by_charge[h.winner]) if h.winner in by_charge else None,
            }
            for h in holds.values()
            if h.state == HoldState.EXCEPTION
        ],
        "revoked": [
            {"hold_id": h.hold_id, "seat_id": h.listing, "reason": h.reason}
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


def alert_view(a: Alert) -> admin_answers.Alert:
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
    older_than_ms = query_integer(request.query_params, "charging_older_than_ms", 300_000)
    await c.store.read.availability(event_id)  # 404 for an unknown event
    now = await c.store.read.server_time_ms()
    charges = await c.store.read.scan_charges(event_id)
    refunds_due = set(await c.store.read.due_refunds(event_id, 2**62))
    holds = await c.store.read.holds(event_id)
    report: admin_answers.ExceptionsReport = {
        "event_id": event_id,
        "server_time_ms": now,
        **money_views(charges, refunds_due),
        "refund_times": refund_times(charges, now),
        **after_sale_views(holds, charges),
        "alerts": [alert_view(a) for a in await c.store.read.alerts(event_id, ALERTS_SHOWN_MAX)],
        "blocked_seats": [
            {
                "hold_id": h.hold_id,
                "seat_id": h.listing,
                "state": h.state,
                "until_ms": h.until_ms,
                "charge_id": h.charge_in_flight or h.blocking_charge,
            }
            for h in await c.store.read.quarantined(event_id)
        ],
        "charging_too_long": [
            charge_view(ch)
            for ch in charges
            if ch.state == ChargeState.CHARGING and now - ch.created_ms > older_than_ms
        ],
    }
    return json_response(report)
