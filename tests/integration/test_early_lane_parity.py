"""The early lane answers exactly what the ASGI path answers (api/claim_front/connection.py, ADR
0035, 0048).

One API, served twice in a background thread: by `onsale serve`'s protocol (the early lane)
and by the plain bounded protocol (every request an ASGI request), both over the same app, the
same sold-out memory and real Redis. Hypothesis writes claims of every shape a client can send
(good, forged, garbage or missing tokens; a retry of the winner's key; repeated, bad or absent
Idempotency-Keys; bodies empty, bad, large, over the limit, chunked; request ids; keep-alive
or not; another event) and each goes to both servers on fresh connections: the status, the
body and the headers must be the same, the date and a minted request id aside."""

import asyncio
import contextlib
import functools
import re
import secrets
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
import uvicorn
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from api.app import create_app
from api.claim_front.connection import LaneProtocol
from api.identity import DemoTokens
from api.settings import ApiSettings
from api.transport import BoundedHttpToolsProtocol, HttpBounds
from engine.model.errors import SoldOut
from loadtest.devstack.stack import spare_port
from tests.conftest import REDIS_URL, _drop_prefix, new_prefix, open_sale
from tests.helpers import memory_api_env, wait_until

pytestmark = [pytest.mark.redis]

TOKENS = secrets.token_urlsafe(32)


@dataclass
class Pair:
    early: int  # port of the server with the early lane
    plain: int  # port of the server without it
    event_id: str  # sold out, remembered by the memory, won by "winner" with key k-win


def _serve(app: Any, port: int, protocol: Any, lifespan: str) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        loop="none",
        lifespan=lifespan,
        http=functools.partial(protocol, bounds=HttpBounds()),
        log_config=None,
        access_log=False,
    )
    return uvicorn.Server(config)


async def _prepare(app: Any, prefix: str, pair: dict[str, Any]) -> None:
    """Both servers up, an event sold out (through the early server) and remembered."""
    early, plain = spare_port(), spare_port()
    servers = [
        _serve(app, early, LaneProtocol, "on"),  # runs the app's lifespan: its Context
        _serve(app, plain, BoundedHttpToolsProtocol, "off"),
    ]
    pair["servers"] = servers
    pair["tasks"] = [asyncio.create_task(s.serve()) for s in servers]
    await wait_until(lambda: all(s.started for s in servers), timeout_s=30)
    ctx = app.app.state.ctx
    await wait_until(lambda: ctx.sold_out.listening)
    sale = await open_sale(ctx.store, 1)
    await ctx.store.claim(sale.event_id, "winner", _hold_id(sale.event_id, "winner", "k-win"))
    with contextlib.suppress(SoldOut):  # a refusal from Redis makes the memory
        await ctx.claims.claim(sale.event_id, "late", "h-late")
    await wait_until(lambda: ctx.sold_out.remembers(sale.event_id))
    pair["result"] = Pair(early, plain, sale.event_id)


def _hold_id(event_id: str, login: str, key: str) -> str:
    from engine.model import keys

    return keys.hold_key(event_id, login, key)


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    prefix = new_prefix()
    env = memory_api_env(prefix, TOKENS, ONSALE_GC_GEN0="0")
    app = create_app(ApiSettings.from_env(env))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    state: dict[str, Any] = {}
    asyncio.run_coroutine_threadsafe(_prepare(app, prefix, state), loop).result(60)
    try:
        yield state["result"]
    finally:

        async def stop() -> None:
            for s in state["servers"]:
                s.should_exit = True
            await asyncio.gather(*state["tasks"])
            import redis.asyncio as aioredis

            client = aioredis.from_url(REDIS_URL)
            await _drop_prefix(client, prefix)
            await client.aclose()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def exchange(port: int, data: bytes) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection: the (final) answer's status, headers and body."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)
        buf = b""
        while True:
            head, sep, rest = buf.partition(b"\r\n\r\n")
            if sep:
                lines = head.decode("latin-1").split("\r\n")
                status = int(lines[0].split()[1])
                if status == 100:  # the interim answer: the final one follows
                    buf = rest
                    continue
                headers = {k.lower(): v for k, v in (x.split(": ", 1) for x in lines[1:])}
                n = int(headers.get("content-length", "0"))
                while len(rest) < n:
                    chunk = s.recv(65536)
                    assert chunk, "closed before the body"
                    rest += chunk
                return status, headers, rest[:n]
            chunk = s.recv(65536)
            assert chunk, f"closed before an answer: {buf!r}"
            buf += chunk


# Weighted to the claims the lane reads: a good token, on the sold-out event.
TOKEN = st.sampled_from(
    ["good"] * 3 + ["winner", "forged", "forged winner", "garbage", "none", "basic"]
)
KEY = st.sampled_from(["none", "k-win", "fresh", "bad key!", "twice"])
BODY = st.sampled_from(["{}", "", "seat", "quantity", "not json", "big", "over the limit"])
FRAMING = st.sampled_from(["length", "chunked", "expect"])
RID = st.sampled_from(["none", "rid-1234", "bad id!"])
CLOSE = st.sampled_from(["keep-alive", "close", "1.0"])
TYPE = st.sampled_from(["json", "text", "none"])
EVENT = st.sampled_from(["sold out"] * 4 + ["unknown", "bad id"])


