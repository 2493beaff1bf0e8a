"""End to end over HTTP: API, provider simulator and worker as separate processes."""

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest
import redis.asyncio as redis_asyncio

from engine.signing import HEADER, sign
from engine.store import Store
from loadtest.buyer import BuyerApi
from tests.conftest import REDIS_URL
from tests.integration.conftest import WEBHOOK_SECRET, Stack

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def eventually(check: Callable[[], Any], timeout_s: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"not reached within {timeout_s}s (last: {last!r})")


def hold_state(stack: Stack, buyer: BuyerApi, hold_id: str) -> dict[str, Any]:
    answer = stack.send(buyer.hold(hold_id))
    assert answer.status == 200, answer
    return answer.body


def claim(
    stack: Stack, buyer: BuyerApi, seat_id: str | None = None, party: int = 1
) -> dict[str, Any]:
    answer = stack.send(buyer.claim(seat_id=seat_id, party=party))
    assert answer.status == 201, answer
    return answer.body


def pay(stack: Stack, buyer: BuyerApi, hold_id: str) -> dict[str, Any]:
    answer = stack.send(buyer.pay(hold_id))
    assert answer.status == 202, answer
    return answer.body


@pytest.fixture(autouse=True)
def honest_provider(stack: Stack) -> None:
    stack.sim_config(
        decline_rate=0.0, fail_rate=0.0, late_rate=0.0, duplicate_rate=0.5, loss_rate=0.0
    )


def test_happy_path(stack: Stack) -> None:
    event_id = stack.new_event(3)
    alice = stack.buyer(event_id, "alice")
    h = claim(stack, alice)
    assert h["seat_id"] == "s0" and h["state"] == "RESERVED"
    charge = pay(stack, alice, h["hold_id"])
    assert (charge["state"], charge["amount"]) == ("CHARGING", 4500)
    final = eventually(
        lambda: (s := hold_state(stack, alice, h["hold_id"]))["state"] == "CONFIRMED" and s
    )
    assert final["winner"] == charge["charge_id"]
    assert final["order"] == {
        "seat_ids": ["s0"], "amount": 4500, "currency": "EUR", "charge_id": charge["charge_id"],
    }  # fmt: skip
    avail = stack.send(alice.availability()).body
    assert (avail["sold"], avail["free"]) == (1, 2)
    captures = [e for e in stack.ledger()["entries"] if e["idempotency_key"] == charge["charge_id"]]
    assert [e["kind"] for e in captures] == ["capture"]


def test_decline_then_pay_again(stack: Stack) -> None:
    event_id = stack.new_event(2)
    bob = stack.buyer(event_id, "bob")
    h = claim(stack, bob)
    stack.sim_config(decline_rate=1.0)
    first = pay(stack, bob, h["hold_id"])
    eventually(lambda: hold_state(stack, bob, h["hold_id"])["charges"][0]["state"] == "DECLINED")
    assert hold_state(stack, bob, h["hold_id"])["state"] == "RESERVED"
    stack.sim_config(decline_rate=0.0)
    second = pay(stack, bob, h["hold_id"])
    assert second["charge_id"] != first["charge_id"]
    eventually(lambda: hold_state(stack, bob, h["hold_id"])["state"] == "CONFIRMED")


def test_late_success_after_the_hold_died_is_refunded(stack: Stack) -> None:
    event_id = stack.new_event(1, hold_ttl_ms=1000, quarantine_ms=1000, policy="release_refund")
    carol, dave = stack.buyer(event_id, "carol"), stack.buyer(event_id, "dave")
    h = claim(stack, carol)
    stack.sim_config(late_rate=1.0, late_delay_ms=2500)
    charge = pay(stack, carol, h["hold_id"])
    assert charge["provider_status"] == "timeout"  # the client is told "timed out"
    eventually(lambda: hold_state(stack, carol, h["hold_id"])["state"] == "EXPIRED")
    stack.sim_config(late_rate=0.0)
    resold = claim(stack, dave)  # the seat went back on sale and is sold again
    assert resold["seat_id"] == h["seat_id"]
    eventually(lambda: hold_state(stack, carol, h["hold_id"])["charges"][0]["state"] == "REFUNDED")
    kinds = [
        e["kind"] for e in stack.ledger()["entries"] if e["idempotency_key"] == charge["charge_id"]
    ]
    assert kinds == ["capture", "refund"]


