"""Admin listings and the end of a sale (ADR 0025): the events, an event's configuration, pages
of its holds, charges and orders (opaque cursor, HSCAN underneath: engine/views/listings.py), the
orders as CSV streamed page by page, and closing or cancelling the sale. Admin token required."""

import contextlib
import csv
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from api.context import admin_post, ctx, endpoint, path_id
from api.contract import admin as admin_answers
from api.contract import event_setup as setup
from api.contract import listings as pages
from api.contract.atoms import fields_of
from api.errors import ApiError
from api.responses import json_response
from api.routes.admin import charge_view
from api.routes.hold_views import order_view
from api.routes.stock import lines_view
from api.validate import LIMITS, query_integer, whole
from engine.model import errors
from engine.model.holds import Charge, Hold
from engine.model.states import ChargeState, HoldState
from engine.store.lifecycle import CANCEL_BATCH
from engine.store.prices import seat_prices
from engine.views.listings import EXCEPTION_STATES, Listings
from engine.views.seatmap import (
    Printed,
    SeatMapTooLarge,
    printed_places,
    read_layout,
    seats_in_words,
)

CURSOR_CHARS_MAX = 4096
LIMIT_DEFAULT = 100
CSV_COLUMNS = ("hold_id", "login", "seat_ids", "lines", "amount", "currency", "charge_id",
               "decided_ms", "seat_prices", "order_number", "seats_named")  # fmt: skip
CANCEL_FIELDS = fields_of(setup.CancelSaleRequest)


def cursor_of(request: Request) -> str | None:
    raw = request.query_params.get("cursor")
    if raw is not None and (not raw or len(raw) > CURSOR_CHARS_MAX or not raw.isascii()):
        raise ApiError(400, "invalid_request", f"cursor must be 1..{CURSOR_CHARS_MAX} characters")
    return raw


def states_of(request: Request, allowed: tuple[str, ...]) -> frozenset[str]:
    """`state=A,B`: only entries in those states (none: all)."""
    raw = request.query_params.get("state")
    if raw is None:
        return frozenset()
    asked = frozenset(raw.split(","))
    if not asked or not asked <= set(allowed):
        raise ApiError(400, "invalid_request", f"state must list some of {', '.join(allowed)}")
    return asked


def paging(request: Request) -> tuple[str | None, int]:
    return cursor_of(request), query_integer(request.query_params, "limit", LIMIT_DEFAULT)


def hold_row(h: Hold) -> pages.AdminHold:
    return {
        "hold_id": h.hold_id,
        "login": h.login,
        "state": h.state,
        "seat_ids": [] if h.is_stock else list(h.seat_ids),
        "lines": lines_view(h.listing) if h.is_stock else None,  # as every other view has them
        "created_ms": h.created_ms,
        "expires_ms": h.expires_ms,
        "decided_ms": h.decided_ms or None,
        "reason": h.reason or None,
        "charge_ids": list(h.charge_ids),
        "winner": h.winner or None,
    }


@endpoint("admin_list_events")
async def list_events(request: Request) -> Response:
    c = ctx(request)
    c.require_admin(request)
    cursor, limit = paging(request)
    page = await Listings(c.store.read).events(cursor, limit)
    answer: pages.EventPage = {
        "events": [summary_view(e) for e in page.items], "next_cursor": page.cursor
    }  # fmt: skip
    return json_response(answer)


def summary_view(e: dict[str, Any]) -> pages.EventSummary:
    """An event's row as the engine reads it (engine/views/listings.py EVENT_COUNTERS)."""
    return {
        "event_id": e["event_id"], "status": e["status"], "kind": e["kind"],
        "opens_at_ms": e["opens_at_ms"], "seats_total": e["seats_total"], "free": e["free"],
        "held": e["held"], "blocked": e["blocked"], "sold": e["sold"], "currency": e["currency"],
    }  # fmt: skip


@endpoint("admin_event_config")
async def event_config(request: Request) -> Response:
    c = ctx(request)
    c.require_admin(request)
    event_id = path_id(request, "event_id")
    return json_response(config_view(await Listings(c.store.read).config(event_id)))


