"""The sold-out lane (api/claim_front/asgi_lane.py, ADR 0012, 0048): once a process remembers an
event as sold out, a claim is refused before its token's signature is checked, with the same answer
as the normal path; a retried claim still gets its hold, and a forged token naming the winner never
does. The API in process on real Redis, its sold-out memory listening."""

import asyncio
import secrets
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from api.app import create_app
from api.identity import DemoTokens
from api.settings import ApiSettings
from engine.store import Store
from tests.conftest import open_sale
from tests.helpers import memory_api_env, wait_until

pytestmark = [pytest.mark.redis]

ADMIN = secrets.token_urlsafe(32)
TOKENS = secrets.token_urlsafe(32)


@pytest.fixture
async def api(real_store: Store) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    env = memory_api_env(real_store.prefix, TOKENS, ONSALE_ADMIN_TOKEN=ADMIN)
    app = create_app(ApiSettings.from_env(env))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://api", timeout=30
        ) as http,
    ):
        ctx = app.state.ctx
        await wait_until(lambda: ctx.sold_out.listening)
        yield http, ctx


def bearer(login: str, secret: str = TOKENS) -> dict[str, str]:
    return {"Authorization": f"Bearer {DemoTokens(secret, 3600).issue(login)}"}


async def claim(http: httpx.AsyncClient, event_id: str, headers: dict[str, str]) -> httpx.Response:
    return await http.post(f"/v1/events/{event_id}/holds", json={}, headers=headers)


async def sold_out_and_remembered(http: httpx.AsyncClient, ctx: Any, store: Store) -> str:
    """An event of one seat, won by `winner` with key k-win; a refusal from Redis makes the
    memory, and the test waits until the process remembers it."""
    sale = await open_sale(store, 1)
    won = await claim(http, sale.event_id, {**bearer("winner"), "Idempotency-Key": "k-win"})
    assert won.status_code == 201, won.text
    first = await claim(http, sale.event_id, {**bearer("late"), "Idempotency-Key": "k0"})
    assert first.json()["error"]["code"] == "sold_out"
    await wait_until(lambda: ctx.sold_out.remembers(sale.event_id))
    return sale.event_id


async def test_a_remembered_refusal_is_the_normal_paths_answer(
    api: tuple[httpx.AsyncClient, Any], real_store: Store
) -> None:
    http, ctx = api
    sale = await open_sale(real_store, 1)
    await claim(http, sale.event_id, {**bearer("winner"), "Idempotency-Key": "k-win"})
    from_redis = await claim(http, sale.event_id, {**bearer("a"), "Idempotency-Key": "ka"})
    await wait_until(lambda: ctx.sold_out.remembers(sale.event_id))
    answered = ctx.sold_out.stats.answered
    headers = {**bearer("b"), "Idempotency-Key": "kb", "X-Request-Id": "req-lane-1"}
    from_lane = await claim(http, sale.event_id, headers)
    assert ctx.sold_out.stats.answered == answered + 1  # from memory, not from Redis
    assert from_lane.status_code == from_redis.status_code == 409
    lane, redis = from_lane.json()["error"], from_redis.json()["error"]
    assert lane.pop("request_id") == "req-lane-1" and redis.pop("request_id")
    assert lane == redis == {"code": "sold_out", "message": "no seat is free"}
    assert from_lane.headers["x-request-id"] == "req-lane-1"
    assert from_lane.headers["content-type"] == from_redis.headers["content-type"]


async def test_a_retry_of_the_winning_claim_still_gets_its_hold(
    api: tuple[httpx.AsyncClient, Any], real_store: Store
) -> None:
    http, ctx = api
    event_id = await sold_out_and_remembered(http, ctx, real_store)
    again = await claim(http, event_id, {**bearer("winner"), "Idempotency-Key": "k-win"})
    assert again.status_code == 200 and again.json()["state"] == "RESERVED"


async def test_a_forged_token_naming_the_winner_gets_neither_the_hold_nor_a_sign_of_it(
    api: tuple[httpx.AsyncClient, Any], real_store: Store
) -> None:
    """The lane reads the login from the token without its signature only to recognise a
    retry; a retry's token is then checked in the lane. A token signed with another secret that
    names the winner, with the winner's key, is told `sold_out` like any claim: the answer
    neither gives the hold nor says that the winner used that key (a 401 here would)."""
    http, ctx = api
    event_id = await sold_out_and_remembered(http, ctx, real_store)
    forged = {**bearer("winner", secrets.token_urlsafe(32)), "Idempotency-Key": "k-win"}
    r = await claim(http, event_id, forged)
    assert (r.status_code, r.json()["error"]["code"]) == (409, "sold_out")
    unused = {**bearer("winner", secrets.token_urlsafe(32)), "Idempotency-Key": "k-never"}
    assert (await claim(http, event_id, unused)).json() | {"error": {}} == r.json() | {"error": {}}
    assert "hold_id" not in r.text
    assert event_id not in ctx.sold_out.gates.by_event  # every place given back


