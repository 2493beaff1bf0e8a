"""Small, strict validators for JSON bodies and query strings: wrong input is a 400 with a
clear message that names only what the client sent.

`LIMITS` is every limit the API enforces on what a client sends, by name: a number's range, a
list's length (`of="items"`), a text's length (`of="chars"`) or an object's number of names
(`of="names"`). The validators below and the
OpenAPI document (api/openapi.py) both read it, so the document states exactly what is refused
(tests/unit/test_api_contract.py checks both against it)."""

import math
from collections.abc import Mapping, Sized
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, cast

from api.errors import ApiError
from engine.model import keys
from engine.model.stock_lines import valid_stock_id
from engine.model.webhooks import EVENT_TYPES


@dataclass(frozen=True, slots=True)
class Bound:
    """An inclusive range; `integer`: whole numbers only (JSON integers, never 1.0 or true).
    `of`: what is bounded: the value ("value"), a list's length ("items"), a text's ("chars"),
    an object's number of names ("names")."""

    low: int | float
    high: int | float
    integer: bool = True
    of: str = "value"

    def schema(self) -> dict[str, Any]:
        if self.of == "items":
            return {"type": "array", "minItems": self.low, "maxItems": self.high}
        if self.of == "chars":
            return {"type": "string", "minLength": self.low, "maxLength": self.high}
        if self.of == "names":
            return {"type": "object", "minProperties": self.low, "maxProperties": self.high}
        kind = "integer" if self.integer else "number"
        return {"type": kind, "minimum": self.low, "maximum": self.high}


