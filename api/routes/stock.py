"""Quantity stock over HTTP (ADR 0022): what an admin's create of a stock event says, the
availability per SKU and location (public), and stock corrections (admin). Claims of stock
lines go through the claim route (api/routes/checkout.py); every later step is the seat
engine's own."""

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from api.context import admin_post, ctx, endpoint, path_id
from api.contract import admin as admin_answers
from api.contract import catalogue as answers
from api.contract import event_setup as setup
from api.contract import holds
from api.contract.atoms import fields_of
from api.errors import ApiError
from api.responses import json_response
from api.routes.seatmap import board_of
from api.validate import LIMITS, ident, integer, items, only, stock_ident, text, whole
from engine.model.stock_lines import COUNTERS, HeldLine, SkuSpec, StockLine, lines_of
from engine.views.sections import section_availability

SKU_FIELDS = fields_of(setup.SkuSpec)
LINE_FIELDS = fields_of(holds.ClaimLine)
CORRECTION_FIELDS = fields_of(setup.StockCorrectionRequest)
SEAT_ONLY = ("seats", "max_party", "price_minor", "price_levels")  # a stock event prices each SKU
LINES_MAX = int(LIMITS["lines"].high)


@dataclass(frozen=True, slots=True)
class NewStock:
    """The stock part of an admin's create request: locations in preference order, SKUs."""

    locations: list[str]
    skus: list[SkuSpec]


def new_stock(body: dict[str, Any]) -> NewStock:
    """`locations` and `skus` of a create request of kind `stock`, checked whole."""
    given = [name for name in SEAT_ONLY if name in body]
    if given:
        raise ApiError(400, "invalid_request", f"a stock event takes no {given[0]} (see skus)")
    locations = [stock_ident({"location": x}, "location") or "" for x in items(body, "locations")]
    if len(set(locations)) != len(locations):
        raise ApiError(400, "invalid_request", "locations must not repeat a location")
    seen: set[str] = set()
    skus = [sku_spec(item, n, locations, seen) for n, item in enumerate(items(body, "skus"))]
    return NewStock(locations, skus)


def sku_spec(item: Any, n: int, locations: list[str], seen: set[str]) -> SkuSpec:
    """SKU `n` of the create request: its id, price and count at each location (0 if unnamed)."""
    if not isinstance(item, dict):
        raise ApiError(400, "invalid_request", f"skus[{n}] must be an object")
    only(item, SKU_FIELDS, f"skus[{n}]")
    sku = stock_ident(item, "sku") or ""
    if sku in seen:
        raise ApiError(400, "invalid_request", f"sku {sku} appears twice")
    seen.add(sku)
    on_hand = item.get("on_hand", {})
    if not isinstance(on_hand, dict):
        raise ApiError(400, "invalid_request", f"on_hand of {sku} must be an object")
    unknown = sorted(on_hand.keys() - set(locations))
    if unknown:
        message = f"on_hand of {sku} names a location the event lacks: {unknown[0]!r}"
        raise ApiError(400, "invalid_request", message[:200])
    counts = {loc: whole({"on_hand": count}, "on_hand") for loc, count in on_hand.items()}
    return SkuSpec(sku, whole(item, "price_minor"), counts)


def cart_of(raw: Any, lines_max: int) -> tuple[StockLine, ...]:
    """A claim's `lines`: 1 to `lines_max` lines of distinct SKUs, each 1 to
    LIMITS["line_quantity"] units, from a location or else by the event's rule."""
    if lines_max < 1:
        raise ApiError(400, "invalid_request", "this endpoint takes no stock lines")
    if not isinstance(raw, list) or not 1 <= len(raw) <= lines_max:
        raise ApiError(400, "invalid_request", f"lines must list 1 to {lines_max} lines")
    quantity = LIMITS["line_quantity"]
    out: list[StockLine] = []
    for n, item in enumerate(raw):
        if not isinstance(item, dict):
            raise ApiError(400, "invalid_request", f"lines[{n}] must be an object")
        only(item, LINE_FIELDS, f"lines[{n}]")
        sku = stock_ident(item, "sku") or ""
        qty = integer(item, "quantity", low=int(quantity.low), high=int(quantity.high))
        out.append(StockLine(sku, qty, stock_ident(item, "location", required=False) or ""))
    if len({line.sku for line in out}) != len(out):
        raise ApiError(400, "invalid_request", "lines must not repeat a sku")
    return tuple(out)


