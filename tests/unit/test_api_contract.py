"""What the API promises an integrator, checked against what it does, in process: every limit
the validators enforce (a number's range, a list's or a text's length) is the one the OpenAPI
document states, every error a client can meet is documented with a 4xx or 503 (and an
operation's named codes under their own status), and an error tells the client its summary,
never the engine's internal message."""

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.requests import Request

from api.errors import STATUS, ApiError, from_engine
from api.openapi import OPENAPI
from api.validate import (
    LIMITS,
    SEATS_MAX,
    SECTION_CHARS_MAX,
    items,
    names,
    number,
    query_integer,
    text,
    whole,
)
from engine.model import errors

API_DIR = Path(__file__).resolve().parents[2] / "api"


def resolved(schema: dict[str, Any]) -> dict[str, Any]:
    """A component schema (`$ref`: bodies are named schemas, ADR 0026) or `schema` itself."""
    if "$ref" not in schema:
        return schema
    found: dict[str, Any] = OPENAPI["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return found


def numeric_schemas() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(where, limit name, schema) of every number a client sends, and of every list or text
    whose size is a limit (`x-limit`): query parameters and request bodies, at any depth. A
    field bounded by a limit of another name says which (`x-limit`)."""

    def walk(where: str, name: str, schema: dict[str, Any]) -> Iterator[tuple[str, str, Any]]:
        schema = resolved(schema)
        if schema.get("type") in ("integer", "number") or "x-limit" in schema:
            yield where, schema.get("x-limit", name), schema
        for prop, sub in schema.get("properties", {}).items():
            yield from walk(where, prop, sub)
        if "items" in schema:
            yield from walk(where, name, schema["items"])
        if isinstance(schema.get("additionalProperties"), dict):
            yield from walk(where, name, schema["additionalProperties"])

    for path, operations in OPENAPI["paths"].items():
        for method, op in operations.items():
            for p in op.get("parameters", []):
                yield from walk(f"{method} {path} {p['in']}", p["name"], p["schema"])
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
            yield from walk(f"{method} {path} body", "", body.get("schema", {}))


def test_every_number_a_client_sends_has_the_bounds_the_server_enforces() -> None:
    seen = set()
    for where, name, schema in numeric_schemas():
        assert name in LIMITS, f"{where}: {name} has no limit in api/validate.py LIMITS"
        bounds = {k: schema.get(k) for k in LIMITS[name].schema()}
        assert bounds == LIMITS[name].schema(), f"{where}: {name}"
        seen.add(name)
    assert seen == set(LIMITS)  # and no limit is enforced without being documented


def test_sizes_of_the_seat_map_are_documented() -> None:
    create = OPENAPI["paths"]["/v1/admin/events"]["post"]["requestBody"]
    seats = resolved(create["content"]["application/json"]["schema"])["properties"]["seats"]
    assert (seats["minItems"], seats["maxItems"]) == (1, SEATS_MAX)
    seat = resolved(seats["items"])
    assert seat["properties"]["section"]["maxLength"] == SECTION_CHARS_MAX
    assert seat["additionalProperties"] is False


def _values_around(name: str, query: bool) -> tuple[list[Any], list[Any]]:
    """(accepted, refused) values at the edges of LIMITS[name], as a body or a query sends them."""
    b = LIMITS[name]
    lo, hi = int(b.low), int(b.high)
    if b.of == "items":
        return [[0] * lo, [0] * hi], [[0] * (lo - 1), [0] * (hi + 1), {}, "x", None]
    if b.of == "names":
        many = {f"n{i}": 0 for i in range(hi)}
        return [{"a": 0}, many], [{}, {**many, "more": 0}, [0], "x", None]
    if b.of == "chars":
        short = ["x" * (lo - 1)] if lo > 0 else []
        return ["x" * lo, "é" * hi], [*short, "x" * (hi + 1), "a\x00b", "a\nb", 5, None]
    if query:
        lo, hi = int(b.low), int(b.high)
        odd = [f"{lo}.0", "1e2", "+1", "²", "9" * 5000]  # not plain ASCII digits, or too many
        return [str(lo), str(hi)], [str(lo - 1), str(hi + 1), *odd]
    if b.integer:
        return [b.low, b.high], [b.low - 1, b.high + 1, float(b.low), True, "1", None]
    return [b.low, b.high, 0, 0.5], [b.low * 1.001, b.high * 1.001, 1e308, True, "1", None]


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_the_server_accepts_exactly_the_documented_range(name: str) -> None:
    query = name in {n for where, n, _ in numeric_schemas() if " query" in where}
    accepted, refused = _values_around(name, query)

    def check(value: Any) -> Any:
        if query:
            return str(query_integer({name: value}, name, 0))
        if LIMITS[name].of == "items":
            return items({name: value}, name)
        if LIMITS[name].of == "names":
            return names({name: value}, name)
        if LIMITS[name].of == "chars":
            return text({name: value}, name)
        if LIMITS[name].integer:
            return whole({name: value}, name)
        return number(value, name, LIMITS[name])

    for value in accepted:
        assert check(value) == value
    for value in refused:
        with pytest.raises(ApiError) as caught:
            check(value)
        assert (caught.value.status, caught.value.code) == (400, "invalid_request"), value


def _subclasses(cls: type[errors.EngineError]) -> Iterator[type[errors.EngineError]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_every_engine_error_says_what_happened_with_a_4xx_or_503() -> None:
    for cls in _subclasses(errors.EngineError):
        assert cls.summary != errors.EngineError.summary, f"{cls.__name__} has no summary"
        assert 400 <= STATUS[cls.code] < 500 or STATUS[cls.code] == 503, cls.code


def test_every_error_code_is_documented() -> None:
    used = set(STATUS)
    for source in API_DIR.rglob("*.py"):
        used |= set(re.findall(r'ApiError\(\s*\d+,\s*"([a-z_]+)"', source.read_text()))
    documented = OPENAPI["components"]["schemas"]["Error"]["properties"]["error"]["properties"]
    assert used <= set(documented["code"]["enum"])
    assert used <= set(STATUS)  # every code has its status in the one map


def test_the_codes_an_operation_names_are_answered_with_their_status() -> None:
    named = 0
    for path, operations in OPENAPI["paths"].items():
        for method, op in operations.items():
            for status, answer in op["responses"].items():
                for code in answer.get("x-error-codes", ()):
                    assert STATUS[code] == int(status), f"{method} {path}: {code} under {status}"
                    named += 1
    assert named  # the claim, the create and the stock operations name theirs


def _request() -> Request:
    return Request({"type": "http", "method": "GET", "headers": []})


def _told(exc: errors.EngineError) -> dict[str, Any]:
    error: dict[str, Any] = orjson.loads(bytes(from_engine(_request(), exc).body))["error"]
    return error


@pytest.mark.parametrize(
    "exc",
    [
        errors.StoreUnavailable("hold_claim: ConnectionError('Error 111 connecting to 10.0.0.7')"),
        errors.SoldOut("claim 9f86d081884c7d659a2feaa0c55ad015: SOLD_OUT (remembered)"),
        errors.ChargeInFlight("start charge ev~0123456789abcdef01234567: CHARGE_IN_FLIGHT"),
        errors.NotAnException("hold h-of-someone-else is CONFIRMED, not EXCEPTION"),
    ],
)
def test_a_client_is_told_the_summary_never_the_internal_message(exc: errors.EngineError) -> None:
    told = _told(exc)
    assert told["message"] == type(exc).summary
    assert exc.message not in orjson.dumps(told).decode()


def test_a_refusal_tells_only_its_public_details() -> None:
    not_open = _told(errors.SaleNotOpen("x", opens_at_ms=1_900_000_000_000, reply=[1]))
    assert (not_open["opens_at_ms"], "reply" in not_open) == (1_900_000_000_000, False)
    assert _told(errors.SaleNotOpen("x", opens_at_ms=0))["opens_at_ms"] is None  # a DRAFT
    assert _told(errors.SaleNotOpen("x"))["opens_at_ms"] is None
    captured = _told(errors.ChargeCaptured("abandon ev~0123", charge_state="CAPTURED"))
    assert captured["charge_state"] == "CAPTURED"
    assert set(captured) == {"code", "message", "request_id", "charge_state"}