# The scripts' numbers are Lua doubles: every integer up to 2^53 - 1 is exact there, so a time
# or an amount past it could be compared or stored wrongly. Every bound below stays inside.
EXACT_MAX = 2**53 - 1
# A seat's rank only orders seats (best available = lowest); a billion either way orders any
# venue, and keeps every rank a double represents to well below a millionth.
RANK_ABS_MAX = 1e9
PARTY_MAX = 6  # seats one claim may ask for (ADR 0021)
LIMITS: Mapping[str, Bound] = MappingProxyType(
    {
        "hold_ttl_ms": Bound(1_000, 86_400_000),  # 1 s .. 1 day
        "quarantine_ms": Bound(1_000, 7 * 86_400_000),  # 1 s .. 1 week
        "price_minor": Bound(0, 10**12),
        "opens_at_ms": Bound(0, EXACT_MAX),  # 0: now, by the server clock
        "rank": Bound(-RANK_ABS_MAX, RANK_ABS_MAX, integer=False),
        "limit": Bound(1, 500),  # items listed by one request (free seats, deliveries)
        "offset": Bound(0, 1_000_000),  # where a page of a list starts (a room's draw, events)
        # What people recognise an event by (ADR 0041); times are ms since the epoch, UTC.
        "name": Bound(1, 120, of="chars"),
        "venue": Bound(1, 120, of="chars"),
        "event_description": Bound(1, 2_000, of="chars"),  # an event's `description`
        "image_url": Bound(1, 500, of="chars"),
        "starts_at_ms": Bound(0, 10**14),
        "time_zone": Bound(1, 64, of="chars"),
        "locale": Bound(2, 35, of="chars"),  # a BCP 47 tag (RFC 5646 keeps them to 35)
        "charging_older_than_ms": Bound(0, EXACT_MAX),
        "batch": Bound(1, 1_000),  # holds one cancel script call examines (ADR 0025)
        "quantity": Bound(1, PARTY_MAX),  # seats one claim asks for: a party (one hold, one charge)
        "max_party": Bound(1, PARTY_MAX),  # an event's own cap on a party (at most "quantity")
        "login_cap": Bound(0, 1_000_000),  # units a login may hold and buy in an event (0: none)
        # Quantity stock (ADR 0022). A cart's amount, lines x line_quantity x price_minor at
        # most, stays an exact integer in the scripts (checked below).
        "locations": Bound(1, 16, of="items"),  # a stock event's locations, in preference order
        "skus": Bound(1, 1_000, of="items"),  # SKUs of one stock event
        "on_hand": Bound(0, 10**9),  # a SKU's initial count at one location
        "lines": Bound(1, 50, of="items"),  # lines of one cart (one SKU each)
        "line_quantity": Bound(1, 100),  # units of one line
        "set": Bound(0, 10**9),  # a correction: the new on-hand count
        "adjust": Bound(-(10**9), 10**9),  # a correction: the change of the on-hand count
        "reason": Bound(1, 500, of="chars"),  # why a count was corrected
        "operator": Bound(1, 64, of="chars"),  # who corrected it
        # Merchant webhooks (ADR 0024): an endpoint's URL, what it is for, the types it wants;
        # how long a rotated-out secret still signs; failed deliveries replayed from when.
        "url": Bound(1, 2_048, of="chars"),
        "description": Bound(0, 500, of="chars"),
        "event_types": Bound(1, len(EVENT_TYPES), of="items"),
        "keep_previous_s": Bound(0, 7 * 86_400),
        "since_ms": Bound(0, EXACT_MAX),
        # The waiting room (ADR 0029): admissions a second, admissions not yet used as a share
        # of the free units (100: as many as are free), and how long an admission lives.
        "admit_per_s": Bound(1, 100_000),
        "admit_factor_pct": Bound(100, 1_000),
        "admission_ttl_ms": Bound(10_000, 3_600_000),
        # Presale access codes (ADR 0049): a window's end and a code's expiry (ms since the
        # epoch), holds one code may be spent by (and by one login: 0, no limit of its own),
        # codes one request adds, given or made.
        "closes_at_ms": Bound(1, EXACT_MAX),
        "expires_at_ms": Bound(1, EXACT_MAX),
        "uses": Bound(1, 1_000_000),
        "uses_per_login": Bound(0, 1_000_000),
        "count": Bound(1, 1_000),
        "codes": Bound(1, 1_000, of="items"),
        # A seat's place on the drawn map (ADR 0028): a position in the map's own units (the
        # page scales the map to fit), a row label, a price level's name (its price when the
        # event has `price_levels`, ADR 0038; display only otherwise).
        "x": Bound(-100_000, 100_000, integer=False),
        "y": Bound(-100_000, 100_000, integer=False),
        "row": Bound(1, 16, of="chars"),
        "seat_number": Bound(1, 16, of="chars"),  # the number (or label) printed on the seat
        "price_level": Bound(1, 32, of="chars"),
        "price_levels": Bound(1, 64, of="names"),
    }
)
assert (
    LIMITS["lines"].high * LIMITS["line_quantity"].high * LIMITS["price_minor"].high < EXACT_MAX
), "a cart's amount must stay exact in the scripts"
SEATS_MAX = 1_000_000  # seats in one event's seat map
SECTION_CHARS_MAX = 64


