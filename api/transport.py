"""HTTP connections with bounded reads: a client that stops half-way through a request, or that
connects and never sends one, is disconnected instead of holding a file descriptor forever.

uvicorn times a connection out only between requests: its keep-alive timer is armed when a
response is complete and cancelled by the next byte, so a connection that never sends a byte,
or sends part of a request and stalls, is kept for good (3,000 of them were all open after 90 s;
1,100 from one client used up a 1,024-file limit and locked every buyer out). This protocol
(uvicorn's httptools one, selected by `onsale serve`) adds the missing bounds:

- connected, no byte yet: `http_keepalive_s`, the keep-alive setting (uvicorn's own timer, armed at
  connect; pre-connected clients waiting for T0 are kept that long, as between requests);
- first byte of a request to the end of its headers: `http_header_timeout_s`;
- end of the headers to the end of the body: `http_body_timeout_s` (checked when the header bound
  runs out, so a body always gets at least the rest of it).

One timer per connection at a time: armed at a request's first byte, cancelled when the request
is complete, re-armed only for a body still arriving. On expiry the connection is aborted (no
408: a client that stopped sending is rarely reading, and a close that waits to flush could
hold the descriptor again). A reverse proxy in front does all this and more (docs/deploy.md);
these bounds are what holds without one. What it relies on of uvicorn's HttpToolsProtocol (parser
callbacks, `timeout_keep_alive_task`) is named in api/claim_front/uvicorn_seam.py;
tests/fault/test_slow_clients.py serves it."""

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from api.claim_front.uvicorn_seam import Config, HttpToolsProtocol, ServerState
from engine.config.settings import ADR
from engine.config.variables import Flag, Group, Int, read_all

HTTP_HEADER_TIMEOUT_S = Int(
    "ONSALE_HTTP_HEADER_TIMEOUT_S", "a request's headers must arrive within", 10,
    doc="`onsale serve` cuts a connection whose request headers are not complete this long "
    "after their first byte (`api/transport.py`; in production a reverse proxy does this "
    "first: [docs/deploy.md](deploy.md))",
)  # fmt: skip
HTTP_BODY_TIMEOUT_S = Int(
    "ONSALE_HTTP_BODY_TIMEOUT_S", "... and its body within", 30,
    doc="... or whose body is not complete this long after its headers",
)  # fmt: skip
HTTP_KEEPALIVE_S = Int(
    "ONSALE_HTTP_KEEPALIVE_S", "idle connection kept, before and between requests", 75,
    doc="idle keep-alive of `onsale serve`, and the longest a connection may wait before its "
    "first request (clients connect before T0 and wait: uvicorn's 5 s would drop them)",
)  # fmt: skip
EARLY_LANE = Flag(
    "ONSALE_EARLY_LANE", "1: most T0 refusals answered by their connection (ADR 0035)", True,
    doc="`onsale serve`'s connections look at a claim before it becomes an ASGI request: one "
    "that waits at its event's gate holds no task, and a sold-out refusal is written there in "
    "one write (`api/claim_front/connection.py`, "
    f"[0035]({ADR}0035-refusals-answered-by-the-connection.md)); 0: every claim is an ASGI "
    "request",
)  # fmt: skip
HTTP = Group(
    "HTTP bounds", (HTTP_HEADER_TIMEOUT_S, HTTP_BODY_TIMEOUT_S, HTTP_KEEPALIVE_S, EARLY_LANE)
)


@dataclass(frozen=True)
class HttpBounds:
    http_header_timeout_s: int = HTTP_HEADER_TIMEOUT_S.default  # first byte to end of headers
    http_body_timeout_s: int = HTTP_BODY_TIMEOUT_S.default  # end of headers to end of body
    http_keepalive_s: int = HTTP_KEEPALIVE_S.default  # connected, nothing sent; between requests
    # 1: a claim is looked at by its connection before it becomes an ASGI request, and most T0
    # refusals are answered there (api/claim_front/connection.py); 0: every request is ASGI's.
    early_lane: bool = EARLY_LANE.default

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "HttpBounds":
        return cls(**read_all(env, HTTP))


SEND_AT_ONCE = 65_536  # a write this large is not held: the transport's flow control sees it


class OneWritePerTick:
    """A connection's transport as its protocol writes to it: the writes of one event-loop step
    leave in one `write`. uvicorn writes an answer's status line and headers when the app sends
    `http.response.start` and its body when it sends `http.response.body`, each at once: two
    sends and two TCP segments per answer, which the client reads twice. Held until the step
    ends, they go out as one (ADR 0055). A large write goes at once, with what was held before
    it. Closing sends what is held first; aborting drops it."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []

    def write(self, data: bytes) -> None:
        if len(data) >= SEND_AT_ONCE:  # a large body goes now, with the headers held before it
            self._held.append(data)
            self._send()
            return
        if not self._held:
            self._loop.call_soon(self._send)
        self._held.append(data)

    def writelines(self, lines: Iterable[bytes]) -> None:
        for data in lines:
            self.write(data)

    def _send(self) -> None:
        held, self._held = self._held, []
        if held and not self._transport.is_closing():
            self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def write_eof(self) -> None:
        self._send()
        self._transport.write_eof()

    def close(self) -> None:
        self._send()
        self._transport.close()

    def abort(self) -> None:
        self._held = []
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:  # the rest of the transport, as it is
        return getattr(self._transport, name)


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with header, body and first-request bounds; uvicorn builds
    one per connection. The idle bound is uvicorn's `timeout_keep_alive`, which `onsale serve`
    sets to `bounds.http_keepalive_s`."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        bounds: HttpBounds,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.bounds = bounds
        self._read_timer: asyncio.TimerHandle | None = None
        self._headers_done_at = 0.0  # loop.time() at the end of the headers; 0.0: reading them

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # The protocol, the early lane and the answers write through it: one write a step.
        super().connection_made(OneWritePerTick(transport, self.loop))  # type: ignore[arg-type]
        # The keep-alive timer, armed before the first request too; the first byte cancels it.
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        # Any byte starts the header bound, even bytes that begin no request (blank lines).
        if self._read_timer is None:
            self._arm()
        super().data_received(data)

    def on_message_begin(self) -> None:
        if self._read_timer is None:  # a pipelined request after a complete one, same read
            self._arm()
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._headers_done_at = self.loop.time()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def _arm(self) -> None:
        self._headers_done_at = 0.0
        self._read_timer = self.loop.call_later(self.bounds.http_header_timeout_s, self._expired)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None
        self._headers_done_at = 0.0

    def _expired(self) -> None:
        self._read_timer = None
        if self._headers_done_at:
            left_s = self._headers_done_at + self.bounds.http_body_timeout_s - self.loop.time()
            if left_s > 0:  # the headers came in time; the body still has time
                self._read_timer = self.loop.call_later(left_s, self._expired)
                return
        if not self.transport.is_closing():
            self.transport.abort()
