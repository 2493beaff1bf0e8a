"""The sold-out lane: a claim on an event this process remembers as sold out is answered before
its token's signature is checked (ADR 0012).

A refusal from memory changes nothing and tells nothing that is not public (`GET
/v1/events/{e}` says the same), so it needs no proof of who asks: what costs most in a refused
claim under the T0 burst is the work done before the answer (the token's signature, Starlette's
request and response objects), about as much again as a trivial request. The lane reads the
body first (bounded by its Content-Length), so a slow upload never holds a place at the gate.
It finds out, without trusting it, which login the token names: with the request's
Idempotency-Key that gives the hold id. A claim whose hold exists (a retry) has its token
checked here, and goes on to the normal path, which answers REPLAY, only if the token is good;
a forged one is told `sold_out` like everyone else, so the answer never says whether a login
used a key. A claim without an Idempotency-Key is never a retry: it is answered whatever its
token. What the lane cannot read (an unusable event id, a token it cannot decode, an
Idempotency-Key the normal path would refuse, several of them, a body without a Content-Length
or over the limit) goes the normal way, which answers it as before. The answers are the normal
path's, made by the same wrapper (status, body, headers, request id, access line, metrics); only
the order of checks differs: on a remembered sold-out event a claim with a bad token or body is
told `sold_out`.

With `onsale serve` a claim usually gets here already looked at: its connection held it at the
gate with no ASGI request (api/early_lane.py, ADR 0035) and answered it there when refused; what
reaches this lane then is its verdict, under EARLY: a place in flight taken (the claim goes on
to the normal path), or a wait that failed (answered here). The rules of both are the ones
below (`readable`, `refused_after`)."""

import time

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from api.context import STARTED, Context, ctx, endpoint
from api.errors import from_engine
from api.hotpath import Next
from engine.gate.soldout import SoldOutMemory
from engine.model import keys
from engine.model.errors import EngineError, SoldOut, StoreUnavailable

SLOT = "onsale.gate_slot"  # scope key: this claim holds a place at its event's gate
EARLY = "onsale.early"  # scope key: its connection's verdict (api/early_lane.py)
REFUSAL = "onsale.refusal"  # scope key: the refusal the lane answers
ROUTE = "claim"  # the metrics' and access log's name of the claim route (api/routes/checkout)
HEADERS = (b"authorization", b"idempotency-key", b"content-length", b"transfer-encoding")
TOKEN_MAX = 4096  # a longer bearer token is not read here (the normal path answers it)


def _headers(scope: Scope) -> dict[bytes, bytes] | None:
    """The headers the lane reads, the first of each (as Starlette's `get`); None when one it
    reads comes twice (the normal path decides what that means)."""
    found: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        if name in HEADERS:
            if name in found:
                return None
            found[name] = value
    return found


def _claim_of(c: Context, event_id: str, found: dict[bytes, bytes]) -> tuple[str, str, str] | None:
    """(hold id, bearer token, the login it names unverified) as the normal path would see
    them (hold id '' without an Idempotency-Key: a fresh one, never a retry); None when the
    lane cannot tell."""
    scheme, _, raw = found.get(b"authorization", b"").partition(b" ")
    token = raw.strip().decode("ascii", "replace") if scheme.lower() == b"bearer" else ""
    raw_key = found.get(b"idempotency-key")
    if raw_key is None:
        return "", token, ""
    if not token or len(token) > TOKEN_MAX or not raw_key.isascii():
        return None
    key = raw_key.decode()
    login = c.identity.peek_login(token)
    if login is None or not keys.valid_id(key):
        return None
    return keys.hold_key(event_id, login, key), token, login


def readable(
    c: Context, event_id: str, scope: Scope, body_max: int | None = None
) -> tuple[str, str, str] | None:
    """(hold id, token, login) of a claim the lane may answer, read from its headers: None
    when it goes the normal way. `body_max`: the largest Content-Length taken (the body limit
    by default)."""
    found = _headers(scope)
    if found is None or not keys.valid_id(event_id) or b"transfer-encoding" in found:
        return None
    length = found.get(b"content-length")
    limit = c.settings.body_max_bytes if body_max is None else body_max
    if length is None or not length.isdigit() or int(length) > limit:
        return None
    return _claim_of(c, event_id, found)


