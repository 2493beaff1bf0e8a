"""The early lane (api/claim_front/connection.py, ADR 0035, 0048): a claim is looked at by its
connection before it becomes an ASGI request. A sold-out refusal is written there, byte for byte the
normal path's answer; a claim waiting at its event's gate holds no task; everything else goes on as
an ASGI request, in order. uvicorn serves the API in this process with `onsale serve`'s protocol,
driven over raw sockets, on real Redis."""

import asyncio
import contextlib
import functools
import os
import re
import secrets
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
import uvicorn

from api.app import create_app
from api.claim_front.connection import LaneProtocol
from api.claim_front.route import HotRoute
from api.identity import DemoTokens
from api.logs import AccessLog
from api.settings import ApiSettings
from api.transport import HttpBounds
from engine.store import Store
from loadtest.devstack.stack import spare_port
from tests.conftest import Sale, open_sale
from tests.helpers import memory_api_env, wait_until

pytestmark = [pytest.mark.redis]

TOKENS = secrets.token_urlsafe(32)


@dataclass
class Served:
    port: int
    ctx: Any
    server: uvicorn.Server

    def early(self, outcome: str) -> float:
        """How many claims the connections held and `outcome` (answered / passed)."""
        child = self.ctx.metrics._early.get(outcome)
        return float(child._value.get()) if child is not None else 0.0


@pytest.fixture
async def served(real_store: Store, request: pytest.FixtureRequest) -> AsyncIterator[Served]:
    """`onsale serve`'s protocol around the API, in this process; `indirect` parameters:
    keep_alive_s (uvicorn's own default otherwise)."""
    options: dict[str, Any] = getattr(request, "param", {})
    env = memory_api_env(real_store.prefix, TOKENS, ONSALE_GC_GEN0="0")  # pytest's collector
    app = create_app(ApiSettings.from_env(env))
    port = spare_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        loop="none",
        lifespan="on",
        http=functools.partial(LaneProtocol, bounds=HttpBounds()),  # type: ignore[arg-type]
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=10,
        timeout_keep_alive=options.get("keep_alive_s", 5),
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    await wait_until(lambda: server.started or task.done())
    ctx = app.app.state.ctx
    await wait_until(lambda: ctx.sold_out.listening)
    try:
        yield Served(port, ctx, server)
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 30)


