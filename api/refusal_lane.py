"""The sold-out lane: a claim on an event this process remembers as sold out is answered before
the token's signature is checked and before the body is read (ADR 0012).

A refusal from memory changes nothing and tells nothing that is not public (`GET
/v1/events/{e}` says the same), so it needs no proof of who asks: what costs most in a refused
claim under the T0 burst is the work done before the answer (the token's signature, the body,
Starlette's request and response objects), about as much again as a trivial request. The lane
still finds out, without trusting it, which login the token names: with the request's
Idempotency-Key that gives the hold id, and a claim whose hold exists (a retry) goes on to the
normal path, which verifies the token and answers REPLAY. Anything the lane cannot read (no
bearer token, a token it cannot decode, an Idempotency-Key the normal path would refuse, a body
without a Content-Length, or larger than the limit) goes the normal way too, which answers it
as before. The answer is the one the normal path gives (same status, body and headers, a
request id, the access line and the metrics); only the order of checks differs: a claim with a
bad token or body on a remembered sold-out event is told `sold_out`, not 401 or 400."""

import time
from typing import Any

import orjson
from starlette.types import Receive, Scope, Send

from api.context import Context
from api.hotpath import Next
from api.logs import request_id_from
from engine import keys
from engine.errors import SoldOut

SLOT = "onsale.gate_slot"  # scope key: this claim holds a place at its event's gate
ROUTE = "claim"  # the metrics' and access log's name of the claim route (api/routes/checkout)
MESSAGE = SoldOut.summary
HEADERS = (b"authorization", b"idempotency-key", b"content-length", b"transfer-encoding")


def _headers(scope: Scope) -> dict[bytes, bytes]:
    found: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        if name in HEADERS:
            found[name] = value
    return found


def _hold_id(c: Context, event_id: str, found: dict[bytes, bytes]) -> str | None:
    """The hold id the normal path would give this claim ('' when it has no Idempotency-Key:
    a fresh id, never a retry); None when the lane cannot tell."""
    raw_key = found.get(b"idempotency-key")
    if raw_key is None:
        return ""
    scheme, _, token = found.get(b"authorization", b"").partition(b" ")
    if scheme.lower() != b"bearer" or not token.strip() or not raw_key.isascii():
        return None
    key = raw_key.decode()
    login = c.identity.peek_login(token.strip().decode("ascii", "replace"))
    if login is None or not keys.valid_id(key):
        return None
    return keys.hold_key(event_id, login, key)


async def refusal_lane(scope: Scope, receive: Receive, send: Send, proceed: Next) -> None:
    """The claim route's way in. With a sold-out memory, the claim waits its turn at the
    event's gate here (engine/soldout.py), before its token is checked: it is then answered
    `sold_out` from memory, or it goes on to the normal path holding a place in flight, which
    the store gives back once Redis answered (or here, if the claim stops before Redis)."""
    c: Context | None = getattr(scope["app"].state, "ctx", None)
    memory = c.store.sold_out if c is not None else None
    if c is None or memory is None:
        await proceed(scope, receive, send)
        return
    event_id = scope["path_params"]["event_id"]
    started = time.perf_counter()
    hold_id = _readable(c, event_id, _headers(scope))
    if hold_id is None:  # the normal path reads it, and waits at the gate there
        await proceed(scope, receive, send)
        return
    if await memory.admit(event_id, hold_id or "-", c.store.timeout_s):
        await _sold_out(scope, receive, send, c, started)
        return
    scope[SLOT] = True  # a place in flight: the store's claim takes it over (api checkout)
    try:
        await proceed(scope, receive, send)
    finally:
        if scope.pop(SLOT, False):  # stopped before Redis (401, 400, no admission, ...)
            memory.release(event_id)


def _readable(c: Context, event_id: str, found: dict[bytes, bytes]) -> str | None:
    """The claim's hold id if the lane can read it (see the module's doc), else None."""
    length = found.get(b"content-length")
    if b"transfer-encoding" in found or length is None or not length.isdigit():
        return None
    if int(length) > c.settings.body_max_bytes:
        return None
    return _hold_id(c, event_id, found)


async def _sold_out(scope: Scope, receive: Receive, send: Send, c: Context, started: float) -> None:
    """The answer the normal path gives a claim refused from memory, with its access line."""
    message: Any = await receive()  # the body (bounded), read so the connection stays usable
    while message.get("more_body"):
        message = await receive()
    rid = request_id_from(scope["headers"])
    body = orjson.dumps({"error": {"code": SoldOut.code, "message": MESSAGE, "request_id": rid}})
    await send(
        {
            "type": "http.response.start",
            "status": 409,
            "headers": [
                (b"content-length", str(len(body)).encode()),
                (b"content-type", b"application/json"),
                (b"x-request-id", rid.encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
    seconds = time.perf_counter() - started
    c.metrics.claimed(SoldOut.code)
    c.metrics.observe(ROUTE, 409, seconds)
    if c.access is not None:
        c.access.write(rid, scope, 409, seconds)
