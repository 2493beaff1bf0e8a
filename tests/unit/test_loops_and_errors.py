"""engine/loops.repeat (the loop every worker runs), the API's error table and its input
validators: in process, no server."""

import asyncio
import logging

import pytest

from api.errors import STATUS, ApiError
from api.validate import idempotency_key, ident, integer, obj
from engine import errors
from engine.loops import repeat

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
