"""Merchant webhooks over HTTP (ADR 0024): the stack's processes (API, worker, provider
simulator, and `onsale ledger`, which runs the writer and the sender) on a private ledger
database; the merchant registers an endpoint through the admin API and a local receiver checks
every delivery with the Standard Webhooks library, as a merchant would."""

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis

from engine.model import webhooks as wh
from engine.model.orders import order_number
from loadtest.devstack.stack import LocalStack
from persistence import database
from tests.conftest import REDIS_URL
from tests.integration.conftest import ADMIN, WEBHOOK_SECRET, Stack, run_apart
from tests.integration.test_e2e import claim, eventually, hold_state, pay
from tests.integration.test_money_integrity import attempt_of, sim_post
from tests.pg import PG_DSN
from tests.receiver import Receiver, verify

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]

EP = "/v1/admin/webhooks/endpoints"
QUICK_WEBHOOKS = {
    "ONSALE_MERCHANT_WEBHOOK_HTTP": "1",  # the receiver is plain http on loopback
    "ONSALE_MERCHANT_WEBHOOK_INTERVAL_MS": "50",
    "ONSALE_MERCHANT_WEBHOOK_BACKOFF_MS": "100",
    "ONSALE_MERCHANT_WEBHOOK_BACKOFF_MAX_MS": "500",
    "ONSALE_MERCHANT_WEBHOOK_TIMEOUT_MS": "2000",
}


