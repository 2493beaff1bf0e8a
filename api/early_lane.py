"""The early lane: a claim looked at by its connection before it becomes an ASGI request
(ADR 0035).

At T0 nearly every claim is a refusal, and nearly all of them arrive before Redis has said the
event is sold out: each waits at its event's gate (engine/claim_gate.py) until the sold-out
memory answers it (ADR 0012). As an ASGI request, each such claim costs a task with its scope,
cycle and coroutine frames (alive while it waits), the middleware, Starlette's request and
response, and two writes: more than a trivial request costs in all. `LaneProtocol`, uvicorn's
httptools protocol with the HTTP bounds (api/transport.py), holds such a claim itself. The
parsed request waits at the gate with no task, and a refusal is written in one write: the
normal path's own answer (`from_engine`: status, headers, body, request id), with its metrics
and access line. Everything else goes on as an ASGI request, exactly as before:

- a claim the gate lets through to Redis: it takes its place in flight here, and the ASGI lane
  (api/refusal_lane.py) hands it straight to the normal path; a claim whose wait failed (503
  `store_unavailable`, answered there);
- what the lane cannot read (`refusal_lane.readable`: no Content-Length, a repeated header, an
  unreadable token or Idempotency-Key, ...), a body over BODY_MAX, `Expect: 100-continue`, a
  request pipelined behind another on its connection, a process without the sold-out memory,
  and any app whose claim route is not marked `early` (the PostgreSQL baseline).

A held request keeps uvicorn's own bookkeeping: its cycle is built as usual and only its task is
not started. A request pipelined behind it waits in uvicorn's queue and starts once it is
answered; a client that goes away leaves the gate (a turn it was given passes on); a graceful
shutdown waits for a held claim as for any request (uvicorn waits for the connections to close,
and a connection asked to stop closes after its answer). Written against
uvicorn 0.54's HttpToolsProtocol (`_start_asgi_task`, `on_response_complete`, the cycle's
`response_complete` and `keep_alive`), as api/transport.py is."""

import asyncio
import copy
import time
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, RequestResponseCycle

from api import refusal_lane as lane
from api.context import STARTED, Context
from api.errors import STATUS, from_engine
from api.hotpath import HotRoute
from api.logs import request_id_from
from api.transport import BoundedHttpToolsProtocol
from engine.errors import EngineError, SoldOut
from engine.logs import REQUEST_ID
from engine.soldout import SoldOutMemory

BODY_MAX = 4096  # a claim's body is tens of bytes; a larger one is read by the ASGI lane
FORWARDED = (b"x-forwarded-for", b"x-forwarded-proto")


@dataclass(slots=True, eq=False)
class Held:
    """A claim its connection holds: parsed, not yet an ASGI request."""

    cycle: RequestResponseCycle
    event_id: str
    claim: tuple[str, str, str]  # (hold id or "", token, login) as refusal_lane.readable reads them
    started: float  # time.perf_counter() at the end of its headers (its access line's start)
    arrived: float = 0.0  # loop time of its first look at the gate
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
        self._answers = ANSWERS

    # -- uvicorn's hooks --------------------------------------------------------------------

    def on_headers_complete(self) -> None:
        self._fresh = True
        try:
            super().on_headers_complete()
        finally:
            self._fresh = False

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
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
        assert self._route is not None
        state = getattr(self._route.app, "state", None)  # the Starlette app's
        c: Context | None = getattr(state, "ctx", None)  # set at startup
        return c if c is not None and c.store.sold_out is not None else None

    def _hold(self, cycle: RequestResponseCycle) -> Held | None:
        assert self._route is not None
        scope = cycle.scope
        if scope["method"] != self._route.method or self.expect_100_continue:
            return None
        found = self._route.pattern.fullmatch(scope["path"])
        c = self._context() if found is not None else None
        if found is None or c is None:
            return None
        event_id = found["event_id"]
        limit = min(BODY_MAX, c.settings.body_max_bytes)
        claim = lane.readable(c, event_id, scope, limit)  # type: ignore[arg-type]
        return Held(cycle, event_id, claim, time.perf_counter()) if claim is not None else None

    def _look(self, held: Held, woken: bool) -> None:
        """The gate's verdict, as the ASGI lane's `admit` takes it: answered sold_out here, a
        place in flight taken (on to ASGI), or a wait in the gate's queue."""
        c = self._context()
        if c is None:  # the app stopped meanwhile: the normal path answers
            self._go_on(held, None)
            return
        memory = c.store.sold_out
        assert memory is not None
        if not woken:
            held.arrived = self.loop.time()
        verdict = memory.ask(held.event_id, held.claim[0] or "-", woken)
        if isinstance(verdict, tuple):
            held.turn = memory.gates.wait_then(
                held.event_id,
                verdict,
                held.arrived,
                c.store.timeout_s,
                woken,
                lambda turn: self._turn_ended(memory, held, turn),
            )
        elif lane.refused_after(c, memory, held.event_id, verdict, held.claim):
            self._sold_out(c, held)
        else:
            # a place in flight: the store's claim takes it over (api/routes/checkout.py)
            held.cycle.scope[lane.SLOT] = True  # type: ignore[literal-required]
            self._go_on(held, True)

    def _turn_ended(self, memory: SoldOutMemory, held: Held, turn: "asyncio.Future[None]") -> None:
        if turn.cancelled():
            return
        failed = turn.exception()
        if held is not self._held:  # the client went away
            if failed is None:
                memory.gates.pass_turn(held.event_id)
            return
        held.turn = None
        if isinstance(failed, EngineError):  # waited too long: 503, answered by the ASGI lane
            self._go_on(held, failed)
        elif failed is not None:
            raise failed  # a bug: the loop's exception handler logs it
        else:
            self._look(held, woken=True)

    def _go_on(self, held: Held, verdict: bool | EngineError | None) -> None:
        """On as an ASGI request (None: the ASGI lane looks at it afresh)."""
        self._held = None
        c = self._context()
        if c is not None:
            c.metrics.early("passed")
        scope = held.cycle.scope
        scope[STARTED] = held.started  # type: ignore[literal-required]
        if verdict is not None:
            scope[lane.EARLY] = verdict  # type: ignore[literal-required]
        super()._start_asgi_task(held.cycle, self.app)

    def _sold_out(self, c: Context, held: Held) -> None:
        """The ASGI lane's answer to this refusal (the claim route's `endpoint` around
        `from_engine(SoldOut())`), written here in one write."""
        self._held = None
        cycle, scope = held.cycle, held.cycle.scope
        rid = request_id_from(scope["headers"])
        headers = self.server_state.default_headers
        data = self._answers.sold_out(scope, rid, headers, cycle.keep_alive)
        c.metrics.claimed(SoldOut.code)
        c.metrics.early("answered")
        cycle.response_complete = True
        self.transport.write(data)
        seconds = time.perf_counter() - held.started
        c.metrics.observe(lane.ROUTE, SOLD_OUT_STATUS, seconds)
        if c.access is not None:
            c.access.write(rid, self._as_app_sees(scope), SOLD_OUT_STATUS, seconds)
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
