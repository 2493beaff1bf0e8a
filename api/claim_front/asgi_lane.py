"""The claim front's ASGI lane: a claim on an event this process remembers as sold out is
answered before its token's signature is checked (ADR 0048; the sold-out memory is ADR 0012).

What costs most in a refused claim under the T0 burst is the work done before the answer (the
token's signature, Starlette's request and response objects). The lane reads the body first
(bounded by its Content-Length), so a slow upload never holds a place at the gate, then waits
its turn at the event's gate (engine/gate/soldout.py) and applies the front's rules
(api/claim_front/rules.py): answered `sold_out` from memory, or on to the normal path holding a
place in flight. What the rules cannot read goes the normal way, which answers it as before.
The answers are the normal path's, made by the same wrapper (api/context.py `endpoint`: status,
body, headers, request id, access line, metrics); only the order of checks differs: on a
remembered sold-out event a claim with a bad token or body is told `sold_out`.

With `onsale serve` a claim usually gets here already looked at by its connection
(api/claim_front/connection.py): its ticket says so (`looked`), with a place in flight taken
or the refusal to answer (a wait that failed)."""

import time

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from api.claim_front.route import Next
from api.claim_front.rules import ROUTE, readable, refused_after
from api.claim_front.ticket import Ticket, give, ticket_of
from api.context import Context, ctx, endpoint
from api.errors import from_engine
from engine.gate.soldout import SoldOutMemory
from engine.model.errors import EngineError, SoldOut, StoreUnavailable


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


async def asgi_lane(scope: Scope, receive: Receive, send: Send, proceed: Next) -> None:
    """The claim route's way in. With a sold-out memory, the claim waits its turn at the
    event's gate here, before its token is checked: it is then answered `sold_out` from memory,
    or it goes on to the normal path holding a place in flight, which the store gives back once
    Redis answered (or here, if the claim stops before Redis)."""
    c: Context | None = getattr(scope["app"].state, "ctx", None)
    memory = c.sold_out if c is not None else None
    ticket = ticket_of(scope)
    if ticket is not None and ticket.looked:  # only where the app's memory was found
        assert memory is not None
        await _after_its_connection(scope, receive, send, proceed, ticket, memory)
        return
    event_id = scope["path_params"]["event_id"]
    claim = readable(c, event_id, scope) if c is not None and memory is not None else None
    if c is None or memory is None or claim is None:
        await proceed(scope, receive, send)  # the normal path waits at the gate itself
        return
    ticket = give(scope, Ticket(time.perf_counter()))  # the access line counts the wait too
    messages = await _body(receive)
    if messages is None:
        return
    try:
        refused = await memory.admit(event_id, claim.hold_id or "-", c.store.timeout_s)
    except StoreUnavailable as exc:
        await _answer(scope, receive, send, ticket, exc)
        return
    if refused_after(c, memory, event_id, refused, claim):
        await _answer(scope, receive, send, ticket, SoldOut())
        return
    ticket.placed = True  # a place in flight: the store's claim takes it over (api checkout)
    await _holding_place(scope, _replay(messages, receive), send, proceed, ticket, memory)


async def _after_its_connection(
    scope: Scope,
    receive: Receive,
    send: Send,
    proceed: Next,
    ticket: Ticket,
    memory: SoldOutMemory,
) -> None:
    """Its connection's verdict: a failed wait is answered; otherwise the claim holds a place
    in flight and goes on to the normal path."""
    if ticket.refusal is not None:
        await _answer(scope, receive, send, ticket, ticket.refusal)
        return
    await _holding_place(scope, receive, send, proceed, ticket, memory)


async def _holding_place(
    scope: Scope, receive: Receive, send: Send, proceed: Next, ticket: Ticket, memory: SoldOutMemory
) -> None:
    try:
        await proceed(scope, receive, send)
    finally:
        if ticket.placed:  # stopped before Redis (401, 400, no admission, ...)
            ticket.placed = False
            memory.release(scope["path_params"]["event_id"])


async def _answer(
    scope: Scope, receive: Receive, send: Send, ticket: Ticket, exc: EngineError
) -> None:
    """The normal path's answer to this refusal: the claim route's own wrapper (api/context.py
    `endpoint`: the error body, request id, metrics and access line) around raising it."""
    ticket.refusal = exc
    response = await _refused(Request(scope, receive))
    await response(scope, receive, send)


@endpoint(ROUTE)
async def _refused(request: Request) -> Response:
    ticket = ticket_of(request.scope)
    assert ticket is not None and ticket.refusal is not None
    ctx(request).metrics.claimed(ticket.refusal.code)
    return from_engine(request, ticket.refusal)  # what `endpoint` answers to it raised
