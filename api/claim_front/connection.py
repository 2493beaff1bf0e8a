"""The claim front's connection: a claim looked at by its connection before it becomes an ASGI
request (ADR 0048; first ADR 0035).

At T0 nearly every claim is a refusal, and nearly all of them arrive before Redis has said the
event is sold out: each waits at its event's gate (engine/gate/claim_gate.py) until the sold-out
memory answers it (ADR 0012). As an ASGI request, each such claim costs a task with its scope,
cycle and coroutine frames (alive while it waits), the middleware, Starlette's request and
response, and two writes: more than a trivial request costs in all. `LaneProtocol`, uvicorn's
httptools protocol with the HTTP bounds (api/transport.py), holds such a claim itself. The
parsed request waits at the gate with no task, and a refusal is written in one write: the
normal path's own answer (`from_engine`: status, headers, body, request id), with its metrics
and access line. Everything else goes on as an ASGI request, exactly as before:

- a claim the gate lets through to Redis: it takes its place in flight here, and the ASGI lane
  (api/claim_front/asgi_lane.py) hands it straight to the normal path; a claim whose wait
  failed (503 `store_unavailable`, answered there); its ticket (api/claim_front/ticket.py)
  says which;
- what the lane cannot read (`rules.readable`: no Content-Length, a repeated header, an
  unreadable token or Idempotency-Key, ...), a body over BODY_MAX, `Expect: 100-continue`, a
  request pipelined behind another on its connection, a claim while the connection's writes
  are paused (the ASGI path waits for the drain), a process without the sold-out memory, and
  any app whose claim route is not marked `early` (the PostgreSQL baseline);
- a claim the lane failed on (a bug: logged, its place given back).

A held request keeps uvicorn's own bookkeeping: its cycle is built as usual and only its task is
not started. A request pipelined behind it waits in uvicorn's queue and starts once it is
answered; a client that goes away leaves the gate (a turn it was given passes on); a graceful
shutdown waits for a held claim as for any request (uvicorn waits for the connections to close,
and a connection asked to stop closes after its answer). What it relies on of uvicorn's
httptools protocol (`_start_asgi_task`, `on_response_complete`, the cycle's
`response_complete` and `keep_alive`, ...) is named in api/claim_front/uvicorn_seam.py."""

import asyncio
import copy
import logging
import time
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from api.claim_front.route import HotRoute
from api.claim_front.rules import ROUTE, Claim, readable, refused_after
from api.claim_front.ticket import Ticket, give
from api.claim_front.uvicorn_seam import STATUS_LINE, ProxyHeadersMiddleware, RequestResponseCycle
from api.context import Context, answered
from api.errors import STATUS, from_engine
from api.logs import request_id_from
from api.transport import BoundedHttpToolsProtocol
from engine.config.logs import REQUEST_ID
from engine.gate.claim_gate import Wait
from engine.gate.soldout import SoldOutMemory
from engine.model.errors import EngineError, SoldOut, StoreUnavailable

log = logging.getLogger("onsale.api")

BODY_MAX = 4096  # a claim's body is tens of bytes; a larger one is read by the ASGI lane
FORWARDED = (b"x-forwarded-for", b"x-forwarded-proto")


@dataclass(slots=True, eq=False)
class Held:
    """A claim its connection holds: parsed, not yet an ASGI request."""

    cycle: RequestResponseCycle
    event_id: str
    claim: Claim
    started: float  # time.perf_counter() at the end of its headers (its access line's start)
    arrived: float = 0.0  # loop time of its first look at the gate
    placed: bool = False  # it holds a place in flight not yet handed on (given back on a bug)
    turn: "asyncio.Future[None] | None" = None  # its place in the gate's queue while it waits


def claim_route(app: Any) -> HotRoute | None:
    """The app's claim route, when it is marked `early` (behind uvicorn's proxy middleware)."""
    if isinstance(app, ProxyHeadersMiddleware):
        app = app.app
    return app if isinstance(app, HotRoute) and app.early else None


