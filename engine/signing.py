"""Webhook signatures: HMAC-SHA256 over "<timestamp>.<raw body>", sent as
`Onsale-Signature: t=<unix seconds>,v1=<hex>`. The provider simulator signs with it and the
callback endpoint verifies it (constant-time compare, bounded clock tolerance)."""

import hashlib
import hmac

HEADER = "Onsale-Signature"


class BadSignature(Exception):
    pass


def sign(secret: str, body: bytes, timestamp: int) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def verify(secret: str, body: bytes, header: str | None, now_s: float, tolerance_s: int) -> None:
    """Raise BadSignature unless `header` is a valid, fresh signature of `body`."""
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
    expected = sign(secret, body, timestamp).split("v1=", 1)[1]
    if not hmac.compare_digest(expected.encode(), given.encode("utf-8", "surrogateescape")):
        raise BadSignature("signature mismatch")
