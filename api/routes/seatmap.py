"""The seat map over HTTP (ADR 0028): what an admin's create may say of each seat's place, the
layout a page draws (cacheable, ETag), and the seats' live states, as a versioned snapshot
(ETag / If-None-Match) or a server-sent event stream. Both are served from this process's
SeatBoard (engine/views/seatmap.py): a thousand pages watching cost Redis what one does."""

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from api.context import ctx, endpoint, path_id
from api.contract import event_setup as setup
from api.contract import seatmap as board
from api.contract.atoms import fields_of
from api.errors import ApiError
from api.validate import LIMITS, integer, names, number, text
from engine.model.holds import SeatSpec
from engine.views.seatmap import SEATMAP_SEATS_MAX, SeatBoard, SeatPlace, Snapshot

PLACE_FIELDS = fields_of(setup.SeatPlace)  # a seat's place on the drawn map (ADR 0028)
STREAM_LIFETIME_S = 30.0  # then the page's EventSource reconnects (bounds a server's shutdown)
HEARTBEAT_S = 10.0  # a clock message at least this often (keeps proxies and countdowns going)
RETRY_MS = 1_000  # what EventSource waits before it reconnects


def seat_layout(raw: list[Any], seats: list[SeatSpec]) -> list[SeatPlace] | None:
    """The places of a create's seats (already checked as seats), in rank order; None for a map
    larger than a page draws, which then may not name places. `x` and `y` go together, on every
    seat or on none."""
    if len(seats) > SEATMAP_SEATS_MAX:
        if any(isinstance(item, dict) and not PLACE_FIELDS.isdisjoint(item) for item in raw):
            raise ApiError(
                400,
                "invalid_request",
                f"row, number, x, y and price_level are for maps of at most {SEATMAP_SEATS_MAX} "
                "seats",
            )
        return None
    places = [seat_place(item, seat) for item, seat in zip(raw, seats, strict=True)]
    if len({p.x is None for p in places}) > 1:
        raise ApiError(400, "invalid_request", "give x and y to every seat or to none")
    order = sorted(range(len(seats)), key=lambda i: (seats[i].rank, seats[i].seat_id))
    return [places[i] for i in order]  # the seats zset's order: rank, then id


def seat_place(item: dict[str, Any], seat: SeatSpec) -> SeatPlace:
    where = f"seat {seat.seat_id}"
    has_x, has_y = item.get("x") is not None, item.get("y") is not None
    if has_x != has_y:
        raise ApiError(400, "invalid_request", f"{where}: give x and y together")
    x = number(item["x"], f"x of {seat.seat_id}", LIMITS["x"]) if has_x else None
    y = number(item["y"], f"y of {seat.seat_id}", LIMITS["y"]) if has_y else None
    row = text(item, "row") if item.get("row") is not None else ""
    level = text(item, "price_level") if item.get("price_level") is not None else ""
    label = text(item, "number", limit="seat_number") if item.get("number") is not None else ""
    return SeatPlace(seat.seat_id, seat.section, row, x, y, level, label)


def price_table(body: dict[str, Any]) -> dict[str, int] | None:
    """The event's `price_levels` (level -> price_minor), or None: levels are display only."""
    if body.get("price_levels") is None:
        return None
    raw = names(body, "price_levels")
    label, prices = LIMITS["price_level"], LIMITS["price_minor"]
    for level, price in raw.items():
        if not label.low <= len(level) <= label.high or not level.isprintable():
            raise ApiError(400, "invalid_request", f"price level {level} must be a printable "
                           f"string of {label.low:g} to {label.high:g} characters")  # fmt: skip
        name = f"price of level {level}"
        integer({name: price}, name, low=int(prices.low), high=int(prices.high))
    return dict(raw)


def seat_price(item: dict[str, Any], seat_id: str, table: dict[str, int] | None) -> int | None:
    """The seat's own price: its level's, when the event prices its levels."""
    level = item.get("price_level")
    if table is None or level is None:
        return None
    if not isinstance(level, str) or level not in table:
        raise ApiError(400, "invalid_request", f"price_level {level} of {seat_id} is not in "
                       "price_levels")  # fmt: skip
    return table[level]


def board_of(request: Request) -> SeatBoard:
    """This process's board, made on first use (the app's lifespan knows nothing of it)."""
    state = request.app.state
    board: SeatBoard | None = getattr(state, "seat_board", None)
    if board is None:
        board = state.seat_board = SeatBoard(ctx(request).store.read)
    return board


def _etag(value: str) -> str:
    return f'"{value}"'


def _not_modified(request: Request, etag: str, cache: str) -> Response | None:
    asked = request.headers.get("if-none-match", "")
    if etag in (t.strip() for t in asked.split(",")):
        return Response(status_code=304, headers={"ETag": etag, "Cache-Control": cache})
    return None


