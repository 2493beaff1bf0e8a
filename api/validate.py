"""Small, strict validators for JSON bodies: wrong input is a 400 with a clear message."""

from typing import Any

from api.errors import ApiError
from engine import keys


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
