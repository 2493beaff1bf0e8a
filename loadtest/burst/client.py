"""The clients of the T0 burst (`python -m loadtest.burst.main`): each on its own keep-alive
connection, writing a raw HTTP/1.1 claim and reading its answer, so that 10,000 of them fit in
one process."""

import asyncio
import contextlib
import time
from typing import cast

import orjson


class BurstClient(asyncio.Protocol):
    """One client on one keep-alive connection, speaking just enough HTTP/1.1 to send a request
    and read a response with a Content-Length: at 10,000 clients a general HTTP client costs
    more CPU than the server under test (aiohttp took 1.4 s only to send the 10,000 claims)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.answer = ""
        self.sent = self.done = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0 or self.waiter is None or self.waiter.done():
            return
        head = bytes(self.buf[:end]).lower()
        at = head.find(b"content-length:")
        length = int(head[at + 15 : head.find(b"\r\n", at) % (len(head) + 1)]) if at >= 0 else 0
        if len(self.buf) < end + 4 + length:
            return
        self.done = time.monotonic()
        body = bytes(self.buf[end + 4 : end + 4 + length])
        del self.buf[: end + 4 + length]
        self.waiter.set_result((int(head[9:12]), body))

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.done = time.monotonic()
            self.waiter.set_exception(ConnectionError(f"connection lost: {exc!r}"))

    def send(self, raw: bytes) -> "asyncio.Future[tuple[int, bytes]]":
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.sent, self.done = time.monotonic(), 0.0
        self.transport.write(raw)
        return self.waiter

    async def answer_of(self, sent: "asyncio.Future[tuple[int, bytes]]", timeout_s: float) -> None:
        """Wait for the answer to the request just sent and record it: the status for a
        success, the error code for a 4xx, the status for a 5xx, or the transport failure."""
        try:
            async with asyncio.timeout(timeout_s):
                status, body = await sent
            self.answer = str(status)
            if 400 <= status < 500:
                # Not our error envelope: the status says what there is.
                with contextlib.suppress(orjson.JSONDecodeError, KeyError, TypeError):
                    self.answer = str(orjson.loads(body)["error"]["code"])
        except (ConnectionError, TimeoutError) as exc:
            self.done = self.done or time.monotonic()
            self.answer = f"transport:{type(exc).__name__}"

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def claim_request(host: str, event_id: str, token: str, key: str, quantity: int = 1) -> bytes:
    """One best-available claim; `quantity` > 1: a party of that many seats."""
    body = b'{"quantity":%d}' % quantity if quantity > 1 else b"{}"
    return (
        f"POST /v1/events/{event_id}/holds HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {token}\r\nIdempotency-Key: {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