def obj(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(400, "invalid_request", "the body must be a JSON object")
    return body


def ident(body: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not keys.valid_id(value):
        raise ApiError(
            400, "invalid_request", f"{name} must be a string of [A-Za-z0-9_.:-]{{1,64}}"
        )
    return value


def access_code(body: dict[str, Any], name: str = "access_code") -> str:
    """A presale access code (ADR 0049), or "" when none is sent."""
    value = body.get(name)
    if value is None:
        return ""
    if not isinstance(value, str) or not keys.valid_code(value):
        raise ApiError(400, "invalid_request", f"{name} must be a string of [A-Za-z0-9_-]{{1,32}}")
    return value


def integer(
    body: dict[str, Any], name: str, *, default: int | None = None, low: int = 0, high: int = 2**53
) -> int:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ApiError(400, "invalid_request", f"{name} must be an integer in [{low}, {high}]")
    return value


def stock_ident(body: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    """A SKU or location id: the id alphabet without ':' (engine/store/stock.py)."""
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not valid_stock_id(value):
        raise ApiError(400, "invalid_request", f"{name} must be a string of [A-Za-z0-9_.-]{{1,64}}")
    return value


# What `items` and `names` bound: the JSON type, and the words for it and its parts.
_SIZED: dict[str, tuple[type, str, str]] = {"items": (list, "a list", "items"),
                                            "names": (dict, "an object", "names")}  # fmt: skip


def _sized(body: dict[str, Any], name: str, limit: str, of: str) -> Any:
    """`body[name]`, of the JSON type `of` bounds, its size within `LIMITS[limit]`."""
    bound = LIMITS[limit]
    assert bound.of == of, f"{limit} does not bound {_SIZED[of][1]}"
    kind, noun, parts = _SIZED[of]
    value = body.get(name)
    if not isinstance(value, kind) or not bound.low <= len(cast(Sized, value)) <= bound.high:
        raise ApiError(
            400, "invalid_request", f"{name} must be {noun} of {bound.low} to {bound.high} {parts}"
        )
    return value


def items(body: dict[str, Any], name: str, limit: str | None = None) -> list[Any]:
    """`body[name]`: a list whose length is within `LIMITS[limit or name]` (of="items")."""
    found: list[Any] = _sized(body, name, limit or name, "items")
    return found


def names(body: dict[str, Any], name: str) -> dict[str, Any]:
    """`body[name]`: an object whose number of names is within `LIMITS[name]` (of="names")."""
    found: dict[str, Any] = _sized(body, name, name, "names")
    return found


def text(
    body: dict[str, Any], name: str, default: str | None = None, limit: str | None = None
) -> str:
    """`body[name]` (or `default` when absent or null): a string whose length is within
    `LIMITS[limit or name]` (of="chars"), without control characters."""
    bound = LIMITS[limit or name]
    assert bound.of == "chars", f"{name} does not bound a text"
    value = body.get(name)
    value = default if value is None else value  # null: not given
    if (
        not isinstance(value, str)
        or not bound.low <= len(value) <= bound.high
        or not value.isprintable()
    ):
        raise ApiError(
            400,
            "invalid_request",
            f"{name} must be a printable string of {bound.low} to {bound.high} characters",
        )
    return value


def idempotency_key(header: str | None, fallback: str) -> str:
    if header is None:
        return fallback
    if not keys.valid_id(header):
        raise ApiError(400, "invalid_request", "Idempotency-Key must match [A-Za-z0-9_.:-]{1,64}")
    return header


def whole(body: dict[str, Any], name: str, default: int | None = None) -> int:
    """`body[name]` (or `default`): an integer within `LIMITS[name]`."""
    bound = LIMITS[name]
    assert bound.integer and bound.of == "value", f"{name} is not a whole-number limit"
    return integer(body, name, default=default, low=int(bound.low), high=int(bound.high))


def number(value: Any, name: str, bound: Bound) -> float:
    """`value` as a finite number within `bound` (a JSON integer or float, never a bool)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not bound.low <= value <= bound.high
    ):
        raise ApiError(
            400, "invalid_request", f"{name} must be a number in [{bound.low:g}, {bound.high:g}]"
        )
    return float(value)


def query_integer(params: Mapping[str, str], name: str, default: int) -> int:
    """An integer query parameter within `LIMITS[name]`: ASCII digits only (no sign, no
    exponent, no other script's digits), at most 16 of them."""
    raw = params.get(name)
    if raw is None:
        return default
    bound = LIMITS[name]
    digits = raw.isascii() and raw.isdigit() and len(raw) <= 16
    if not digits or not bound.low <= int(raw) <= bound.high:
        raise ApiError(
            400, "invalid_request", f"{name} must be an integer in [{bound.low}, {bound.high}]"
        )
    return int(raw)


def one_of(body: dict[str, Any], name: str, allowed: tuple[str, ...], default: str) -> str:
    value = body.get(name, default)
    if value not in allowed:
        raise ApiError(400, "invalid_request", f"{name} must be one of {', '.join(allowed)}")
    assert isinstance(value, str)
    return value


def only(body: dict[str, Any], allowed: frozenset[str], where: str) -> None:
    """Refuse fields the schema does not name: a misspelt option is an error, not a default."""
    unknown = body.keys() - allowed
    if unknown:
        raise ApiError(400, "invalid_request", f"{where}: unknown field {min(unknown)!r}"[:200])
