"""Small, strict validators for JSON bodies and query strings: wrong input is a 400 with a
clear message that names only what the client sent.

`LIMITS` is every numeric limit the API enforces, by field name: the validators below and the
OpenAPI document (api/openapi.py) both read it, so the document states exactly what is refused
(tests/unit/test_api_limits.py checks both against it)."""

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from api.errors import ApiError
from engine import keys


@dataclass(frozen=True, slots=True)
class Bound:
    """An inclusive range; `integer`: whole numbers only (JSON integers, never 1.0 or true)."""

    low: int | float
    high: int | float
    integer: bool = True

    def schema(self) -> dict[str, Any]:
        kind = "integer" if self.integer else "number"
        return {"type": kind, "minimum": self.low, "maximum": self.high}


# The scripts' numbers are Lua doubles: every integer up to 2^53 - 1 is exact there, so a time
# or an amount past it could be compared or stored wrongly. Every bound below stays inside.
EXACT_MAX = 2**53 - 1
# A seat's rank only orders seats (best available = lowest); a billion either way orders any
# venue, and keeps every rank a double represents to well below a millionth.
RANK_ABS_MAX = 1e9
LIMITS: Mapping[str, Bound] = MappingProxyType(
    {
        "hold_ttl_ms": Bound(1_000, 86_400_000),  # 1 s .. 1 day
        "quarantine_ms": Bound(1_000, 7 * 86_400_000),  # 1 s .. 1 week
        "price_minor": Bound(0, 10**12),
        "opens_at_ms": Bound(0, EXACT_MAX),  # 0: now, by the server clock
        "rank": Bound(-RANK_ABS_MAX, RANK_ABS_MAX, integer=False),
        "limit": Bound(1, 500),  # free seats listed by one request
        "charging_older_than_ms": Bound(0, EXACT_MAX),
        "quantity": Bound(1, 6),  # seats one claim asks for: a party (one hold, one charge)
    }
)
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


def integer(
    body: dict[str, Any], name: str, *, default: int | None = None, low: int = 0, high: int = 2**53
) -> int:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ApiError(400, "invalid_request", f"{name} must be an integer in [{low}, {high}]")
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
    assert bound.integer, f"{name} is not a whole-number limit"
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
