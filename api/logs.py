"""Request ids and the access log of the API (ADR 0027), applied by `api.context.endpoint`
around every handler (the T0 route included, without an extra ASGI layer: a middleware's
coroutine and `send` wrapper cost about as much as the work itself) and by the router's own
404 and 405 (api/app.py).

Every request gets an id: the caller's `X-Request-Id` when it is sane (1 to 64 characters of
letters, digits and `._:=+/-`, as proxies mint them), else a new one (32 hex digits). The id is
echoed in the `X-Request-Id` header of the answer, written in every error body
(api/errors.py) and on every log line written while the request is served (engine/config/logs.py
REQUEST_ID).

The access log (ONSALE_ACCESS_LOG, on by default) writes one line per request: its id,
method, path (never the query, never a header), status, duration, client address and the
worker process's pid. It is built for the T0 burst: a line is built as text and appended to a
buffer, and the buffer is written to stderr in whole lines, a few KiB at a time (at most
`FLUSH_S` later), so a request costs about 3 µs of logging instead of about 14 µs through
`logging` (record, handler, lock and one write per line). Each write is at most PIPE_BUF bytes
of whole lines, so lines of several worker processes sharing one pipe never interleave."""

import asyncio
import atexit
import itertools
import os
import re
import sys
import time
from typing import Any

import orjson
from starlette.responses import Response
from starlette.types import Scope

from engine.config.logs import timestamp

HEADER = b"x-request-id"
SANE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:=+/-]{0,63}")
FLUSH_S = 0.2  # the longest a line waits in the buffer
CHUNK_BYTES = 4096  # PIPE_BUF on Linux: a write of at most this much is never interleaved


_PREFIX = os.urandom(8).hex()  # per process (uvicorn spawns its workers: each draws its own)
_counted = itertools.count()


def new_request_id() -> str:
    """32 hex digits, unique: a random prefix per process and a count (a third of the cost of
    16 random bytes a request; an id needs to be unique, not unguessable)."""
    return f"{_PREFIX}{next(_counted):016x}"


def request_id_from(headers: list[tuple[bytes, bytes]] | Any) -> str:
    """The caller's X-Request-Id if sane, else a new id."""
    for name, value in headers:
        if name == HEADER:
            try:
                text = value.decode("ascii")
            except UnicodeDecodeError:
                break
            return text if SANE.fullmatch(text) else new_request_id()
    return new_request_id()


class AccessLog:
    """Buffered access lines to a file descriptor (stderr's). The app's shutdown flushes
    them (api/app.py): a uvicorn worker dies by the SIGTERM it raises again, and runs no
    atexit hook; the hook is kept for a process that exits normally."""

    def __init__(self, fd: int | None = None, *, json: bool = True) -> None:
        self.fd = sys.stderr.fileno() if fd is None else fd
        self.json = json
        self.pid = os.getpid()  # which worker process answered
        self.lines: list[bytes] = []
        self.size = 0
        self._timer: asyncio.TimerHandle | None = None
        self._second = (0, "")  # (Unix second, its ISO 8601 text): one strftime per second
        atexit.register(self.flush)

    def _ts(self, now: float) -> str:
        second = int(now)
        if second != self._second[0]:
            self._second = (second, timestamp(second)[:-5])
        return f"{self._second[1]}.{int(now * 1000) % 1000:03d}Z"

    def write(self, request_id: str, scope: Scope, status: int, seconds: float) -> None:
        """One line. Built as text: the request id is sane or minted, the method an HTTP token
        and the client an address, none needs escaping; the path is escaped (orjson)."""
        client = scope.get("client")
        host = client[0] if client else None
        ts, method, path = self._ts(time.time()), scope["method"], scope["path"]
        if self.json:
            line = (
                f'{{"ts":"{ts}","level":"info","logger":"onsale.access","msg":"request",'
                f'"request_id":"{request_id}","method":"{method}",'
                f'"path":{orjson.dumps(path).decode()},"status":{status},'
                f'"duration_ms":{seconds * 1000:.3f},"client":{orjson.dumps(host).decode()},'
                f'"pid":{self.pid}}}'
            ).encode()
        else:
            line = (
                f"{ts} INFO onsale.access [{request_id}] {method} {path} {status} "
                f"{seconds * 1000:.3f}ms {host}"
            ).encode()
        self.lines.append(line)
        self.size += len(line) + 1
        if self.size >= CHUNK_BYTES:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(FLUSH_S, self.flush)

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        chunk: list[bytes] = []
        size = 0
        for line in self.lines:
            if chunk and size + len(line) + 1 > CHUNK_BYTES:
                self._write(b"\n".join(chunk) + b"\n")
                chunk, size = [], 0
            chunk.append(line)
            size += len(line) + 1
        if chunk:
            self._write(b"\n".join(chunk) + b"\n")
        self.lines.clear()
        self.size = 0

    def _write(self, data: bytes) -> None:
        try:
            while data:
                data = data[os.write(self.fd, data) :]
        except OSError:  # stderr closed or full: the lines are lost, the request is not
            pass


def echo(response: Response, request_id: str) -> None:
    """The request id in the answer's X-Request-Id header (once)."""
    raw = response.raw_headers
    if not any(name == HEADER for name, _value in raw):
        raw.append((HEADER, request_id.encode()))
