"""Webhook signatures: HMAC-SHA256 over "<timestamp>.<raw body>", sent as
`Onsale-Signature: t=<unix seconds>,v1=<hex>`. The provider simulator signs with it and the
callback endpoint verifies it (constant-time compare, bounded clock tolerance). During a secret
rollover the endpoint accepts either of two secrets (the new one and the one going out)."""

import hashlib
import hmac
from collections.abc import Sequence

HEADER = "Onsale-Signature"


class BadSignature(Exception):
    pass


def sign(secret: str, body: bytes, timestamp: int) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def verify(
    secret: str | Sequence[str], body: bytes, header: str | None, now_s: float, tolerance_s: int
) -> None:
    """Raise BadSignature unless `header` is a valid, fresh signature of `body` by `secret` (or
    by one of several: every one is compared, so the time taken says nothing of which)."""
    if not header:
        raise BadSignature("missing signature")
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    try:
        timestamp = int(parts["t"])
        given = parts["v1"]
    except (KeyError, ValueError):
        raise BadSignature("malformed signature header") from None
    if abs(now_s - timestamp) > tolerance_s:
        raise BadSignature("stale or future timestamp")
    given_bytes = given.encode("utf-8", "surrogateescape")
    matched = False
    for one in (secret,) if isinstance(secret, str) else secret:
        expected = sign(one, body, timestamp).split("v1=", 1)[1]
        matched |= hmac.compare_digest(expected.encode(), given_bytes)
    if not matched:
        raise BadSignature("signature mismatch")