class LaneProtocol(BoundedHttpToolsProtocol):
    """`onsale serve`'s protocol: the HTTP bounds, and the early lane for the claim route."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._route = claim_route(self.app)
        self._proxy = self.app if isinstance(self.app, ProxyHeadersMiddleware) else None
        self._fresh = False  # inside on_headers_complete: a task started now is a new request's
        self._held: Held | None = None
        self._ctx: Context | None = None  # the app's, once found (a held claim implies it)

    # -- uvicorn's hooks --------------------------------------------------------------------

    def on_message_begin(self) -> None:
        # A refusal written while this packet is parsed armed the keep-alive timer (uvicorn
        # cancels it at a packet's first byte): a request that follows in the same packet must
        # not run under it.
        self._unset_keepalive_if_required()
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._fresh = True
        try:
            super().on_headers_complete()
        finally:
            self._fresh = False

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        if self._fresh and self.transport.is_closing():
            return  # read after an answer that closed the connection: nobody to answer
        if self._fresh and app is self.app and self._route is not None:
            self._held = self._hold(cycle)
            if self._held is not None:
                return
        super()._start_asgi_task(cycle, app)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        held = self._held
        if held is not None and held.cycle is self.cycle and held.turn is None:
            self._look(held, woken=False)

    def connection_lost(self, exc: Exception | None) -> None:
        held, self._held = self._held, None
        if held is not None and held.turn is not None:
            held.turn.cancel()  # leaves the queue; a turn already given passes on (_turn_ended)
        super().connection_lost(exc)

    # -- the lane ---------------------------------------------------------------------------

    def _context(self) -> Context | None:
        """The app's context (set at its startup), once it has a sold-out memory."""
        if self._ctx is None:
            assert self._route is not None
            state = getattr(self._route.app, "state", None)  # the Starlette app's
            c: Context | None = getattr(state, "ctx", None)
            self._ctx = c if c is not None and c.sold_out is not None else None
        return self._ctx

    def _hold(self, cycle: RequestResponseCycle) -> Held | None:
        """The claim held, or None: an ASGI request. Not while writes are paused (a client
        that does not read its answers): the ASGI path waits for the drain, this lane would
        not."""
        assert self._route is not None
        scope = cycle.scope
        if scope["method"] != self._route.method or self.expect_100_continue:
            return None
        if self.flow.write_paused:
            return None
        try:
            return self._readable(cycle)
        except Exception:  # a bug: never a 400 from the parser (it calls this)
            log.exception("early lane: reading a claim")
            return None

    def _readable(self, cycle: RequestResponseCycle) -> Held | None:
        assert self._route is not None
        scope = cycle.scope
        found = self._route.pattern.fullmatch(scope["path"])
        c = self._context() if found is not None else None
        if found is None or c is None:
            return None
        event_id = found["event_id"]
        limit = min(BODY_MAX, c.settings.body_max_bytes)
        claim = readable(c, event_id, scope, limit)
        return Held(cycle, event_id, claim, time.perf_counter()) if claim is not None else None

    def _look(self, held: Held, woken: bool) -> None:
        """The gate's verdict, as the ASGI lane's `admit` takes it: answered sold_out here, a
        place in flight taken (on to ASGI), or a wait in the gate's queue. A failure here is
        a bug: it is logged and the claim goes on to ASGI, its place (if it took one) given
        back first; never a hung connection, never the parser's 400."""
        try:
            self._ask(held, woken)
        except Exception:
            log.exception("early lane: claim on %s", held.event_id)
            if held.placed:
                self._memory().release(held.event_id)
            if self._held is held:
                self._go_on(held, None)

    def _memory(self) -> SoldOutMemory:
        """The app's sold-out memory: found before any claim was held (`_readable`)."""
        assert self._ctx is not None and self._ctx.sold_out is not None
        return self._ctx.sold_out

    def _ask(self, held: Held, woken: bool) -> None:
        c, memory = self._ctx, self._memory()
        assert c is not None
        if not woken:
            held.arrived = self.loop.time()
        verdict = memory.ask(held.event_id, held.claim.hold_id or "-", woken)
        if isinstance(verdict, Wait):
            held.turn = memory.gates.wait_then(
                held.event_id,
                verdict,
                held.arrived,
                c.store.timeout_s,
                woken,
                lambda turn: self._turn_ended(memory, held, turn),
            )
            return
        held.placed = not verdict
        if refused_after(c, memory, held.event_id, verdict, held.claim):
            held.placed = False  # (given back by refused_after)
            self._sold_out(c, held)
        else:
            # a place in flight: the store's claim takes it over (api/routes/checkout.py)
            held.placed = False
            self._go_on(held, Ticket(held.started, looked=True, placed=True))

    def _turn_ended(self, memory: SoldOutMemory, held: Held, turn: "asyncio.Future[None]") -> None:
        if turn.cancelled():
            return
        failed = turn.exception()
        if held is not self._held:  # the client went away
            if failed is None:
                memory.gates.pass_turn(held.event_id)
            return
        held.turn = None
        if failed is not None:  # waited too long (StoreUnavailable): 503, from the ASGI lane
            error = failed if isinstance(failed, EngineError) else StoreUnavailable(repr(failed))
            self._go_on(held, Ticket(held.started, looked=True, refusal=error))
        else:
            self._look(held, woken=True)

    def _go_on(self, held: Held, ticket: Ticket | None) -> None:
        """On as an ASGI request with its ticket (its verdict, placed or refused), or with a
        fresh one (the ASGI lane looks at it afresh)."""
        self._held = None
        assert self._ctx is not None
        self._ctx.metrics.early("passed")
        give(held.cycle.scope, ticket or Ticket(held.started))
        super()._start_asgi_task(held.cycle, self.app)

    def _sold_out(self, c: Context, held: Held) -> None:
        """The ASGI lane's answer to this refusal (the claim route's `endpoint` around
        `from_engine(SoldOut())`), written here in one write."""
        cycle, scope = held.cycle, held.cycle.scope
        rid = request_id_from(scope["headers"])
        headers = self.server_state.default_headers
        data = ANSWERS.sold_out(scope, rid, headers, cycle.keep_alive)
        self._held = None
        cycle.response_complete = True
        self.transport.write(data)
        try:  # the answer is out: a failure from here on is only logged (_look)
            c.metrics.claimed(SoldOut.code)
            c.metrics.early("answered")
            seen = self._as_app_sees(scope) if c.access is not None else scope
            answered(c, ROUTE, rid, seen, SOLD_OUT_STATUS, held.started)
        finally:
            if not cycle.keep_alive:
                self.transport.close()
            self.on_response_complete()

    def _as_app_sees(self, scope: Any) -> Any:
        """The scope as the app would see it: uvicorn's proxy middleware, run on a copy, sets
        the client and scheme a trusted proxy forwarded (the access line's client)."""
        if self._proxy is None or not any(name in FORWARDED for name, _ in scope["headers"]):
            return scope
        seen: dict[str, Any] = {}

        async def app(s: Any, _receive: Any, _send: Any) -> None:
            seen.update(s)

        probe = copy.copy(self._proxy)
        probe.app = app
        step = probe(dict(scope), _unused, _unused)  # type: ignore[arg-type]
        try:
            step.send(None)  # it never waits: it edits the scope and calls the app
        except StopIteration:
            pass
        else:  # pragma: no cover - a uvicorn whose middleware waits
            step.close()
            raise RuntimeError("uvicorn's proxy middleware waited")
        return seen or scope