def config_view(d: dict[str, Any]) -> pages.EventConfig:
    """An event's configuration as the engine reads it (engine/views/listings.py config)."""
    config: pages.EventConfig = {  # in the engine's order (engine/views/listings.py)
        "event_id": d["event_id"], "kind": d["kind"], "status": d["status"],
        "hold_ttl_ms": d["hold_ttl_ms"], "quarantine_ms": d["quarantine_ms"],
        "policy": d["policy"], "currency": d["currency"],
        "reversal_policy": d["reversal_policy"], "login_cap": d["login_cap"],
        "max_party": d["max_party"], "price_minor": d["price_minor"],
        "opens_at_ms": d["opens_at_ms"], "locations": d["locations"],
        "seats_total": d["seats_total"], "policy_grace_ms": d["policy_grace_ms"],
        "shadow_policy": d["shadow_policy"], "closed_at_ms": d["closed_at_ms"],
        "cancelled_at_ms": d["cancelled_at_ms"], "name": d["name"], "venue": d["venue"],
        "description": d["description"], "image_url": d["image_url"],
        "starts_at_ms": d["starts_at_ms"], "time_zone": d["time_zone"], "locale": d["locale"],
    }  # fmt: skip
    if "skus" in d:
        config["skus"] = d["skus"]
    return config


@dataclass(frozen=True, slots=True)
class StateListing:
    """An admin's page of records in some states: the event, the states asked for (`state`,
    repeated; any of `allowed`), the cursor and the page size."""

    listings: Listings
    event_id: str
    cursor: str | None
    limit: int
    states: frozenset[str]

    @classmethod
    def asked(cls, request: Request, allowed: tuple[str, ...]) -> "StateListing":
        c = ctx(request)
        c.require_admin(request)
        event_id = path_id(request, "event_id")
        states = states_of(request, allowed)
        cursor, limit = paging(request)
        return cls(Listings(c.store.read), event_id, cursor, limit, states)


@endpoint("admin_list_holds")
async def list_holds(request: Request) -> Response:
    a = StateListing.asked(request, tuple(HoldState))
    page = await a.listings.holds(a.event_id, a.cursor, a.limit, a.states)
    answer: pages.HoldPage = {
        "event_id": a.event_id, "holds": [hold_row(h) for h in page.items],
        "next_cursor": page.cursor,
    }  # fmt: skip
    return json_response(answer)


@endpoint("admin_list_charges")
async def list_charges(request: Request) -> Response:
    a = StateListing.asked(request, tuple(ChargeState))
    page = await a.listings.charges(a.event_id, a.cursor, a.limit, a.states)
    answer: pages.ChargePage = {
        "event_id": a.event_id, "charges": [charge_view(ch) for ch in page.items],
        "next_cursor": page.cursor,
    }  # fmt: skip
    return json_response(answer)


@endpoint("admin_list_exceptions")
async def list_exceptions(request: Request) -> Response:
    """Charges whose money needs an operator's eye, each with its hold's state and seats."""
    a = StateListing.asked(request, tuple(sorted(EXCEPTION_STATES)))
    event_id = a.event_id
    page, holds = await a.listings.exceptions(event_id, a.cursor, a.limit, a.states)
    found: list[pages.ExceptionCharge] = []
    for ch in page.items:
        h = holds.get(ch.hold_id)
        found.append({**charge_view(ch), "hold": hold_row(h) if h is not None else None})
    answer: pages.ExceptionPage = {
        "event_id": event_id, "exceptions": found, "next_cursor": page.cursor
    }  # fmt: skip
    return json_response(answer)


def order_row(
    event_id: str,
    h: Hold,
    winners: dict[str, Charge],
    currency: str,
    prices: dict[str, int],
    places: dict[str, Printed],
) -> pages.OrderRow:
    won = [winners[h.winner]] if h.winner in winners else []
    own = [prices[s] for s in h.seat_ids] if not h.is_stock else []
    named: pages.SeatsNamed = (
        {} if h.is_stock else {"seats_named": seats_in_words(h.seat_ids, places)}
    )
    return {"hold_id": h.hold_id, "login": h.login, "decided_ms": h.decided_ms,
            **order_view(event_id, h, won, currency, own), **named}  # fmt: skip


async def printed(request: Request, event_id: str) -> dict[str, Printed]:
    """Where each seat is, from the event's layout, read once per request (a stock event, or a
    map too large to draw: nowhere, and seats are named by id)."""
    with contextlib.suppress(errors.WrongKind, SeatMapTooLarge):
        return printed_places(await read_layout(ctx(request).store.read, event_id))
    return {}


async def order_rows(
    request: Request,
    event_id: str,
    holds: list[Hold],
    winners: dict[str, Charge],
    currency: str,
    places: dict[str, Printed],
) -> list[pages.OrderRow]:
    """The orders of one page, each seat with its price (ADR 0038: one read for the page) and
    its place in words."""
    seats = [s for h in holds if not h.is_stock for s in h.seat_ids]
    found = await seat_prices(ctx(request).store.runner, event_id, seats)
    prices = dict(zip(seats, found, strict=True))
    return [order_row(event_id, h, winners, currency, prices, places) for h in holds]


async def _currency(request: Request, event_id: str) -> str:
    (currency,) = await ctx(request).store.read.event_fields(event_id, "currency")
    return currency or "EUR"