def test_a_party_of_four_pays_once(stack: Stack) -> None:
    event_id = stack.new_event(6)
    fam = stack.buyer(event_id, "family")
    h = claim(stack, fam, party=4)
    assert h["seat_ids"] == ["s0", "s1", "s2", "s3"] and h["seat_id"] == "s0"
    charge = pay(stack, fam, h["hold_id"])
    assert charge["amount"] == 4 * 4500
    final = eventually(
        lambda: (s := hold_state(stack, fam, h["hold_id"]))["state"] == "CONFIRMED" and s
    )
    assert final["seat_ids"] == h["seat_ids"] and final["winner"] == charge["charge_id"]
    assert final["order"] == {
        "seat_ids": h["seat_ids"], "amount": 4 * 4500, "currency": "EUR",
        "charge_id": charge["charge_id"],
    }  # fmt: skip
    assert stack.send(fam.availability()).body["sold"] == 4
    entries = [e for e in stack.ledger()["entries"] if e["idempotency_key"] == charge["charge_id"]]
    assert [(e["kind"], e["amount"]) for e in entries] == [("capture", 4 * 4500)]


def test_a_late_capture_on_an_expired_party_is_refunded_in_full(stack: Stack) -> None:
    event_id = stack.new_event(4, hold_ttl_ms=1000, quarantine_ms=1000, policy="release_refund")
    fam, other = stack.buyer(event_id, "late-family"), stack.buyer(event_id, "next-family")
    h = claim(stack, fam, party=3)
    stack.sim_config(late_rate=1.0, late_delay_ms=2500)
    charge = pay(stack, fam, h["hold_id"])
    eventually(lambda: hold_state(stack, fam, h["hold_id"])["state"] == "EXPIRED")
    stack.sim_config(late_rate=0.0)
    resold = claim(stack, other, party=3)  # the whole party went back on sale
    assert sorted(resold["seat_ids"]) == sorted(h["seat_ids"])
    eventually(lambda: hold_state(stack, fam, h["hold_id"])["charges"][0]["state"] == "REFUNDED")
    moves = [
        (e["kind"], e["amount"])
        for e in stack.ledger()["entries"]
        if e["idempotency_key"] == charge["charge_id"]
    ]
    assert moves == [("capture", 3 * 4500), ("refund", 3 * 4500)]
    assert hold_state(stack, fam, h["hold_id"])["order"] is None  # nothing was bought


def test_two_tabs_one_wins_the_other_is_refunded(stack: Stack) -> None:
    event_id = stack.new_event(2)
    tab1 = stack.buyer(event_id, "erin")
    tab2 = stack.buyer(event_id, "erin")  # same login, second tab: one identity
    h = claim(stack, tab1)
    stack.sim_config(late_rate=1.0, late_delay_ms=1500)
    c1 = pay(stack, tab1, h["hold_id"])
    r = stack.send(tab2.pay(h["hold_id"]))
    assert (r.status, r.code) == (409, "charge_in_flight")
    r = stack.send(tab1.abandon(h["hold_id"], c1["charge_id"]))
    assert r.body["abandoned"] is True
    stack.sim_config(late_rate=0.0)
    c2 = pay(stack, tab2, h["hold_id"])
    final = eventually(
        lambda: (s := hold_state(stack, tab2, h["hold_id"]))["state"] == "CONFIRMED" and s
    )
    assert final["winner"] == c2["charge_id"]
    eventually(
        lambda: (
            {
                ch["charge_id"]: ch["state"]
                for ch in hold_state(stack, tab1, h["hold_id"])["charges"]
            }
            == {c1["charge_id"]: "REFUNDED", c2["charge_id"]: "CAPTURED"}
        )
    )


def _signed_post(
    stack: Stack, event: dict[str, Any], *, secret: str = WEBHOOK_SECRET, ts: int | None = None
) -> httpx.Response:
    body = orjson.dumps(event)
    header = sign(secret, body, ts if ts is not None else int(time.time()))
    return httpx.post(
        f"{stack.api}/v1/provider/callbacks",
        content=body,
        headers={HEADER: header, "Content-Type": "application/json"},
        timeout=5,
    )


def _capture_event(event_id: str, charge_id: str, evt: str) -> dict[str, Any]:
    """A well-formed capture message for our charge, as the simulator would send it."""
    digest = charge_id.rsplit("~", 1)[-1]
    return {
        "id": evt,
        "type": "charge.captured",
        "data": {
            "attempt_id": f"att-{digest}",
            "intent_id": f"pi-{digest}",
            "idempotency_key": charge_id,
            "amount": 4500,
            "currency": "EUR",
            "status": "captured",
            "metadata": {"event_id": event_id, "charge_id": charge_id},
        },
    }


def _sim_record(stack: Stack, charge_id: str) -> dict[str, Any]:
    """The simulator's own record of the attempt it made for our charge."""
    r = httpx.get(f"{stack.sim}/v1/charges", params={"idempotency_key": charge_id}, timeout=5)
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()
    return data