def build(pair: Pair, n: int, parts: dict[str, str]) -> bytes:
    tokens = DemoTokens(TOKENS, 3600)
    forger = DemoTokens("another secret of forty characters....", 3600)
    auth = {
        "good": f"Bearer {tokens.issue(f'fan{n}')}",
        "winner": f"Bearer {tokens.issue('winner')}",
        "forged": f"Bearer {forger.issue(f'fan{n}')}",
        "forged winner": f"Bearer {forger.issue('winner')}",
        "garbage": "Bearer not-a-token",
        "basic": "Basic dXNlcjpwYXNz",
    }.get(parts["token"])
    event = {"sold out": pair.event_id, "unknown": "ev-none-such", "bad id": "bad%20id"}
    body = {
        "{}": b"{}",
        "": b"",
        "seat": b'{"seat_id": "s00000"}',
        "quantity": b'{"quantity": 2}',
        "not json": b"not json",
        "big": b'{"pad": "' + b"x" * 5000 + b'"}',
        "over the limit": b'{"pad": "' + b"x" * 20000 + b'"}',
    }[parts["body"]]
    version = "1.0" if parts["close"] == "1.0" else "1.1"
    lines = [f"POST /v1/events/{event[parts['event']]}/holds HTTP/{version}", "Host: onsale"]
    if auth is not None:
        lines.append(f"Authorization: {auth}")
    key = {"k-win": ["k-win"], "fresh": [f"k{n}"], "bad key!": ["bad key!"], "twice": ["k1", "k2"]}
    lines += [f"Idempotency-Key: {k}" for k in key.get(parts["key"], [])]
    if parts["type"] != "none":
        lines.append(
            f"Content-Type: {'application/json' if parts['type'] == 'json' else 'text/plain'}"
        )
    if parts["rid"] != "none":
        lines.append(f"X-Request-Id: {parts['rid']}")
    if parts["close"] == "close":
        lines.append("Connection: close")
    if parts["framing"] == "chunked" and version == "1.1":
        lines.append("Transfer-Encoding: chunked")
        payload = (b"%x\r\n%s\r\n" % (len(body), body) if body else b"") + b"0\r\n\r\n"
    else:
        lines.append(f"Content-Length: {len(body)}")
        payload = body
        if parts["framing"] == "expect":
            lines.append("Expect: 100-continue")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


def comparable(status: int, headers: dict[str, str], body: bytes) -> Any:
    """An answer without what differs by nature: the date, and a request id the server minted
    (one a client sent must be echoed by both)."""
    rid = headers.pop("x-request-id", "")
    headers.pop("date", None)
    minted = re.fullmatch(r"[0-9a-f]{32}", rid) is not None
    text = body.replace(rid.encode(), b"<rid>") if minted and rid else body
    try:
        parsed: Any = orjson.loads(text)
    except orjson.JSONDecodeError:
        parsed = text
    if isinstance(parsed, dict) and "hold_id" in parsed:  # a REPLAY: the same hold
        parsed = {k: v for k, v in parsed.items() if k != "expires_ms"}
    return status, headers, parsed, "<rid>" if minted else rid


COMMON = {
    "body": "{}",
    "framing": "length",
    "rid": "none",
    "close": "keep-alive",
    "type": "json",
    "event": "sold out",
}


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    n=st.integers(0, 10**9),
    token=TOKEN,
    key=KEY,
    body=BODY,
    framing=FRAMING,
    rid=RID,
    close=CLOSE,
    type=TYPE,
    event=EVENT,
)
# The claims whose answer turns on the lane's order of checks, always tried: a retry of the
# winner's key with its own token (its hold), with a forged one naming the winner (sold_out,
# never a 401 that would say the key was used), and a claim with a token that cannot be read.
@example(n=1, token="winner", key="k-win", **COMMON)
@example(n=2, token="forged winner", key="k-win", **COMMON)
@example(n=3, token="forged", key="fresh", **COMMON)
@example(n=4, token="garbage", key="k-win", **COMMON)
@example(n=5, token="none", key="none", **COMMON)
def test_the_early_lane_answers_every_claim_as_the_asgi_path_does(
    pair: Pair, n: int, **parts: str
) -> None:
    request = build(pair, n, parts)
    early = comparable(*exchange(pair.early, request))
    plain = comparable(*exchange(pair.plain, request))
    assert early == plain


def test_the_servers_differ_in_their_protocol_only(pair: Pair) -> None:
    """The property compares what it should: a plain refusal is answered by both, sold_out."""
    request = build(
        pair,
        1,
        {
            "token": "good",
            "key": "fresh",
            "body": "{}",
            "framing": "length",
            "rid": "rid-1234",
            "close": "keep-alive",
            "type": "json",
            "event": "sold out",
        },
    )
    for port in (pair.early, pair.plain):
        status, headers, body = exchange(port, request)
        assert (status, orjson.loads(body)["error"]["code"]) == (409, "sold_out")
        assert headers["x-request-id"] == "rid-1234"
