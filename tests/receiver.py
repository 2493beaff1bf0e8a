"""A merchant's webhook endpoint for the tests: a plain HTTP server on a spare loopback port,
in a thread of its own (so synchronous and asynchronous tests alike can use it). It records
every request as it arrives, then answers `status` after `delay_s`; `down()` closes the port
(connections refused) and `up()` opens it again on the same port."""

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
from standardwebhooks.webhooks import Webhook

from loadtest.devstack.stack import spare_port


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]

    @property
    def payload(self) -> dict[str, Any]:
        data: dict[str, Any] = orjson.loads(self.body)
        return data


class Receiver:
    def __init__(self) -> None:
        self.port = spare_port()
        self.status = 200
        self.delay_s = 0.0
        self.received: list[Received] = []
        self.answered = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                got = Received({k.lower(): v for k, v in self.headers.items()}, body, time.time())
                with receiver._lock:
                    receiver.received.append(got)
                    status, delay = receiver.status, receiver.delay_s
                if delay:
                    time.sleep(delay)
                with contextlib.suppress(OSError):  # the sender may be gone (killed)
                    self.send_response(status)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    with receiver._lock:
                        receiver.answered += 1

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def up(self) -> "Receiver":
        server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def down(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def requests(self) -> list[Received]:
        with self._lock:
            return list(self.received)

    def ids(self) -> list[str]:
        return [r.webhook_id for r in self.requests()]

    def verified(self, *secrets: str) -> list[dict[str, Any]]:
        """Every payload received, each verified as a merchant would (any of `secrets`)."""
        out = []
        for r in self.requests():
            out.append(verify(r, *secrets))
        return out

    def wait(self, check: Callable[["Receiver"], bool], timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if check(self):
                return
            time.sleep(0.05)
        raise AssertionError(f"receiver: not reached within {timeout_s}s ({len(self.received)})")


def verify(r: Received, *secrets: str) -> dict[str, Any]:
    """The payload of `r` if one of `secrets` verifies it (Standard Webhooks' library)."""
    last: Exception | None = None
    for secret in secrets:
        try:
            data: dict[str, Any] = Webhook(secret).verify(r.body, r.headers)
            return data
        except Exception as exc:
            last = exc
    raise AssertionError(f"{r.webhook_id} does not verify: {last!r}")