def test_duplicate_and_reordered_callbacks_process_once(stack: Stack) -> None:
    event_id = stack.new_event(2)
    frank = stack.buyer(event_id, "frank")
    h = claim(stack, frank)
    stack.sim_config(duplicate_rate=1.0)  # every callback delivered two or three times
    charge = pay(stack, frank, h["hold_id"])
    eventually(lambda: hold_state(stack, frank, h["hold_id"])["state"] == "CONFIRMED")
    # Replays of our own: the same provider event, then a new event id for the same attempt.
    record = _sim_record(stack, charge["charge_id"])
    evt = _capture_event(event_id, charge["charge_id"], "evt-replay-1")
    evt["data"] = {k: record[k] for k in evt["data"]} | {"amount": record["amount"]}
    first, again = _signed_post(stack, evt), _signed_post(stack, evt)
    assert first.status_code == again.status_code == 200
    assert again.json()["duplicate"] is True
    assert again.json()["decision"] == first.json()["decision"] == "CONFIRMED"
    final = hold_state(stack, frank, h["hold_id"])
    assert [c["state"] for c in final["charges"]] == ["CAPTURED"]


def test_forged_and_stale_callbacks_change_nothing(stack: Stack) -> None:
    event_id = stack.new_event(1)
    gina = stack.buyer(event_id, "gina")
    h = claim(stack, gina)
    stack.sim_config(late_rate=1.0, late_delay_ms=60_000)  # the real capture will not come
    charge = pay(stack, gina, h["hold_id"])
    forged = _signed_post(
        stack, _capture_event(event_id, charge["charge_id"], "evt-f1"), secret="not-the-secret"
    )
    assert (forged.status_code, forged.json()["error"]["code"]) == (401, "bad_signature")
    stale = _signed_post(
        stack, _capture_event(event_id, charge["charge_id"], "evt-f2"), ts=int(time.time()) - 3600
    )
    assert stale.status_code == 401
    unsigned = httpx.post(f"{stack.api}/v1/provider/callbacks", json={"id": "x"}, timeout=5)
    assert unsigned.status_code == 401
    state = hold_state(stack, gina, h["hold_id"])
    assert state["state"] == "RESERVED" and state["charges"][0]["state"] == "CHARGING"


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


def test_lost_callback_is_found_by_reconciliation(stack: Stack) -> None:
    event_id = stack.new_event(1)
    jo = stack.buyer(event_id, "jo")
    h = claim(stack, jo)
    stack.sim_config(loss_rate=1.0)  # the provider captures but never calls back
    charge = pay(stack, jo, h["hold_id"])
    eventually(
        lambda: any(e["idempotency_key"] == charge["charge_id"] for e in stack.ledger()["entries"])
    )
    stack.sim_config(loss_rate=0.0)  # the capture above was emitted (and lost) already
    final = eventually(
        lambda: (s := hold_state(stack, jo, h["hold_id"]))["state"] == "CONFIRMED" and s
    )
    assert final["charges"][0]["state"] == "CAPTURED"


def test_charge_the_provider_never_saw_is_closed_as_failed(stack: Stack) -> None:
    """A crash between registering the charge and calling the provider: reconciliation asks,
    the provider has never heard of it, the charge is closed FAILED and the buyer can pay."""
    event_id = stack.new_event(1)
    kim = stack.buyer(event_id, "kim")
    h = claim(stack, kim)

    async def register_only() -> None:
        client = redis_asyncio.from_url(REDIS_URL, decode_responses=True)
        store = Store(client, prefix=stack.prefix)
        await store.start_charge(event_id, h["hold_id"], "kim", "crashed-charge", 4500)
        await client.aclose()

    asyncio.run(register_only())
    eventually(lambda: hold_state(stack, kim, h["hold_id"])["charges"][0]["state"] == "FAILED")
    assert hold_state(stack, kim, h["hold_id"])["state"] == "RESERVED"
    pay(stack, kim, h["hold_id"])
    eventually(lambda: hold_state(stack, kim, h["hold_id"])["state"] == "CONFIRMED")


def test_verified_callbacks_are_kept_raw_and_forged_ones_are_not(stack: Stack) -> None:
    event_id = stack.new_event(1)
    lee = stack.buyer(event_id, "lee")
    h = claim(stack, lee)
    stack.sim_config(late_rate=1.0, late_delay_ms=600_000)  # no real capture will interfere
    charge = pay(stack, lee, h["hold_id"])
    stack.sim_config(late_rate=0.0)
    good = _capture_event(event_id, charge["charge_id"], "evt-raw-good")
    bad = _capture_event(event_id, charge["charge_id"], "evt-raw-forged")
    assert _signed_post(stack, good).status_code == 200
    assert _signed_post(stack, bad, secret="wrong").status_code == 401

    async def kept() -> list[dict[str, str]]:
        client = redis_asyncio.from_url(REDIS_URL, decode_responses=True)
        try:
            return await Store(client, prefix=stack.prefix).read.raw_callbacks(event_id)
        finally:
            await client.aclose()

    raw = asyncio.run(kept())
    assert [r["provider_event_id"] for r in raw] == ["evt-raw-good"]
    assert orjson.loads(raw[0]["body"]) == good  # the exact bytes we verified