def refused_after(
    c: Context, memory: SoldOutMemory, event_id: str, refused: bool, claim: tuple[str, str, str]
) -> bool:
    """The gate's verdict (True: refused), a retry's token checked. A claim let through only
    because its hold exists (a retry) goes on only if its token is good; a forged one is told
    what everyone else is (its answer must not say whether the hold exists) and gives its place
    in flight back."""
    hold_id, token, login = claim
    retry = not refused and hold_id and memory.remembers(event_id)
    if retry and c.identity.names(token, login) is False:
        memory.release(event_id)
        return True
    return refused


async def _body(receive: Receive) -> list[Message] | None:
    """Every message of the request's body (bounded by the Content-Length checked above);
    None if the client went away."""
    messages = [await receive()]
    while messages[-1]["type"] == "http.request" and messages[-1].get("more_body"):
        messages.append(await receive())
    return None if messages[-1]["type"] == "http.disconnect" else messages


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A `receive` that gives the body already read, then what the client sends next."""
    pending = list(messages)

    async def replayed() -> Message:
        return pending.pop(0) if pending else await receive()

    return replayed


async def refusal_lane(scope: Scope, receive: Receive, send: Send, proceed: Next) -> None:
    """The claim route's way in. With a sold-out memory, the claim waits its turn at the
    event's gate here (engine/gate/soldout.py), before its token is checked: it is then answered
    `sold_out` from memory, or it goes on to the normal path holding a place in flight, which
    the store gives back once Redis answered (or here, if the claim stops before Redis)."""
    c: Context | None = getattr(scope["app"].state, "ctx", None)
    memory = c.sold_out if c is not None else None
    event_id = scope["path_params"]["event_id"]
    early = scope.pop(EARLY, None)
    if early is not None:  # set only where the app's memory was found (api/early_lane.py)
        assert memory is not None
        await _after_early(scope, receive, send, proceed, early, memory)
        return
    claim = readable(c, event_id, scope) if c is not None and memory is not None else None
    if c is None or memory is None or claim is None:
        await proceed(scope, receive, send)  # the normal path waits at the gate itself
        return
    scope[STARTED] = time.perf_counter()  # the access line counts the wait too
    messages = await _body(receive)
    if messages is None:
        return
    try:
        refused = await memory.admit(event_id, claim[0] or "-", c.store.timeout_s)
    except StoreUnavailable as exc:
        await _answer(scope, receive, send, exc)
        return
    if refused_after(c, memory, event_id, refused, claim):
        await _answer(scope, receive, send, SoldOut())
        return
    scope[SLOT] = True  # a place in flight: the store's claim takes it over (api checkout)
    await _holding_place(scope, _replay(messages, receive), send, proceed, memory)


async def _after_early(
    scope: Scope,
    receive: Receive,
    send: Send,
    proceed: Next,
    early: object,
    memory: SoldOutMemory,
) -> None:
    """Its connection's verdict: a failed wait (an EngineError) is answered; otherwise the
    claim holds a place in flight (SLOT) and goes on to the normal path."""
    if isinstance(early, EngineError):
        await _answer(scope, receive, send, early)
        return
    await _holding_place(scope, receive, send, proceed, memory)


async def _holding_place(
    scope: Scope, receive: Receive, send: Send, proceed: Next, memory: SoldOutMemory
) -> None:
    try:
        await proceed(scope, receive, send)
    finally:
        if scope.pop(SLOT, False):  # stopped before Redis (401, 400, no admission, ...)
            memory.release(scope["path_params"]["event_id"])


async def _answer(scope: Scope, receive: Receive, send: Send, exc: EngineError) -> None:
    """The normal path's answer to this refusal: the claim route's own wrapper (api/context.py
    `endpoint`: the error body, request id, metrics and access line) around raising it."""
    scope[REFUSAL] = exc
    response = await _refused(Request(scope, receive))
    await response(scope, receive, send)


@endpoint(ROUTE)
async def _refused(request: Request) -> Response:
    exc: EngineError = request.scope[REFUSAL]
    ctx(request).metrics.claimed(exc.code)
    return from_engine(request, exc)  # what `endpoint` answers to it raised, without the raise