LAYOUT_CACHE = "public, max-age=60"  # fixed once the event is created
STATE_CACHE = "no-cache"  # always revalidate: a 304 costs this process no Redis read


@endpoint("seatmap_layout")
async def layout(request: Request) -> Response:
    """The seats' sections, rows, positions and price levels, in rank order."""
    event_id = path_id(request, "event_id")
    found = await board_of(request).layout(event_id)
    etag = _etag(found.etag)
    not_modified = _not_modified(request, etag, LAYOUT_CACHE)
    if not_modified is not None:
        return not_modified
    headers = {"ETag": etag, "Cache-Control": LAYOUT_CACHE}
    return Response(found.body, media_type="application/json", headers=headers)


def snapshot_view(event_id: str, snap: Snapshot, now_ms: int) -> board.SeatMapState:
    """Every seat's state and the event's figures, as the engine's board read them
    (engine/views/seatmap.py event_view)."""
    e = snap.event
    return {
        "event_id": event_id, "version": snap.version, "serial": snap.serial,
        "server_time_ms": now_ms, "status": e["status"], "kind": "seats",
        "currency": e["currency"], "opens_at_ms": e["opens_at_ms"],
        "price_minor": e["price_minor"], "max_party": e["max_party"],
        "hold_ttl_ms": e["hold_ttl_ms"], "free": e["free"], "held": e["held"],
        "blocked": e["blocked"], "sold": e["sold"], "recovering": e["recovering"],
        "name": e["name"], "venue": e["venue"], "description": e["description"],
        "image_url": e["image_url"], "starts_at_ms": e["starts_at_ms"],
        "time_zone": e["time_zone"], "locale": e["locale"], "states": snap.states,
    }  # fmt: skip


def change_view(snap: Snapshot, now_ms: int) -> dict[str, Any]:
    changes = [list(c) for c in snap.changes or ()]
    return {"version": snap.version, "serial": snap.serial, "base": snap.base,
            "server_time_ms": now_ms, **snap.event, "changes": changes}  # fmt: skip


@endpoint("seatmap_state")
async def state(request: Request) -> Response:
    """The state of every seat, one character each in layout order (F free, H held, B
    blocked, S sold), with the event's status, T0, counters and the server's clock. 304 when
    If-None-Match names the current version."""
    event_id = path_id(request, "event_id")
    board = board_of(request)
    snap = await board.snapshot(event_id)
    etag = _etag(snap.version)
    not_modified = _not_modified(request, etag, STATE_CACHE)
    if not_modified is not None:
        return not_modified
    body = orjson.dumps(snapshot_view(event_id, snap, await board.server_time_ms()))
    headers = {"ETag": etag, "Cache-Control": STATE_CACHE}
    return Response(body, media_type="application/json", headers=headers)


def sse(kind: str, data: Mapping[str, object]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


async def _events(board: SeatBoard, event_id: str, first: Snapshot) -> AsyncIterator[bytes]:
    """`seats` (whole) first, then `change` (the seats that moved) or `seats` again when this
    stream missed a step; `clock` at least every HEARTBEAT_S; ends after STREAM_LIFETIME_S."""
    if not board.join(event_id):
        return
    try:
        yield f"retry: {RETRY_MS}\n\n".encode()
        yield sse("seats", snapshot_view(event_id, first, await board.server_time_ms()))
        serial = first.serial
        loop = asyncio.get_running_loop()
        ends = loop.time() + STREAM_LIFETIME_S
        while (left := ends - loop.time()) > 0:
            snap = await board.next_snapshot(event_id, serial, min(HEARTBEAT_S, left))
            now_ms = await board.server_time_ms()
            if snap is None:
                yield sse("clock", {"server_time_ms": now_ms})
            elif snap.base == serial and snap.changes is not None:
                yield sse("change", change_view(snap, now_ms))
            else:
                yield sse("seats", snapshot_view(event_id, snap, now_ms))
            serial = snap.serial if snap is not None else serial
    finally:
        board.leave(event_id)


@endpoint("seatmap_stream")
async def stream(request: Request) -> Response:
    """Server-sent events: the seats whole, then every change as this process sees it (at most
    one read of the event per board refresh, whatever the number of streams)."""
    event_id = path_id(request, "event_id")
    if "text/event-stream" not in request.headers.get("accept", ""):
        # Asked for by name only: a client that does not expect a stream would hang on it.
        raise ApiError(406, "not_acceptable", "send Accept: text/event-stream (EventSource does)")
    board = board_of(request)
    first = await board.snapshot(event_id)  # an unknown event is a 404, not a broken stream
    board.room()  # 503 watchers_full past the bound: the page polls instead
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(
        _events(board, event_id, first), media_type="text/event-stream", headers=headers
    )