@pytest.fixture(scope="module")
def hooks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The stack with a ledger of its own (migrated by the stack) and quick webhook retries."""
    name = f"onsale_test_{uuid.uuid4().hex[:10]}"
    dsn = run_apart(database.create_database(PG_DSN, name))
    prefix = f"onsale:test:{uuid.uuid4().hex[:12]}"
    local = LocalStack(
        redis_url=REDIS_URL,
        key_prefix=prefix,
        log_dir=tmp_path_factory.mktemp("hooks"),
        admin_token=ADMIN,
        webhook_secret=WEBHOOK_SECRET,
        ledger_dsn=dsn,
        extra_env={"ONSALE_PROVIDER_TIMEOUT_MS": "1000", **QUICK_WEBHOOKS},
    )
    local.start()
    try:
        stack = Stack(local.api_url, local.sim_url, prefix, local)
        stack.sim_config(decline_rate=0.0, fail_rate=0.0, late_rate=0.0, loss_rate=0.0)
        yield stack
        assert local.alive(), f"a stack process died; logs in {local.log_dir}"
    finally:
        local.stop()
        client = redis.Redis.from_url(REDIS_URL)
        for key in client.scan_iter(match=f"{prefix}:*"):
            client.delete(key)
        client.close()
        run_apart(database.drop_database(PG_DSN, name))


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver().up()
    yield r
    r.down()


def admin(stack: Stack, method: str, path: str, **kw: Any) -> httpx.Response:
    with stack.client() as c:
        return c.request(method, path, headers=stack.admin_headers(), **kw)


def register(stack: Stack, url: str, **body: Any) -> dict[str, Any]:
    r = admin(stack, "POST", EP, json={"url": url, **body})
    assert r.status_code == 201, r.text
    created: dict[str, Any] = r.json()
    return created


def bought(stack: Stack, event_id: str, name: str) -> tuple[dict[str, Any], str]:
    buyer = stack.buyer(event_id, name)
    h = claim(stack, buyer)
    charge = pay(stack, buyer, h["hold_id"])
    eventually(lambda: hold_state(stack, buyer, h["hold_id"])["state"] == "CONFIRMED")
    return h, charge["charge_id"]


def log_of(stack: Stack, endpoint_id: str, **params: Any) -> dict[str, Any]:
    r = admin(stack, "GET", f"{EP}/{endpoint_id}/deliveries", params=params)
    assert r.status_code == 200, r.text
    page: dict[str, Any] = r.json()
    return page


def test_a_sale_its_refund_and_the_exception_reach_the_merchant(
    hooks: Stack, receiver: Receiver
) -> None:
    created = register(hooks, receiver.url, description="orders to the shop")
    endpoint_id, secret = created["endpoint_id"], created["secret"]
    assert secret.startswith("whsec_") and created["event_types"] == list(wh.EVENT_TYPES)
    listed = admin(hooks, "GET", EP).json()["endpoints"]
    assert [e["endpoint_id"] for e in listed] == [endpoint_id]
    assert "secret" not in listed[0]  # shown once, at creation
    event_id = hooks.new_event(2)
    h, charge_id = bought(hooks, event_id, "ada")
    receiver.wait(lambda r: len(r.received) >= 1)
    [confirmed] = receiver.verified(secret)
    assert confirmed["type"] == wh.ORDER_CONFIRMED
    assert confirmed["data"] | {"seq": 0, "decision_id": ""} == {
        "event_id": event_id, "decision_id": "", "seq": 0, "hold_id": h["hold_id"],
        "order_number": order_number(event_id, h["hold_id"]),
        "charge_id": charge_id, "buyer": "ada", "seat_ids": [h["seat_id"]], "reason": "winner",
        "amount": 4500, "currency": "EUR",
    }  # fmt: skip
    sim_post(hooks, f"/v1/test/attempts/{attempt_of(hooks, charge_id)}/refund")
    receiver.wait(lambda r: len(r.received) >= 3)
    r = admin(hooks, "POST", f"/v1/admin/events/{event_id}/holds/{h['hold_id']}/revoke")
    assert r.status_code == 200, r.text
    receiver.wait(lambda r: len(r.received) >= 4)
    payloads = {p["type"]: p["data"] for p in receiver.verified(secret)}
    assert payloads[wh.ORDER_REFUNDED]["refunded_by"] == "provider"
    assert payloads[wh.EXCEPTION_OPENED]["reason"] == "money_refunded_at_provider"
    assert payloads[wh.EXCEPTION_RESOLVED]["resolution"] == "revoked"
    # The delivery log, newest first, one page at a time.
    pages, cursor = [], None
    while True:
        page = log_of(hooks, endpoint_id, limit=1, **({"cursor": cursor} if cursor else {}))
        pages += page["deliveries"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert [d["event_type"] for d in pages] == [
        wh.EXCEPTION_RESOLVED, wh.EXCEPTION_OPENED, wh.ORDER_REFUNDED, wh.ORDER_CONFIRMED,
    ]  # fmt: skip
    assert {(d["status"], d["attempts"], d["last_status"]) for d in pages} == {
        ("delivered", 1, 200)
    }
    assert {d["webhook_id"] for d in pages} == set(receiver.ids())
    # A replay sends the same notification again, under the same webhook-id.
    first = pages[-1]
    r = admin(hooks, "POST", f"{EP}/{endpoint_id}/deliveries/{first['delivery_id']}/replay")
    assert (r.status_code, r.json()["status"]) == (202, "pending"), r.text
    receiver.wait(lambda r: len(r.received) >= 5)
    assert receiver.ids()[-1] == first["webhook_id"]

    def replayed() -> Any:
        [d] = [
            d
            for d in log_of(hooks, endpoint_id)["deliveries"]
            if d["delivery_id"] == first["delivery_id"]
        ]
        return d if d["status"] == "delivered" else None

    assert eventually(replayed)["attempts"] == 2


def test_a_rotated_secret_signs_beside_the_new_one_and_a_disabled_endpoint_gets_nothing(
    hooks: Stack, receiver: Receiver
) -> None:
    created = register(hooks, receiver.url, event_types=[wh.ORDER_CONFIRMED])
    endpoint_id, old = created["endpoint_id"], created["secret"]
    r = admin(hooks, "POST", f"{EP}/{endpoint_id}/rotate-secret", json={"keep_previous_s": 600})
    assert r.status_code == 200, r.text
    new = r.json()["secret"]
    assert new != old and r.json()["previous_secret_until_ms"] is not None
    event_id = hooks.new_event(3)
    bought(hooks, event_id, "bo")
    receiver.wait(lambda r: len(r.received) >= 1)
    [got] = receiver.requests()
    assert verify(got, new)["type"] == verify(got, old)["type"] == wh.ORDER_CONFIRMED
    r = admin(hooks, "POST", f"{EP}/{endpoint_id}/disable")
    assert (r.status_code, r.json()["enabled"], r.json()["disabled_reason"]) == (
        200,
        False,
        "admin",
    )
    # Told CONFIRMED only once the ledger holds it (ADR 0016): mirrored while disabled, so
    # nothing was written for this endpoint, and nothing is sent when it is enabled again.
    bought(hooks, event_id, "cy")
    r = admin(hooks, "POST", f"{EP}/{endpoint_id}/enable")
    assert r.json()["enabled"] is True
    bought(hooks, event_id, "di")
    receiver.wait(lambda r: len(r.received) >= 2)
    buyers = [verify(x, new)["data"]["buyer"] for x in receiver.requests()]
    assert buyers == ["bo", "di"]
    assert len(log_of(hooks, endpoint_id)["deliveries"]) == 2
    r = admin(hooks, "DELETE", f"{EP}/{endpoint_id}")
    assert r.json() == {"endpoint_id": endpoint_id, "deleted": True}
    assert admin(hooks, "GET", f"{EP}/{endpoint_id}").status_code == 404


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("POST", EP, {"url": "ftp://shop.example/x"}, 400, "invalid_webhook_url"),
        ("POST", EP, {"url": "https://a.example", "event_types": ["x.y"]}, 400,
         "unknown_event_type"),
        ("POST", EP, {"url": "https://a.example", "colour": "red"}, 400, "invalid_request"),
        ("POST", EP, {"url": "https://a.example/" + "x" * 2048}, 400, "invalid_request"),
        ("POST", EP, {}, 400, "invalid_request"),
        ("GET", f"{EP}/ep_missing", None, 404, "webhook_endpoint_not_found"),
        ("DELETE", f"{EP}/ep_missing", None, 404, "webhook_endpoint_not_found"),
        ("POST", f"{EP}/ep_missing/disable", None, 404, "webhook_endpoint_not_found"),
        ("GET", f"{EP}/ep_missing/deliveries", None, 404, "webhook_endpoint_not_found"),
        ("POST", f"{EP}/ep_missing/replay", {"since_ms": 0}, 404, "webhook_endpoint_not_found"),
        ("POST", f"{EP}/bad id!/disable", None, 400, "invalid_request"),
    ],
)  # fmt: skip
def test_bad_input_is_refused_with_a_stable_code(
    hooks: Stack, method: str, path: str, body: Any, status: int, code: str
) -> None:
    r = admin(hooks, method, path, **({"json": body} if body is not None else {}))
    assert (r.status_code, r.json()["error"]["code"]) == (status, code), r.text


def test_what_an_endpoint_refuses(hooks: Stack, receiver: Receiver) -> None:
    endpoint_id = register(hooks, receiver.url)["endpoint_id"]
    with hooks.client() as c:
        assert c.get(EP).status_code == 401  # admin only
        assert c.get(EP, headers=hooks.login("eve")).status_code == 401
    for params, code in (
        ({"cursor": "abc"}, "invalid_request"),
        ({"status": "lost"}, "invalid_request"),
        ({"limit": "0"}, "invalid_request"),
    ):
        r = admin(hooks, "GET", f"{EP}/{endpoint_id}/deliveries", params=params)
        assert (r.status_code, r.json()["error"]["code"]) == (400, code), params
    r = admin(hooks, "POST", f"{EP}/{endpoint_id}/deliveries/999999/replay")
    assert (r.status_code, r.json()["error"]["code"]) == (404, "webhook_delivery_not_found")
    r = admin(hooks, "POST", f"{EP}/{endpoint_id}/rotate-secret", json={"keep_previous_s": -1})
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request")
    r = admin(hooks, "POST", f"{EP}/{endpoint_id}/replay", json={})
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request")
    admin(hooks, "POST", f"{EP}/{endpoint_id}/disable")
    r = admin(hooks, "POST", f"{EP}/{endpoint_id}/replay", json={"since_ms": 0})
    assert (r.status_code, r.json()["error"]["code"]) == (409, "webhook_endpoint_disabled")
    assert admin(hooks, "DELETE", f"{EP}/{endpoint_id}").status_code == 200


def test_the_listing_shows_an_endpoint_failing_and_then_healthy(
    hooks: Stack, receiver: Receiver
) -> None:
    # What the ops dashboard shows as failing: deliveries still tried, with the last answer.
    receiver.status = 500
    endpoint_id = register(hooks, receiver.url)["endpoint_id"]

    def health() -> dict[str, Any]:
        [listed] = [e for e in admin(hooks, "GET", EP).json()["endpoints"]
                    if e["endpoint_id"] == endpoint_id]  # fmt: skip
        deliveries: dict[str, Any] = listed["deliveries"]
        return deliveries

    assert health() == {"failed": 0, "pending": 0, "oldest_pending_ms": 0, "last_error": None,
                        "last_status": None}  # fmt: skip
    bought(hooks, hooks.new_event(1), "fay")
    failing = eventually(lambda: (h := health())["last_status"] == 500 and h)
    assert failing["pending"] >= 1 and failing["oldest_pending_ms"] >= 0
    receiver.status = 200
    healthy = eventually(lambda: (h := health())["pending"] == 0 and h)
    assert (healthy["failed"], healthy["last_error"], healthy["last_status"]) == (0, None, None)
    assert admin(hooks, "DELETE", f"{EP}/{endpoint_id}").status_code == 200
