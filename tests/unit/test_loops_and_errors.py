"""engine/loops.repeat (the loop every worker runs), the API's error table, its input
validators and its bounded JSON bodies: in process, no server."""

import asyncio
import logging

import pytest
from starlette.requests import Request

from api.errors import STATUS, ApiError
from api.responses import json_response, read_json
from api.validate import idempotency_key, ident, integer, obj
from engine.model import errors
from engine.store.loops import repeat

LOG = logging.getLogger("test.loops")


async def test_repeat_retries_failures_and_runs_again_at_once_when_behind() -> None:
    stop = asyncio.Event()
    calls: list[str] = []

    async def step() -> bool:
        calls.append("step")
        if len(calls) == 1:
            raise ConnectionError("an outage")  # expected: retried after a backoff
        if len(calls) == 2:
            return True  # work left behind: run again at once
        stop.set()
        return False

    failures: list[int] = []
    async with asyncio.timeout(5):
        await repeat(
            "t", step, stop, interval_s=0.01, expected=(ConnectionError,), log=LOG,
            on_error=lambda: failures.append(1),
        )  # fmt: skip
    assert (len(calls), failures) == (3, [1])


async def test_repeat_ends_on_an_invariant_violation() -> None:
    async def step() -> bool:
        raise errors.InvariantViolation("impossible state")

    with pytest.raises(errors.InvariantViolation):
        async with asyncio.timeout(5):
            await repeat("t", step, asyncio.Event(), interval_s=0.01, expected=(), log=LOG)


def test_every_engine_refusal_has_a_4xx_or_503() -> None:
    codes = {cls.code for cls in errors.EngineError.__subclasses__()}
    assert codes - {"engine_error"} <= set(STATUS)
    assert all(400 <= STATUS[c] < 500 or STATUS[c] == 503 for c in codes if c in STATUS)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: obj([1, 2]), "JSON object"),
        (lambda: ident({"seat_id": 7}, "seat_id"), "seat_id"),
        (lambda: ident({"seat_id": "a b"}, "seat_id"), "seat_id"),
        (lambda: integer({"n": True}, "n"), "n must be an integer"),
        (lambda: integer({"n": 10}, "n", high=5), "[0, 5]"),
        (lambda: idempotency_key("x" * 65, "fallback"), "Idempotency-Key"),
    ],
)
def test_bad_input_is_a_400_invalid_request(call: object, message: str) -> None:
    with pytest.raises(ApiError) as caught:
        call()  # type: ignore[operator]
    assert (caught.value.status, caught.value.code) == (400, "invalid_request")
    assert message in caught.value.message


def test_good_input_passes_through() -> None:
    assert ident({}, "seat_id", required=False) is None
    assert integer({}, "n", default=3) == 3
    assert idempotency_key(None, "fallback") == "fallback"


def _request(body: bytes, headers: dict[str, str]) -> Request:
    chunks = [body[i : i + 5] for i in range(0, len(body), 5)] or [b""]

    async def receive() -> dict[str, object]:
        chunk = chunks.pop(0) if chunks else b""
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}

    scope = {
        "type": "http",
        "method": "POST",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    return Request(scope, receive)


@pytest.mark.parametrize(
    ("body", "headers", "status", "code"),
    [
        (b"x" * 40, {}, 413, "body_too_large"),  # no Content-Length: counted while streaming
        (b"{}", {"content-length": "99"}, 413, "body_too_large"),  # refused on the header
        (b"{}", {"content-length": "2x"}, 400, "invalid_request"),
        (b"  ", {}, 400, "invalid_request"),  # a body is required
        (b"{nope", {}, 400, "invalid_request"),
        (b"{}", {"content-type": "text/plain"}, 415, "unsupported_media_type"),
    ],
)
async def test_request_bodies_are_bounded_and_must_be_json(
    body: bytes, headers: dict[str, str], status: int, code: str
) -> None:
    with pytest.raises(ApiError) as caught:
        await read_json(_request(body, headers), max_bytes=32)
    assert (caught.value.status, caught.value.code) == (status, code)


async def test_a_json_body_within_bounds_is_read_and_answered_with_orjson() -> None:
    assert await read_json(_request(b'{"a": [1, 2]}', {}), max_bytes=32) == {"a": [1, 2]}
    assert await read_json(_request(b"", {}), max_bytes=32, allow_empty=True) == {}
    r = json_response({"b": 1}, status=201)
    assert (r.status_code, r.body, r.media_type) == (201, b'{"b":1}', "application/json")


async def test_a_body_is_read_across_messages_and_a_disconnect_ends_it() -> None:
    """read_body reads the ASGI messages as Starlette's stream does: chunks joined in order,
    empty chunks and other message types passed over, a client gone raises ClientDisconnect."""
    from starlette.requests import ClientDisconnect

    from api.responses import read_body

    def request(messages: list[dict[str, object]]) -> Request:
        async def receive() -> dict[str, object]:
            return messages.pop(0)

        return Request({"type": "http", "method": "POST", "headers": []}, receive)

    parts = [{"type": "http.request", "body": b'{"a"', "more_body": True},
             {"type": "http.request", "body": b"", "more_body": True},
             {"type": "lifespan.whatever"},
             {"type": "http.request", "body": b": 1}", "more_body": False}]  # fmt: skip
    assert await read_body(request(parts), max_bytes=32) == b'{"a": 1}'
    gone = [{"type": "http.request", "body": b"{", "more_body": True}, {"type": "http.disconnect"}]
    with pytest.raises(ClientDisconnect):
        await read_body(request(gone), max_bytes=32)