@endpoint("admin_list_orders")
async def list_orders(request: Request) -> Response:
    """CONFIRMED holds: what each bought, the amount, the currency and the charge that paid."""
    c = ctx(request)
    c.require_admin(request)
    event_id = path_id(request, "event_id")
    cursor, limit = paging(request)
    page, winners = await Listings(c.store.read).orders(event_id, cursor, limit)
    currency = await _currency(request, event_id)
    sells_seats = any(not h.is_stock for h in page.items)
    places = await printed(request, event_id) if sells_seats else {}
    found = await order_rows(request, event_id, page.items, winners, currency, places)
    answer: pages.OrderPage = {"event_id": event_id, "orders": found, "next_cursor": page.cursor}
    return json_response(answer)


def csv_lines(found: list[pages.OrderRow], header: bool) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if header:
        writer.writerow(CSV_COLUMNS)
    for row in found:
        seats = row.get("seat_ids") or []
        lines = row.get("lines") or []
        assert isinstance(seats, list) and isinstance(lines, list)
        goods = " ".join(f"{x['sku']}@{x['location']}*{x['quantity']}" for x in lines)
        prices = row.get("seat_prices") or {}
        assert isinstance(prices, dict)
        writer.writerow(
            (row["hold_id"], row["login"], " ".join(map(str, seats)), goods, row["amount"],
             row["currency"], row["charge_id"], row["decided_ms"],
             " ".join(f"{s}={p}" for s, p in prices.items()), row["order_number"],
             row.get("seats_named", ""))
        )  # fmt: skip
    return out.getvalue()


@endpoint("admin_orders_csv")
async def orders_csv(request: Request) -> Response:
    """Every order as CSV, read and sent a page at a time (the first page before the answer
    starts, so an unknown event is a 404, not a broken stream)."""
    c = ctx(request)
    c.require_admin(request)
    event_id = path_id(request, "event_id")
    listings = Listings(c.store.read)
    page_size = int(LIMITS["limit"].high)
    first, winners = await listings.orders(event_id, None, page_size)
    currency = await _currency(request, event_id)
    places = await printed(request, event_id)  # once for the whole export

    async def body() -> AsyncIterator[str]:
        page, won, header = first, winners, True
        while True:
            found = await order_rows(request, event_id, page.items, won, currency, places)
            yield csv_lines(found, header)
            header = False
            if page.cursor is None:
                return
            page, won = await listings.orders(event_id, page.cursor, page_size)

    disposition = f'attachment; filename="{event_id}-orders.csv"'
    return StreamingResponse(
        body(), media_type="text/csv", headers={"Content-Disposition": disposition}
    )


@endpoint("admin_close_sale")
async def close_sale(request: Request) -> Response:
    """No new claims or charge starts; holds run on to their deadlines, callbacks still
    decide. A repeat answers the same."""
    c = ctx(request)
    admin = c.require_admin(request)
    event_id = path_id(request, "event_id")
    status = await c.store.lifecycle.close(event_id, admin)
    answer: admin_answers.SaleStatus = {"event_id": event_id, "status": status}
    return json_response(answer)


@endpoint("admin_cancel_sale")
async def cancel_sale(request: Request) -> Response:
    """Closed, every hold ended, the captured money of every sold seat on the refund queue.
    200 once nothing is held, blocked or sold; 202 with `remaining` when this request's share
    of the work is done and more remains (post again). Repeats are idempotent."""
    c, admin, event_id, body = await admin_post(request, CANCEL_FIELDS, "cancel", empty=True)
    batch = whole(body, "batch", CANCEL_BATCH)
    progress = await c.store.lifecycle.cancel(event_id, admin, batch=batch)
    answer: admin_answers.CancelProgress = {
        "event_id": event_id,
        "status": "cancelled",
        "holds_ended": progress.done,
        "remaining": progress.remaining,
        "complete": progress.complete,
    }
    return json_response(answer, 200 if progress.complete else 202)


ROUTES = [
    Route("/v1/admin/events", list_events, methods=["GET"]),
    Route("/v1/admin/events/{event_id}", event_config, methods=["GET"]),
    Route("/v1/admin/events/{event_id}/holds", list_holds, methods=["GET"]),
    Route("/v1/admin/events/{event_id}/charges", list_charges, methods=["GET"]),
    Route("/v1/admin/events/{event_id}/orders", list_orders, methods=["GET"]),
    Route("/v1/admin/events/{event_id}/exceptions/charges", list_exceptions, methods=["GET"]),
    Route("/v1/admin/events/{event_id}/orders.csv", orders_csv, methods=["GET"]),
    Route("/v1/admin/events/{event_id}/close", close_sale, methods=["POST"]),
    Route("/v1/admin/events/{event_id}/cancel", cancel_sale, methods=["POST"]),
]
