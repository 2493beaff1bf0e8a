"""What a buyer finds of their own (ADR 0042): `GET /v1/me/holds`, the login's live hold in an
event (found without its id), and `GET /v1/me/orders`, the token's login's
confirmed orders, newest first, a page at a time, read from the ledger (a sale is told only
once the ledger holds it, ADR 0016, so every order the buyer was told of is there). Each with
its number, its seats (or a cart's lines), the amount and the event's name. A deployment
without a ledger database keeps no orders: an empty list, `kept: false`; one whose ledger
cannot be reached answers 503 orders_unavailable."""

import re
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from api.context import ctx, endpoint
from api.contract import mine
from api.errors import ApiError
from api.responses import json_response
from api.routes.hold_views import goods_view
from api.routes.stock import lines_view
from api.validate import query_integer
from api.webhooks_db import SQL, WebhookDb
from engine.model import keys
from engine.model.holds import Hold
from engine.model.orders import order_number
from engine.model.states import HoldState
from engine.model.stock_lines import is_stock_listing

LIVE = (HoldState.RESERVED, HoldState.QUARANTINED)  # a login's live hold is in one of these
LiveState = Literal["RESERVED", "QUARANTINED"]
CURSOR_RE = re.compile(r"^([0-9]{1,16})\.(.{1,200})$")
END = (2**62, "")  # before any cursor: the newest first


def cursor_of(raw: str | None) -> tuple[int, str]:
    if raw is None:
        return END
    m = CURSOR_RE.match(raw)
    if m is None:
        raise ApiError(400, "invalid_request", "cursor must be a next_cursor this listing gave")
    return int(m[1]), m[2]


def order_item(r: Any) -> mine.MyOrder:
    listed = str(r["seat_id"])
    goods: mine.ItemGoods = (
        {"lines": lines_view(listed)}
        if is_stock_listing(listed)
        else {"seat_ids": listed.split(",")}
    )
    return {"event_id": r["event_id"], "event_name": r["name"] or None, "hold_id": r["hold_id"],
            "order_number": order_number(r["event_id"], r["hold_id"]), **goods,
            "amount": r["amount"], "refunded": r["refunded"], "currency": r["currency"] or "EUR",
            "decided_ms": r["decided_at_ms"]}  # fmt: skip


@endpoint("my_orders")
async def my_orders(request: Request) -> Response:
    """The token's login's orders (of one event with `event_id`), newest first."""
    c = ctx(request)
    event_id = request.query_params.get("event_id") or ""
    if event_id and not keys.valid_id(event_id):
        raise ApiError(400, "invalid_request", "event_id must match [A-Za-z0-9_.:-]{1,64}")
    caller = c.identity.caller(request, event_id or None)
    if not event_id and caller.events is not None:
        if len(caller.events) != 1:
            raise ApiError(403, "token_scope", "this token names its events: ask for one")
        (event_id,) = caller.events  # a token for one event sees that event's orders
    limit = query_integer(request.query_params, "limit", 50)
    ms, hold_id = cursor_of(request.query_params.get("cursor"))
    store: WebhookDb | None = getattr(request.app.state, "webhooks", None)
    if store is None or not store.settings.pg_dsn:  # a deployment that keeps no ledger
        none: mine.MyOrderPage = {"orders": [], "next_cursor": None, "kept": False}
        return json_response(none)
    async with store.conn("orders_unavailable") as conn:
        rows = await conn.fetch(SQL["my_orders"], caller.login, event_id, ms, hold_id, limit)
    last = rows[-1] if len(rows) == limit else None
    after = f"{last['decided_at_ms']}.{last['hold_id']}" if last is not None else None
    page: mine.MyOrderPage = {
        "orders": [order_item(r) for r in rows], "next_cursor": after, "kept": True
    }  # fmt: skip
    return json_response(page)


@endpoint("my_holds")
async def my_holds(request: Request) -> Response:
    """The token's login's live hold in an event (`event_id`, required: holds live in Redis,
    per event), found without its id: after a closed tab, on another device."""
    c = ctx(request)
    event_id = request.query_params.get("event_id") or ""
    if not keys.valid_id(event_id):
        raise ApiError(400, "invalid_request", "event_id must match [A-Za-z0-9_.:-]{1,64}")
    login = c.login_of(request, event_id)
    hold_id = await c.store.read.live_hold(event_id, login)
    holds: list[mine.MyHold] = []
    h = await c.store.read.hold(event_id, hold_id) if hold_id else None
    if h is not None and h.state in LIVE:  # ended just now: none (the index catches up)
        holds.append(my_hold(h))
    answer: mine.MyHolds = {"event_id": event_id, "holds": holds}
    return json_response(answer)


def my_hold(h: Hold) -> mine.MyHold:
    """A live hold and what it owns (seats, or a cart's lines and amount), as the page shows it."""
    live: LiveState = "QUARANTINED" if h.state == HoldState.QUARANTINED else "RESERVED"
    goods = goods_view(h)
    out: mine.MyHold = {"hold_id": h.hold_id, "state": live, "expires_ms": h.expires_ms,
                        "seat_id": goods["seat_id"], "seat_ids": goods["seat_ids"]}  # fmt: skip
    if "lines" in goods:
        out["lines"] = goods["lines"]
    if "amount" in goods:
        out["amount"] = goods["amount"]
    return out


ROUTES = [
    Route("/v1/me/orders", my_orders, methods=["GET"]),
    Route("/v1/me/holds", my_holds, methods=["GET"]),
]