def claim_request(
    event_id: str,
    login: str,
    key: str,
    *,
    secret: str = TOKENS,
    body: bytes = b"{}",
    extra: str = "",
    version: str = "1.1",
) -> bytes:
    token = DemoTokens(secret, 3600).issue(login)
    return (
        f"POST /v1/events/{event_id}/holds HTTP/{version}\r\nHost: onsale\r\n"
        f"Authorization: Bearer {token}\r\nIdempotency-Key: {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    ).encode() + body


HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: onsale\r\n\r\n"


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    head: bytes  # the status line and headers, as written
    body: bytes


class Client:
    """One raw connection: requests written as given, answers read one by one."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> "Client":
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def answer(self, timeout_s: float = 10.0) -> Answer:
        async with asyncio.timeout(timeout_s):
            head = await self.reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            headers = dict(line.split(": ", 1) for line in lines[1:] if line)
            body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        return Answer(int(lines[0].split()[1]), headers, head, body)

    async def closed(self, timeout_s: float = 5.0) -> bool:
        async with asyncio.timeout(timeout_s):
            return await self.reader.read(1) == b""

    def close(self) -> None:
        self.writer.transport.abort()  # gone at once, as a client that goes away
        self.writer.close()


async def sold_out_and_remembered(served: Served, store: Store) -> Sale:
    """One seat, won by `winner` with key k-win; a refusal from Redis makes the memory."""
    sale = await open_sale(store, 1)
    client = await Client.open(served.port)
    await client.send(claim_request(sale.event_id, "winner", "k-win"))
    assert (await client.answer()).status == 201
    await client.send(claim_request(sale.event_id, "late", "k0"))
    assert orjson.loads((await client.answer()).body)["error"]["code"] == "sold_out"
    client.close()
    await wait_until(lambda: served.ctx.sold_out.remembers(sale.event_id))
    return sale


def without_date(head: bytes) -> bytes:
    return re.sub(rb"date: [^\r]*\r\n", b"", head)


def full_gate(served: Served, event_id: str) -> Any:
    """The event's gate with its one place in flight taken by someone else."""
    memory = served.ctx.sold_out
    memory.gates.window = 1
    assert memory.ask(event_id, "someone-else", False) is False
    return memory


async def test_a_refusal_written_by_the_connection_is_the_asgi_lanes_answer_byte_for_byte(
    served: Served, real_store: Store
) -> None:
    """The same claim twice, one held by its connection and answered there, the other (a
    body over the connection's bound) answered by the ASGI lane: the same bytes (the date
    aside), each with its own request id."""
    sale = await sold_out_and_remembered(served, real_store)
    answered = served.early("answered")
    client = await Client.open(served.port)
    rid = "X-Request-Id: req-lane-%s\r\n"
    big = b'{"pad": "' + b"x" * 5000 + b'"}'
    await client.send(claim_request(sale.event_id, "a", "ka", extra=rid % "0001"))
    by_connection = await client.answer()
    assert served.early("answered") == answered + 1
    await client.send(claim_request(sale.event_id, "b", "kb", extra=rid % "0002", body=big))
    by_asgi = await client.answer()
    assert served.early("answered") == answered + 1  # not held: its body is over BODY_MAX
    assert by_connection.status == by_asgi.status == 409
    assert orjson.loads(by_connection.body)["error"] == {
        "code": "sold_out",
        "message": "no seat is free",
        "request_id": "req-lane-0001",
    }
    assert without_date(by_connection.head).replace(b"0001", b"0002") == without_date(by_asgi.head)
    assert by_connection.body.replace(b"0001", b"0002") == by_asgi.body
    client.close()


async def test_claims_pipelined_in_one_write_are_each_answered_in_order(
    served: Served, real_store: Store
) -> None:
    """Three claims and a GET in one write on a remembered sold-out event: four answers, in
    the order asked."""
    sale = await sold_out_and_remembered(served, real_store)
    client = await Client.open(served.port)
    rid = "X-Request-Id: pipe-%d\r\n"
    claims = [claim_request(sale.event_id, f"p{n}", f"kp{n}", extra=rid % n) for n in range(3)]
    await client.send(b"".join(claims) + HEALTHZ)
    answers = [await client.answer() for _ in range(4)]
    assert [a.status for a in answers] == [409, 409, 409, 200]
    assert [a.headers["x-request-id"] for a in answers[:3]] == ["pipe-0", "pipe-1", "pipe-2"]
    client.close()


async def test_many_refusals_on_one_connection_each_carry_their_own_request_id(
    served: Served, real_store: Store
) -> None:
    """One keep-alive connection, claims one after the other: each answer is its own (the
    answers are made from one template per request id length)."""
    sale = await sold_out_and_remembered(served, real_store)
    client = await Client.open(served.port)
    rids = ["r1", "req-22", "a" * 64, "b" * 64, secrets.token_hex(16), ""]
    for n, rid in enumerate(rids):
        extra = f"X-Request-Id: {rid}\r\n" if rid else ""
        await client.send(claim_request(sale.event_id, f"u{n}", f"k{n}", extra=extra))
        got = await client.answer()
        error = orjson.loads(got.body)["error"]
        assert got.status == 409 and error["code"] == "sold_out"
        assert got.headers["x-request-id"] == error["request_id"]
        assert error["request_id"] == rid or (not rid and len(error["request_id"]) == 32)
    client.close()


async def test_a_retry_of_the_winner_gets_its_hold_and_a_forged_one_is_told_sold_out(
    served: Served, real_store: Store
) -> None:
    sale = await sold_out_and_remembered(served, real_store)
    client = await Client.open(served.port)
    await client.send(claim_request(sale.event_id, "winner", "k-win"))
    again = await client.answer()
    assert again.status == 200 and orjson.loads(again.body)["state"] == "RESERVED"
    forged = claim_request(sale.event_id, "winner", "k-win", secret=secrets.token_urlsafe(32))
    await client.send(forged)
    told = await client.answer()
    assert (told.status, orjson.loads(told.body)["error"]["code"]) == (409, "sold_out")
    assert sale.event_id not in served.ctx.sold_out.gates.by_event  # places given back
    client.close()


async def test_a_request_pipelined_behind_a_waiting_claim_is_answered_after_it(
    served: Served, real_store: Store
) -> None:
    """A claim waits at a full gate, held by its connection; a GET pipelined behind it waits
    in uvicorn's queue. When the place comes free the claim goes to Redis (201), then the GET
    is answered: in order, on one connection."""
    sale = await open_sale(real_store, 5)
    memory = full_gate(served, sale.event_id)
    client = await Client.open(served.port)
    await client.send(claim_request(sale.event_id, "c", "kc") + HEALTHZ)
    gate = memory.gates.by_event[sale.event_id]
    await wait_until(lambda: len(gate.waiting) == 1)
    with contextlib.suppress(TimeoutError):
        await client.answer(timeout_s=0.3)
        pytest.fail("answered before its turn")
    memory.release(sale.event_id)
    claimed, health = await client.answer(), await client.answer()
    assert claimed.status == 201 and health.status == 200
    assert served.early("passed") >= 1
    client.close()


async def test_a_client_gone_while_its_claim_waits_leaves_the_gate(
    served: Served, real_store: Store
) -> None:
    sale = await open_sale(real_store, 5)
    memory = full_gate(served, sale.event_id)
    served.ctx.store.timeout_s = 30.0  # no give-up while the test looks
    gate = memory.gates.by_event[sale.event_id]
    client = await Client.open(served.port)
    await client.send(claim_request(sale.event_id, "d", "kd"))
    await wait_until(lambda: len(gate.waiting) == 1)
    client.close()
    await wait_until(lambda: all(turn.cancelled() for turn in gate.waiting), timeout_s=2.0)
    memory.release(sale.event_id)
    assert sale.event_id not in memory.gates.by_event  # nothing in flight, nobody waiting
    assert memory.gates.parked == 0
    other = await Client.open(served.port)
    await other.send(claim_request(sale.event_id, "e", "ke"))
    assert (await other.answer()).status == 201
    other.close()


async def test_a_turn_given_to_a_client_that_left_passes_to_the_next(
    served: Served, real_store: Store
) -> None:
    """The first waiting client's connection is lost in the same instant its turn comes (the
    loss is heard first, the turn is already given): the turn is not lost, the claim behind
    it gets it."""
    sale = await open_sale(real_store, 5)
    memory = full_gate(served, sale.event_id)
    served.ctx.store.timeout_s = 30.0
    gate = memory.gates.by_event[sale.event_id]
    first, second = await Client.open(served.port), await Client.open(served.port)
    await first.send(claim_request(sale.event_id, "f", "kf"))
    await wait_until(lambda: len(gate.waiting) == 1)
    await second.send(claim_request(sale.event_id, "g", "kg"))
    await wait_until(lambda: len(gate.waiting) == 2)
    holding = [p for p in served.server.server_state.connections if p._held is not None]
    first_turn = gate.waiting[0]
    (conn,) = [p for p in holding if p._held.turn is first_turn]
    conn.transport.abort()  # its loss is heard next...
    memory.release(sale.event_id)  # ...and its turn given now, before that
    assert first_turn.done() and not first_turn.cancelled()
    assert (await second.answer(timeout_s=2.0)).status == 201
    first.close()
    second.close()


async def test_a_claim_that_waits_too_long_is_a_503_with_its_error_body(
    served: Served, real_store: Store
) -> None:
    sale = await open_sale(real_store, 5)
    memory = full_gate(served, sale.event_id)
    served.ctx.store.timeout_s = 0.2
    client = await Client.open(served.port)
    await client.send(claim_request(sale.event_id, "h", "kh"))
    got = await client.answer()
    error = orjson.loads(got.body)["error"]
    assert (got.status, error["code"]) == (503, "store_unavailable")
    assert got.headers["retry-after"] == "1" and got.headers["x-request-id"] == error["request_id"]
    memory.release(sale.event_id)
    await client.send(claim_request(sale.event_id, "h", "kh"))
    assert (await client.answer()).status == 201
    client.close()


@pytest.mark.parametrize(
    ("version", "extra"), [("1.1", "Connection: close\r\n"), ("1.0", "")], ids=["close", "1.0"]
)
async def test_a_refusal_to_a_client_that_does_not_keep_alive_closes_its_connection(
    served: Served, real_store: Store, version: str, extra: str
) -> None:
    sale = await sold_out_and_remembered(served, real_store)
    answered = served.early("answered")
    client = await Client.open(served.port)
    await client.send(claim_request(sale.event_id, "i", "ki", extra=extra, version=version))
    got = await client.answer()
    assert got.status == 409 and got.headers["connection"] == "close"
    assert await client.closed()
    assert served.early("answered") == answered + 1
    client.close()


@pytest.mark.parametrize(
    "shape",
    ["expect-100", "big body", "chunked", "no key", "twice the key"],
)
async def test_what_the_connection_does_not_hold_is_answered_the_asgi_way(
    served: Served, real_store: Store, shape: str
) -> None:
    """Each of these goes on to ASGI untouched (the ASGI lane or the normal path answers it):
    the answers are what the ASGI path gives them, and the connection answered none."""
    sale = await sold_out_and_remembered(served, real_store)
    token = DemoTokens(TOKENS, 3600).issue("j")
    path = f"/v1/events/{sale.event_id}/holds"
    head = f"POST {path} HTTP/1.1\r\nHost: onsale\r\nAuthorization: Bearer {token}\r\n"
    big = b'{"pad": "' + b"x" * 5000 + b'"}'
    requests = {
        "expect-100": head + "Idempotency-Key: k1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n",
        "big body": head + f"Idempotency-Key: k2\r\nContent-Length: {len(big)}\r\n",
        "chunked": head + "Idempotency-Key: k3\r\nTransfer-Encoding: chunked\r\n",
        "no key": head + "Content-Length: 2\r\n",
        "twice the key": head + "Idempotency-Key: k4\r\nIdempotency-Key: k5\r\n"
        "Content-Length: 2\r\n",
    }
    body = {"big body": big, "chunked": b"2\r\n{}\r\n0\r\n\r\n"}.get(shape, b"{}")
    held = served.early("answered") + served.early("passed")
    client = await Client.open(served.port)
    await client.send(requests[shape].encode() + b"\r\n" + body)
    got = await client.answer()
    if got.status == 100:  # the interim answer to Expect: 100-continue
        got = await client.answer()
    assert (got.status, orjson.loads(got.body)["error"]["code"]) == (409, "sold_out")
    if shape != "no key":  # a claim without a key is held: it is never a retry
        assert served.early("answered") + served.early("passed") == held
    client.close()


async def test_the_access_line_names_the_client_a_trusted_proxy_forwarded(
    served: Served, real_store: Store
) -> None:
    """The connection's refusal writes the access line the ASGI lane writes, the forwarded
    client included (uvicorn's proxy middleware, run on a copy of the scope)."""
    sale = await sold_out_and_remembered(served, real_store)
    read_fd, write_fd = os.pipe()
    served.ctx.access = AccessLog(write_fd, json=True)
    client = await Client.open(served.port)
    forwarded = "X-Forwarded-For: 203.0.113.7\r\n"
    await client.send(
        claim_request(sale.event_id, "k", "kk", extra=forwarded)
        + claim_request(sale.event_id, "l", "kl", extra=forwarded)
    )
    await client.answer()
    await client.answer()
    served.ctx.access.flush()
    os.close(write_fd)
    lines = [orjson.loads(line) for line in os.read(read_fd, 65536).splitlines()]
    os.close(read_fd)
    assert [(x["client"], x["status"], x["method"], x["path"]) for x in lines] == [
        ("203.0.113.7", 409, "POST", f"/v1/events/{sale.event_id}/holds")
    ] * 2
    client.close()


async def test_a_claim_waiting_when_the_server_stops_is_answered_before_it_goes(
    served: Served, real_store: Store
) -> None:
    """A graceful stop hands a waiting claim to ASGI, whose task the server waits for: the
    claim is answered once its place comes free, and its connection closed after."""
    sale = await open_sale(real_store, 5)
    memory = full_gate(served, sale.event_id)
    gate = memory.gates.by_event[sale.event_id]
    client = await Client.open(served.port)
    await client.send(claim_request(sale.event_id, "m", "km"))
    await wait_until(lambda: len(gate.waiting) == 1)
    served.server.should_exit = True
    await asyncio.sleep(0.3)
    memory.release(sale.event_id)
    got = await client.answer()
    assert got.status == 201 and got.headers.get("connection") == "close"
    client.close()


async def test_a_burst_on_three_seats_is_answered_mostly_by_the_connections(
    served: Served, real_store: Store
) -> None:
    """300 connections claim at once on 3 seats: exactly three win, everyone else is told
    sold_out, most of them by their connection, and every place at the gate is given back."""
    sale = await open_sale(real_store, 3)
    clients = [await Client.open(served.port) for _ in range(300)]
    await asyncio.gather(
        *(c.send(claim_request(sale.event_id, f"fan{i}", f"k{i}")) for i, c in enumerate(clients))
    )
    answers = await asyncio.gather(*(c.answer() for c in clients))
    codes = Counter(
        str(a.status) if a.status < 400 else orjson.loads(a.body)["error"]["code"] for a in answers
    )
    assert codes == {"201": 3, "sold_out": 297}
    assert served.early("answered") >= 150
    await wait_until(lambda: sale.event_id not in served.ctx.sold_out.gates.by_event)
    assert served.ctx.sold_out.gates.parked == 0
    await sale.audit_ok()
    for c in clients:
        c.close()


def test_only_a_claim_route_marked_early_is_held() -> None:
    """The PostgreSQL baseline serves its claim route with the same protocol, unmarked."""
    from api.claim_front.connection import claim_route

    async def app(scope: Any, receive: Any, send: Any) -> None:  # pragma: no cover
        pass

    assert claim_route(HotRoute(app, "POST", "/x/{event_id}", app)) is None  # type: ignore[arg-type]
    early = HotRoute(app, "POST", "/x/{event_id}", app, early=True)  # type: ignore[arg-type]
    assert claim_route(early) is early
    assert claim_route(uvicorn.middleware.proxy_headers.ProxyHeadersMiddleware(early)) is early


def connection_of(served: Served) -> Any:
    """The server side of the one connection open."""
    (conn,) = served.server.server_state.connections
    return conn


async def test_a_client_that_does_not_read_its_answers_is_answered_the_asgi_way(
    served: Served, real_store: Store
) -> None:
    """While the connection's writes are paused (its client is not reading), a claim is not
    held: the ASGI path waits for the buffer to drain before it answers, so a client that
    sends and never reads cannot grow the server's buffer without bound."""
    sale = await sold_out_and_remembered(served, real_store)
    client = await Client.open(served.port)
    await client.send(HEALTHZ)
    assert (await client.answer()).status == 200
    conn = connection_of(served)
    conn.pause_writing()  # what the transport does past its high-water mark
    answered = served.early("answered")
    await client.send(claim_request(sale.event_id, "n", "kn"))
    with contextlib.suppress(TimeoutError):
        await client.answer(timeout_s=0.3)
        pytest.fail("answered while writes were paused")
    conn.resume_writing()
    got = await client.answer()
    assert (got.status, orjson.loads(got.body)["error"]["code"]) == (409, "sold_out")
    assert served.early("answered") == answered  # the ASGI lane answered it
    client.close()


@pytest.mark.parametrize("served", [{"keep_alive_s": 1}], indirect=True)
async def test_a_request_after_a_refusal_in_the_same_packet_is_not_cut_by_keep_alive(
    served: Served, real_store: Store
) -> None:
    """A refusal written while its packet is parsed arms the keep-alive timer; the request
    that follows in the same packet (its headers still arriving) must not be cut by it."""
    sale = await sold_out_and_remembered(served, real_store)
    client = await Client.open(served.port)
    await client.send(claim_request(sale.event_id, "o", "ko") + b"GET /healthz HTTP/1.1\r\n")
    assert (await client.answer()).status == 409
    await asyncio.sleep(1.5)  # past the keep-alive bound, within the header bound (10 s)
    await client.send(b"Host: onsale\r\n\r\n")
    assert (await client.answer()).status == 200
    client.close()


async def test_a_request_read_after_an_answer_that_closed_the_connection_is_not_run(
    served: Served, real_store: Store
) -> None:
    """The server is stopping while a claim's body is still on its way: the refusal closes
    the connection, and a claim that came in the same packet after it (the parser still takes
    the connection for kept alive) is read but never run: nobody could be told its answer."""
    sale = await sold_out_and_remembered(served, real_store)
    before = served.ctx.metrics._claims["sold_out"]._value.get()
    client = await Client.open(served.port)
    first = claim_request(sale.event_id, "q", "kq")
    await client.send(first[:-2])  # all but its body
    await wait_until(lambda: any(c._held for c in served.server.server_state.connections))
    connection_of(served).shutdown()  # what a graceful stop does to each connection
    await client.send(first[-2:] + claim_request(sale.event_id, "r", "kr"))
    got = await client.answer()
    assert got.status == 409 and got.headers["connection"] == "close"
    assert await client.closed()
    await asyncio.sleep(0.2)
    assert served.ctx.metrics._claims["sold_out"]._value.get() == before + 1
    client.close()


@pytest.mark.parametrize("fails", ["answer", "woken look"])
async def test_a_failure_in_the_lane_is_logged_and_the_claim_answered_the_asgi_way(
    served: Served, real_store: Store, monkeypatch: pytest.MonkeyPatch, fails: str
) -> None:
    """A bug in the lane (here: its answer template, or the gate's look after a wait) never
    turns into the parser's 400 or a hung connection: the claim goes on to ASGI, any place it
    held is given back, and it is answered."""
    from api.claim_front import connection as early_lane

    sale = await sold_out_and_remembered(served, real_store)
    memory = served.ctx.sold_out
    if fails == "answer":

        def broken(*_args: Any) -> bytes:
            raise RuntimeError("broken template")

        monkeypatch.setattr(early_lane.ANSWERS, "sold_out", broken)
    else:
        gate_event = (await open_sale(real_store, 5)).event_id
        full_gate(served, gate_event)
        real_ask = memory.ask

        def ask(event_id: str, hold_id: str, woken: bool) -> Any:
            if woken:
                raise RuntimeError("broken look")
            return real_ask(event_id, hold_id, woken)

        monkeypatch.setattr(memory, "ask", ask)
    event_id = sale.event_id if fails == "answer" else gate_event
    client = await Client.open(served.port)
    await client.send(claim_request(event_id, "s", "ks"))
    if fails == "woken look":
        gate = memory.gates.by_event[event_id]
        await wait_until(lambda: len(gate.waiting) == 1)
        memory.release(event_id)
    got = await client.answer()
    assert got.status == (409 if fails == "answer" else 201)
    client.close()