@pytest.mark.parametrize(
    ("headers", "body"),
    [
        ({**bearer("mallory", "another-secret"), "Idempotency-Key": "kx"}, b"{}"),  # forged
        ({}, b"{}"),  # no token, no key: not a retry of anything
        ({**bearer("e"), "Idempotency-Key": "ky"}, b'{"quantity": 0}'),  # a body refused
    ],
)
async def test_on_a_remembered_sold_out_event_any_other_claim_is_told_sold_out(
    api: tuple[httpx.AsyncClient, Any], real_store: Store, headers: dict[str, str], body: bytes
) -> None:
    """The documented order of the lane: sold out is public, so a claim the lane cannot tie to
    a hold is told so whatever its token or body (ADR 0012)."""
    http, ctx = api
    event_id = await sold_out_and_remembered(http, ctx, real_store)
    headers = {**headers, "Content-Type": "application/json"}
    r = await http.post(f"/v1/events/{event_id}/holds", content=body, headers=headers)
    assert (r.status_code, r.json()["error"]["code"]) == (409, "sold_out")


async def test_what_the_lane_cannot_read_goes_the_normal_way(
    api: tuple[httpx.AsyncClient, Any], real_store: Store
) -> None:
    """A body over the limit, an Idempotency-Key the normal path refuses, a token that cannot
    be read: answered as before."""
    http, ctx = api
    event_id = await sold_out_and_remembered(http, ctx, real_store)
    big = b'{"pad": "' + b"x" * (ctx.settings.body_max_bytes + 10) + b'"}'
    r = await http.post(
        f"/v1/events/{event_id}/holds",
        content=big,
        headers={**bearer("c"), "Idempotency-Key": "kc", "Content-Type": "application/json"},
    )
    assert r.status_code == 413
    r = await claim(http, event_id, {**bearer("d"), "Idempotency-Key": "bad key!"})
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request")
    r = await claim(http, event_id, {"Authorization": "Bearer not-a-token", "Idempotency-Key": "k"})
    assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthorized")
    # A compressed payload is never inflated by the lane (it never checked the signature).
    bomb = ".eJzLSM3JyVcozy_KSQEAGgQEXQ.aw9OOw.z9bFTKkAeBV-TnYICJlMKNgQaC8"
    r = await claim(http, event_id, {"Authorization": f"Bearer {bomb}", "Idempotency-Key": "k"})
    assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthorized")
    # Two Idempotency-Keys: the normal path decides (the first, as Starlette reads them).
    twice = [("authorization", bearer("winner")["Authorization"])]
    twice += [("idempotency-key", "k-win"), ("idempotency-key", "k-other")]
    r = await http.post(f"/v1/events/{event_id}/holds", json={}, headers=twice)
    assert r.status_code == 200 and r.json()["state"] == "RESERVED"  # the winner's REPLAY
    bad = await claim(http, "bad id!", {**bearer("f"), "Idempotency-Key": "kf"})
    assert bad.status_code == 400 and "bad id!" not in ctx.sold_out.gates.by_event


async def test_a_claim_waiting_too_long_at_the_gate_is_a_503_with_its_error_body(
    api: tuple[httpx.AsyncClient, Any], real_store: Store
) -> None:
    """A gate that Redis answers nothing for the store's timeout: the claim is told
    store_unavailable (503, Retry-After, the JSON error body), never a bare 500."""
    http, ctx = api
    sale = await open_sale(real_store, 5)
    memory = ctx.sold_out
    memory.gates.window = 1
    ctx.store.timeout_s = 0.2
    assert await memory.admit(sale.event_id, "someone-else", 1.0) is False  # the one place
    r = await claim(http, sale.event_id, {**bearer("g"), "Idempotency-Key": "kg"})
    assert (r.status_code, r.json()["error"]["code"]) == (503, "store_unavailable")
    assert r.headers["retry-after"] == "1" and r.json()["error"]["request_id"]
    memory.release(sale.event_id)
    assert (
        await claim(http, sale.event_id, {**bearer("g"), "Idempotency-Key": "kg"})
    ).status_code == 201


async def test_a_burst_on_few_seats_is_mostly_answered_in_the_lane(
    api: tuple[httpx.AsyncClient, Any], real_store: Store
) -> None:
    """300 claims at once on 3 seats: exactly three win, everyone else is told sold_out, and
    most never reach Redis (the gate lets a few in flight, then the memory answers)."""
    http, ctx = api
    sale = await open_sale(real_store, 3)
    calls_before = ctx.store.pipeline.stats.calls
    answers = await asyncio.gather(
        *(
            claim(http, sale.event_id, {**bearer(f"fan{i}"), "Idempotency-Key": f"k{i}"})
            for i in range(300)
        )
    )
    codes = Counter(
        str(r.status_code) if r.status_code < 400 else r.json()["error"]["code"] for r in answers
    )
    assert codes == {"201": 3, "sold_out": 297}
    assert ctx.store.pipeline.stats.calls - calls_before <= 200
    await sale.audit_ok()