def lines_view(listed: str | tuple[HeldLine, ...]) -> list[holds.HeldLine]:
    held = lines_of(listed) if isinstance(listed, str) else listed
    return [{"sku": x.sku, "location": x.location, "quantity": x.quantity} for x in held]


@endpoint("stock")
async def stock_table(request: Request) -> Response:
    """Availability per SKU and location: one read of the event's stock hash, never a scan."""
    c = ctx(request)
    event_id = path_id(request, "event_id")
    table = await c.store.stock.table(event_id)  # EventNotFound, WrongKind for a seat event
    skus: list[answers.StockSku] = []
    for sku, entry in sorted(table.items()):
        locations = [
            location_view(loc, counts) for loc, counts in sorted(entry["locations"].items())
        ]
        available = sum(x["available"] for x in locations)
        skus.append(
            {"sku": sku, "price_minor": entry["price_minor"], "available": available,
             "locations": locations}
        )  # fmt: skip
    now_ms = await board_of(request).server_time_ms()  # the pages' clock: no read per call
    answer: answers.StockTable = {"event_id": event_id, "skus": skus, "server_time_ms": now_ms}
    return json_response(answer)


def location_view(location: str, counts: dict[str, int]) -> answers.StockLocation:
    """One location's counters of a SKU (0 for one the hash does not hold yet)."""
    on_hand, available, held, blocked, sold = (counts.get(name, 0) for name in COUNTERS)
    return {"location": location, "on_hand": on_hand, "available": available, "held": held,
            "blocked": blocked, "sold": sold}  # fmt: skip


@dataclass(frozen=True, slots=True)
class NewCorrection:
    correction_id: str
    sku: str
    location: str
    set_to: int | None
    adjust_by: int | None
    reason: str
    operator: str


def new_correction(body: dict[str, Any], admin: str) -> NewCorrection:
    only(body, CORRECTION_FIELDS, "correction")
    modes = [name for name in ("set", "adjust") if body.get(name) is not None]
    if len(modes) != 1:
        raise ApiError(400, "invalid_request", "send exactly one of set and adjust")
    value = whole(body, modes[0])
    return NewCorrection(
        correction_id=ident(body, "correction_id") or "",
        sku=stock_ident(body, "sku") or "",
        location=stock_ident(body, "location") or "",
        set_to=value if modes == ["set"] else None,
        adjust_by=value if modes == ["adjust"] else None,
        reason=text(body, "reason"),
        operator=text(body, "operator", admin),
    )


@endpoint("sections")
async def sections(request: Request) -> Response:
    """Seats and free seats per section of a seat map: one ZCOUNT per section over its rank
    range (engine/views/sections.py), never a scan; 409 sections_interleaved for a map whose
    sections share rank ranges."""
    c = ctx(request)
    event_id = path_id(request, "event_id")
    counts = await section_availability(c.store.read, event_id)
    answer: answers.Sections = {
        "sections": [{"section": s.section, "seats": s.seats, "free": s.free} for s in counts]
    }
    return json_response(answer)


@endpoint("admin_stock_correction")
async def correct_stock(request: Request) -> Response:
    """Set or adjust one location's on-hand count, idempotent by correction id: 201 applied,
    200 the replay of one applied before (the figures it left)."""
    c, admin, event_id, body = await admin_post(request)
    new = new_correction(body, admin)
    done = await c.store.stock.correct(
        event_id, new.correction_id, new.sku, new.location,
        set_to=new.set_to, adjust_by=new.adjust_by, reason=new.reason, operator=new.operator,
    )  # fmt: skip
    answer: admin_answers.StockCorrected = {
        "correction_id": done.correction_id,
        "on_hand": done.on_hand,
        "available": done.available,
        "replay": done.replay,
    }
    return json_response(answer, 200 if done.replay else 201)
