"""An answer leaves its connection in one write (api/transport.py OneWritePerTick, ADR 0055):
uvicorn writes the status line and headers on `http.response.start` and the body on
`http.response.body`; the protocol `onsale serve` runs holds the writes of one event-loop step
and sends them together. Driven here through uvicorn's own protocol with a transport that
records each write."""

import asyncio
from typing import Any

import pytest

from api.claim_front.uvicorn_seam import Config, ServerState
from api.transport import SEND_AT_ONCE, BoundedHttpToolsProtocol, HttpBounds, OneWritePerTick


class Recorder(asyncio.Transport):
    """A connection's socket, as the protocol sees it: each write as it was handed over."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = self.aborted = False
        self.reading = True

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        where = {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8000)}
        return where.get(name, default)

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


async def hello(scope: Any, receive: Any, send: Any) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"x-a", b"1"), (b"content-length", b"5")],
        }
    )
    await send({"type": "http.response.body", "body": b"hello"})


async def serve_one(request: bytes) -> Recorder:
    config = Config(hello, lifespan="off", log_level="warning", access_log=False)
    config.load()
    protocol = BoundedHttpToolsProtocol(config, ServerState(), {}, bounds=HttpBounds())
    socket = Recorder()
    protocol.connection_made(socket)  # type: ignore[arg-type]
    protocol.data_received(request)
    for _ in range(20):  # the answer's task, then the step that sends what it wrote
        await asyncio.sleep(0)
    protocol.connection_lost(None)
    return socket


async def test_an_answer_leaves_in_one_write() -> None:
    socket = await serve_one(b"GET /x HTTP/1.1\r\nhost: a\r\n\r\n")
    assert len(socket.writes) == 1, socket.writes
    (data,) = socket.writes
    assert data.startswith(b"HTTP/1.1 200 OK\r\n") and b"x-a: 1\r\n" in data
    assert data.endswith(b"\r\n\r\nhello")


async def test_a_closing_answer_is_sent_before_the_close() -> None:
    socket = await serve_one(b"GET /x HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n")
    assert len(socket.writes) == 1 and socket.writes[0].endswith(b"hello") and socket.closed


async def test_what_one_step_writes_goes_as_one_and_a_later_step_apart() -> None:
    socket = Recorder()
    writes = OneWritePerTick(socket, asyncio.get_running_loop())
    writes.write(b"a")
    writes.writelines([b"b", b"c"])
    assert socket.writes == []  # held until the step ends
    await asyncio.sleep(0)
    writes.write(b"d")
    await asyncio.sleep(0)
    assert socket.writes == [b"abc", b"d"]


@pytest.mark.parametrize("end", ["close", "abort", "gone"])
async def test_held_writes_at_the_end_of_a_connection(end: str) -> None:
    socket = Recorder()
    writes = OneWritePerTick(socket, asyncio.get_running_loop())
    writes.write(b"answer")
    if end == "close":  # sent, then closed
        writes.close()
        assert socket.writes == [b"answer"] and socket.closed
    elif end == "abort":  # dropped: an aborted connection sends nothing more
        writes.abort()
        assert socket.aborted
    else:  # the socket closed under it: nothing is written to a closing transport
        socket.closed = True
    await asyncio.sleep(0)
    assert socket.writes == ([b"answer"] if end == "close" else [])
    assert writes.get_extra_info("peername") == ("127.0.0.1", 50000)  # the rest passes through


async def test_a_large_write_goes_at_once_with_what_was_held() -> None:
    socket = Recorder()
    writes = OneWritePerTick(socket, asyncio.get_running_loop())
    writes.write(b"headers")
    body = b"x" * SEND_AT_ONCE
    writes.write(body)  # the transport's own buffer and flow control see it now
    assert socket.writes == [b"headers" + body]
    await asyncio.sleep(0)
    assert socket.writes == [b"headers" + body]
