"""Slow clients against `onsale serve` (api/transport.py): a connection that stops half-way
through a request, or never sends one, is cut after its bound, so one client's stalled
connections cannot keep a server at its open-files limit and lock the buyers out; clients that
connected before T0 and wait (less than the idle bound) are still answered. The server runs as
a child with a 1,024 open-files limit it cannot raise, as on a common default host."""

import asyncio
import contextlib
import resource
import time
from collections.abc import Callable

import pytest

from tests.fault.conftest import ServedApi

pytestmark = [pytest.mark.redis, pytest.mark.slow]  # the API boots against the shared Redis

STALLED = 1_100  # more than the child's 1,024 descriptors: today this locked everyone out
BURST = 200
HEADER_TIMEOUT_S = 2
PARTIAL = b"GET /healthz HTTP/1.1\r\nHost: onsale\r\nUser-Agent: slow"  # headers never end
FULL = b"GET /healthz HTTP/1.1\r\nHost: onsale\r\nConnection: close\r\n\r\n"

Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def own_open_files(needed: int) -> None:
    """This process opens the stalled connections: raise its soft limit if it is short."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        assert hard >= needed, f"the test needs {needed} open files; the hard limit is {hard}"
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


async def connect(port: int, data: bytes = b"") -> Connection:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    if data:
        writer.write(data)
        await writer.drain()
    return reader, writer


async def closed_after(conn: Connection, started: float, wait_s: float) -> float:
    """Seconds from `started` until the server closed the connection (EOF or reset, after any
    reply it sent); inf if it was still open after `wait_s`."""
    reader = conn[0]
    try:
        async with asyncio.timeout(wait_s):
            while await reader.read(4096):
                pass
    except TimeoutError:
        return float("inf")
    except ConnectionError:
        pass
    return time.monotonic() - started


async def get(port: int) -> bytes:
    """One ordinary request on a fresh connection; the status line, or what went wrong."""
    try:
        async with asyncio.timeout(10):
            reader, writer = await connect(port, FULL)
            try:
                return (await reader.read())[:15]
            finally:
                writer.close()
    except (OSError, TimeoutError) as exc:
        return repr(exc).encode()


def close_all(conns: list[Connection]) -> None:
    for _reader, writer in conns:
        with contextlib.suppress(Exception):
            writer.transport.abort()


async def test_stalled_requests_are_cut_and_the_buyers_behind_them_get_in(
    served_api: Callable[..., ServedApi],
) -> None:
    api = served_api(
        open_files=(512, 1024),
        ONSALE_HTTP_HEADER_TIMEOUT_S=str(HEADER_TIMEOUT_S),
        ONSALE_HTTP_KEEPALIVE_S="30",
    )
    assert api.open_files_limit() == (1024, 1024)  # raised to its hard limit at start
    assert "open files limit raised from 512 to the hard limit, 1024" in api.log()
    own_open_files(STALLED + BURST + 100)
    conns: list[Connection] = []
    try:
        early = await connect(api.port)  # connected before T0, says nothing yet
        conns.append(early)
        await asyncio.sleep(0.2)
        started = time.monotonic()
        for _ in range(STALLED):
            conns.append(await connect(api.port, PARTIAL))
        stall_s = time.monotonic() - started
        wait_s = stall_s + 2 * HEADER_TIMEOUT_S + 2
        lived = await asyncio.gather(*(closed_after(c, started, wait_s) for c in conns[1:]))
        print(
            f"\n{STALLED} stalled connections opened in {stall_s:.2f}s; all closed "
            f"{max(lived):.2f}s after the first (header timeout {HEADER_TIMEOUT_S}s)"
        )
        assert [s for s in lived if s == float("inf")] == [], "stalled connections left open"
        close_all(conns[1:])
        statuses = await asyncio.gather(*(get(api.port) for _ in range(BURST)))
        assert [s for s in statuses if not s.startswith(b"HTTP/1.1 200")] == []
        early[1].write(FULL)  # the pre-connected buyer, after waiting less than the idle bound
        assert (await asyncio.wait_for(early[0].read(), 10)).startswith(b"HTTP/1.1 200")
    finally:
        close_all(conns)


async def test_each_read_bound_cuts_its_own_stall_and_no_sooner(
    served_api: Callable[..., ServedApi],
) -> None:
    """Silent connection: cut at the idle bound; partial headers: at the header bound; a body
    that stops: at the body bound after its headers; a slow request that keeps within the
    bounds is answered."""
    api = served_api(
        ONSALE_HTTP_HEADER_TIMEOUT_S="1",
        ONSALE_HTTP_BODY_TIMEOUT_S="2",
        ONSALE_HTTP_KEEPALIVE_S="3",
    )
    body = b"POST /v1/login HTTP/1.1\r\nHost: onsale\r\nContent-Length: 40\r\n\r\n{"
    started = time.monotonic()
    conns = [
        await connect(api.port),
        await connect(api.port, PARTIAL),
        await connect(api.port, body),
        await connect(api.port, FULL[:20]),
    ]
    try:
        lived = asyncio.gather(*(closed_after(c, started, 8) for c in conns[:3]))
        await asyncio.sleep(0.6)  # the slow one: the rest of its headers within the bound
        conns[3][1].write(FULL[20:])
        reply = await asyncio.wait_for(conns[3][0].read(), 5)
        assert reply.startswith(b"HTTP/1.1 200"), reply[:100]
        silent, partial, stopped_body = await lived
        print(
            f"\ncut after: silent {silent:.2f}s, headers {partial:.2f}s, body {stopped_body:.2f}s"
        )
        assert 2.9 <= silent <= 4.0
        assert 0.9 <= partial <= 2.0
        assert 1.9 <= stopped_body <= 3.0
    finally:
        close_all(conns)