async def _unused(*_args: Any) -> Any:  # pragma: no cover - the probe's app never calls it
    raise RuntimeError("not an ASGI call")


SOLD_OUT_STATUS = STATUS[SoldOut.code]
PLACEHOLDER = "\x7f"  # in no answer: a request id's stand-in in a template (JSON keeps it as is)


class Answers:
    """The sold_out answer's bytes: the normal path's response (`from_engine`), made once per
    request id length, keep-alive and second (uvicorn's default headers carry the date) with a
    stand-in for the request id, then filled in with each request's id (1 µs instead of 8)."""

    def __init__(self) -> None:
        self._headers: object = None  # the default headers the templates were made with
        self._made: dict[tuple[int, bool], list[bytes]] = {}

    def sold_out(
        self, scope: Any, rid: str, default_headers: list[tuple[bytes, bytes]], keep_alive: bool
    ) -> bytes:
        if default_headers is not self._headers:
            self._headers, self._made = default_headers, {}
        parts = self._made.get((len(rid), keep_alive))
        if parts is None:
            stand_in = PLACEHOLDER * len(rid)
            parts = answer(scope, stand_in, default_headers, keep_alive).split(stand_in.encode())
            assert len(parts) == 3, "the request id appears once in the headers, once in the body"
            self._made[(len(rid), keep_alive)] = parts
        return rid.encode().join(parts)


def answer(
    scope: Any, rid: str, default_headers: list[tuple[bytes, bytes]], keep_alive: bool
) -> bytes:
    """What the normal path answers a sold-out claim with request id `rid`, as uvicorn writes
    it."""
    token = REQUEST_ID.set(rid)
    try:
        response = from_engine(Request(scope), SoldOut())
    finally:
        REQUEST_ID.reset(token)
    return wire(response, default_headers, keep_alive)


ANSWERS = Answers()  # one per process: every connection's templates are the same


def wire(response: Response, default_headers: list[tuple[bytes, bytes]], keep_alive: bool) -> bytes:
    """The bytes uvicorn writes for this complete response (its status line, its default
    headers, then the response's own), in one piece."""
    parts = [STATUS_LINE[response.status_code]]
    for name, value in (*default_headers, *response.raw_headers):
        parts += (name, b": ", value, b"\r\n")
    if not keep_alive:
        parts.append(b"connection: close\r\n")
    parts += (b"\r\n", bytes(response.body))
    return b"".join(parts)
