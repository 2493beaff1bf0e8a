"""Requests over HTTP that move no money, on the whole stack (the simulator as the provider):
another login's hold, a claim before T0, bad input, authentication, the ops endpoints. The
purchase flow, against each provider, is test_e2e.py."""

import time
import uuid
from typing import Any

import pytest

from engine.model.signing import HEADER
from loadtest.devstack.buyer import BuyerApi
from tests.integration.conftest import Stack, claim, hold_state

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def test_another_logins_hold_answers_as_an_unknown_one(stack: Stack) -> None:
    event_id = stack.new_event(2)
    alice, mallory = stack.buyer(event_id, "alice2"), stack.buyer(event_id, "mallory")
    h = claim(stack, alice)
    for call in (
        mallory.hold(h["hold_id"]),
        mallory.release(h["hold_id"]),
        mallory.pay(h["hold_id"]),
    ):
        r = stack.send(call)
        assert (r.status, r.code) == (404, "hold_not_found"), call
    assert hold_state(stack, alice, h["hold_id"])["state"] == "RESERVED"


def test_claims_before_t0_are_refused(stack: Stack) -> None:
    event_id = stack.new_event(2, opens_at_ms=int(time.time() * 1000) + 3_600_000)
    r = stack.send(stack.buyer(event_id, "early").claim())
    assert (r.status, r.code) == (409, "sale_not_open")


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "code"),
    [
        ("POST", "/v1/events/{e}/holds", {"content": b"{nope"}, 400, "invalid_request"),
        ("POST", "/v1/events/{e}/holds", {"json": {"seat_id": 7}}, 400, "invalid_request"),
        ("POST", "/v1/events/{e}/holds", {"json": [1, 2]}, 400, "invalid_request"),
        ("POST", "/v1/events/{e}/holds", {"content": b"x" * 70_000}, 413, "body_too_large"),
        (
            "POST",
            "/v1/events/{e}/holds",
            {"content": b"a=b", "headers": {"Content-Type": "text/plain"}},
            415,
            "unsupported_media_type",
        ),
        ("POST", "/v1/events/{e}/holds", {"json": {"seat_id": "nope"}}, 404, "unknown_seat"),
        ("POST", "/v1/events/bad%20id/holds", {"json": {}}, 400, "invalid_request"),
        ("POST", "/v1/events/no-such-event/holds", {"json": {}}, 404, "event_not_found"),
        ("GET", "/v1/events/{e}/holds/nope", {}, 404, "hold_not_found"),
        ("GET", "/v1/nowhere", {}, 404, "not_found"),
        ("PUT", "/v1/events/{e}/holds", {}, 405, "method_not_allowed"),
        ("POST", "/v1/login", {"json": {"login": ""}}, 400, "invalid_request"),
        ("GET", "/v1/events/{e}/seats?limit=9999", {}, 400, "invalid_request"),
    ],
)
def test_bad_input_gets_a_clear_4xx(
    stack: Stack, method: str, path: str, kwargs: dict[str, Any], status: int, code: str
) -> None:
    event_id = stack.new_event(1)
    auth = stack.login("hank")
    headers = {**auth, **kwargs.pop("headers", {})}
    with stack.client() as c:
        r = c.request(method, path.format(e=event_id), headers=headers, **kwargs)
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code
    assert r.json()["error"]["request_id"]


def test_auth_is_required(stack: Stack) -> None:
    event_id = stack.new_event(1)
    assert stack.send(BuyerApi(event_id).claim()).status == 401  # no token
    assert stack.send(BuyerApi(event_id, "forged.token.value").claim()).status == 401
    with stack.client() as c:
        r = c.post(
            "/v1/admin/events", json={"event_id": "x", "seats": []}, headers=stack.login("ivan")
        )
        assert r.status_code == 401
        r = c.post(
            "/v1/admin/events",
            json={"event_id": f"x{uuid.uuid4().hex[:6]}", "seats": []},
            headers=stack.admin_headers(),
        )
        assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request")
        # Non-ASCII bytes where a token or a signature should be: 401, never a 500.
        r = c.get("/v1/admin/events/x/exceptions", headers={"Authorization": b"Bearer \xff\xfe"})
        assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthorized")
        r = c.post(
            "/v1/provider/callbacks",
            content=b"{}",
            headers={HEADER: f"t={int(time.time())},v1=".encode() + b"\xff\xfe"},
        )
        assert (r.status_code, r.json()["error"]["code"]) == (401, "bad_signature")


def test_ops_exceptions_metrics_and_readiness(stack: Stack) -> None:
    event_id = stack.new_event(2)
    with stack.client() as c:
        r = c.get(
            f"/v1/admin/events/{event_id}/exceptions?charging_older_than_ms=0",
            headers=stack.admin_headers(),
        )
        assert r.status_code == 200
        assert set(r.json()) >= {
            "captured_without_seat",
            "refunds_pending",
            "refunds_retrying",
            "blocked_seats",
            "charging_too_long",
        }
        assert c.get("/readyz").json()["ok"] is True
        assert c.get("/metrics").status_code == 401  # ops only
        metrics = c.get("/metrics", headers=stack.admin_headers()).text
        assert "onsale_http_request_seconds" in metrics
        assert "onsale_claims_total" in metrics
        assert "onsale_pipeline_calls_total" in metrics  # the store's own counters
        assert "onsale_sold_out_listening 1.0" in metrics
