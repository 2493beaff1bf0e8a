"""Admin listings, the orders export, and the end of a sale over HTTP (ADR 0025): events and
their configuration, holds, charges and orders paged, the CSV export matching the orders; close
refuses claims with sale_closed; cancel refunds every winning charge at the provider (its own
ledger says so) and is idempotent; a second open answers 409 already_open; bad input is a
stable 4xx."""

import csv
import io
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Stack
from tests.integration.test_e2e import claim, eventually, hold_state, pay

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.fixture(autouse=True)
def honest_provider(stack: Stack) -> None:
    stack.sim_config(
        decline_rate=0.0, fail_rate=0.0, late_rate=0.0, duplicate_rate=0.0, loss_rate=0.0
    )


def admin(stack: Stack, method: str, path: str, **kwargs: Any) -> httpx.Response:
    with stack.client() as c:
        return c.request(method, path, headers=stack.admin_headers(), **kwargs)


def sell(stack: Stack, event_id: str, names: list[str]) -> list[dict[str, Any]]:
    """Each buyer claims the best seat and pays; returns the confirmed holds."""
    sold = []
    for name in names:
        buyer = stack.buyer(event_id, name)
        h = claim(stack, buyer)
        pay(stack, buyer, h["hold_id"])
        sold.append(
            eventually(
                lambda b=buyer, hid=h["hold_id"]: (
                    (s := hold_state(stack, b, hid))["state"] == "CONFIRMED" and s["order"] and s
                )
            )
        )
    return sold


def all_pages(stack: Stack, path: str, name: str, limit: int = 1) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor = None
    while True:
        base, _, query = path.partition("?")
        params: dict[str, Any] = dict(httpx.QueryParams(query))
        params |= {"limit": limit, **({"cursor": cursor} if cursor else {})}
        r = admin(stack, "GET", base, params=params)
        assert r.status_code == 200, r.text
        body = r.json()
        assert len(body[name]) <= limit
        out += body[name]
        cursor = body["next_cursor"]
        if cursor is None:
            return out


def test_listings_config_orders_and_csv(stack: Stack) -> None:
    event_id = stack.new_event(4)
    sold = sell(stack, event_id, ["lst-a", "lst-b"])
    claim(stack, stack.buyer(event_id, "lst-c"))  # a hold not paid
    events = all_pages(stack, "/v1/admin/events", "events", limit=500)
    mine = next(e for e in events if e["event_id"] == event_id)
    assert (mine["status"], mine["sold"], mine["held"], mine["free"]) == ("open", 2, 1, 1)
    config = admin(stack, "GET", f"/v1/admin/events/{event_id}").json()
    assert (config["kind"], config["price_minor"], config["currency"]) == ("seats", 4500, "EUR")
    assert config["status"] == "open" and config["hold_ttl_ms"] > 0 and config["opens_at_ms"] > 0
    holds = all_pages(stack, f"/v1/admin/events/{event_id}/holds", "holds")
    assert sorted(h["state"] for h in holds) == ["CONFIRMED", "CONFIRMED", "RESERVED"]
    reserved = all_pages(stack, f"/v1/admin/events/{event_id}/holds?state=RESERVED", "holds")
    assert [h["login"] for h in reserved] == ["lst-c"]
    charges = all_pages(stack, f"/v1/admin/events/{event_id}/charges?state=CAPTURED", "charges")
    assert sorted(c["charge_id"] for c in charges) == sorted(h["order"]["charge_id"] for h in sold)
    orders = all_pages(stack, f"/v1/admin/events/{event_id}/orders", "orders")
    # The buyer's order, less its QR code (the buyer's alone, ADR 0042).
    want = {h["hold_id"]: {k: v for k, v in h["order"].items() if k != "qr"} for h in sold}
    assert {o["hold_id"]: {k: o[k] for k in want[o["hold_id"]]} for o in orders} == want
    r = admin(stack, "GET", f"/v1/admin/events/{event_id}/orders.csv")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert {(x["hold_id"], x["seat_ids"], int(x["amount"]), x["currency"], x["charge_id"])
            for x in rows} == {
        (o["hold_id"], " ".join(o["seat_ids"]), o["amount"], o["currency"], o["charge_id"])
        for o in orders
    }  # fmt: skip


def test_close_refuses_claims_with_sale_closed(stack: Stack) -> None:
    event_id = stack.new_event(3)
    buyer = stack.buyer(event_id, "cls-a")
    h = claim(stack, buyer)
    for _ in range(2):  # a repeat answers the same
        r = admin(stack, "POST", f"/v1/admin/events/{event_id}/close")
        assert (r.status_code, r.json()["status"]) == (200, "closed")
    refused = stack.send(stack.buyer(event_id, "cls-b").claim())
    assert refused.status == 409, refused
    assert (refused.status, refused.body["error"]["code"]) == (409, "sale_closed")
    assert refused.body["error"]["sale_status"] == "closed"
    paying = stack.send(buyer.pay(h["hold_id"]))
    assert (paying.status, paying.body["error"]["code"]) == (409, "sale_closed")
    r = admin(stack, "POST", f"/v1/admin/events/{event_id}/open", json={"reschedule": True})
    assert (r.status_code, r.json()["error"]["code"]) == (409, "sale_closed")
    assert hold_state(stack, buyer, h["hold_id"])["state"] == "RESERVED"  # runs to its deadline


def test_cancel_refunds_every_winning_charge_once(stack: Stack) -> None:
    event_id = stack.new_event(4)
    sold = sell(stack, event_id, ["cnl-a", "cnl-b", "cnl-c"])
    claim(stack, stack.buyer(event_id, "cnl-d"))
    r = admin(stack, "POST", f"/v1/admin/events/{event_id}/cancel", json={"batch": 1})
    assert r.status_code in (200, 202), r.text
    while r.status_code == 202:
        r = admin(stack, "POST", f"/v1/admin/events/{event_id}/cancel", json={"batch": 1})
    assert r.json()["complete"] and r.json()["remaining"] == 0
    keys = {h["order"]["charge_id"] for h in sold}

    def refunded() -> bool:
        moves = [(e["idempotency_key"], e["kind"]) for e in stack.ledger()["entries"]]
        return all((key, "refund") in moves for key in keys)

    eventually(refunded)
    again = admin(stack, "POST", f"/v1/admin/events/{event_id}/cancel")
    assert (again.status_code, again.json()["holds_ended"]) == (200, 0)
    charges = all_pages(stack, f"/v1/admin/events/{event_id}/charges", "charges", limit=10)
    eventually(
        lambda: {c["state"] for c in all_pages(
            stack, f"/v1/admin/events/{event_id}/charges", "charges", limit=10)} == {"REFUNDED"}
    )  # fmt: skip
    assert {c["charge_id"] for c in charges} == keys
    moves = [e for e in stack.ledger()["entries"] if e["idempotency_key"] in keys]
    assert sorted(e["kind"] for e in moves) == ["capture"] * 3 + ["refund"] * 3
    holds = all_pages(stack, f"/v1/admin/events/{event_id}/holds", "holds", limit=10)
    assert sorted(h["state"] for h in holds) == ["RELEASED", "REVOKED", "REVOKED", "REVOKED"]
    assert admin(stack, "GET", f"/v1/admin/events/{event_id}/orders").json()["orders"] == []
    path = f"/v1/admin/events/{event_id}/exceptions/charges"
    assert all_pages(stack, path, "exceptions") == []  # every refund confirmed
    config = admin(stack, "GET", f"/v1/admin/events/{event_id}").json()
    assert config["status"] == "cancelled"


def test_open_twice_answers_already_open(stack: Stack) -> None:
    event_id = stack.new_event(2)
    opens_at = admin(stack, "GET", f"/v1/admin/events/{event_id}").json()["opens_at_ms"]
    r = admin(stack, "POST", f"/v1/admin/events/{event_id}/open", json={})
    assert r.status_code == 409
    assert r.json()["error"] | {"request_id": ""} == {
        "code": "already_open", "message": r.json()["error"]["message"],
        "request_id": "", "opens_at_ms": opens_at,
    }  # fmt: skip
    r = admin(stack, "POST", f"/v1/admin/events/{event_id}/open", json={"reschedule": True})
    assert (r.status_code, r.json()["error"]["code"]) == (409, "sale_started")


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("GET", "/v1/admin/events?limit=0", None, 400, "invalid_request"),
        ("GET", "/v1/admin/events?limit=501", None, 400, "invalid_request"),
        ("GET", "/v1/admin/events/nope-event/holds", None, 404, "event_not_found"),
        ("GET", "/v1/admin/events/nope-event", None, 404, "event_not_found"),
        ("GET", "/v1/admin/events/nope-event/orders.csv", None, 404, "event_not_found"),
        ("GET", "/v1/admin/events/{e}/holds?state=SOLD", None, 400, "invalid_request"),
        ("GET", "/v1/admin/events/{e}/charges?state=", None, 400, "invalid_request"),
        (
            "GET",
            "/v1/admin/events/{e}/exceptions/charges?state=CAPTURED",
            None,
            400,
            "invalid_request",
        ),
        ("GET", "/v1/admin/events/{e}/holds?cursor=%21%21", None, 400, "invalid_cursor"),
        ("GET", "/v1/admin/events/{e}/orders?cursor=eA", None, 400, "invalid_cursor"),
        ("POST", "/v1/admin/events/{e}/cancel", {"batch": 0}, 400, "invalid_request"),
        ("POST", "/v1/admin/events/{e}/cancel", {"what": 1}, 400, "invalid_request"),
        ("POST", "/v1/admin/events/{e}/open", {"reschedule": "yes"}, 400, "invalid_request"),
        ("POST", "/v1/admin/events/nope-event/close", None, 404, "event_not_found"),
        ("POST", "/v1/admin/events/nope-event/cancel", None, 404, "event_not_found"),
    ],
)
def test_bad_input_is_a_stable_4xx(
    stack: Stack, method: str, path: str, body: Any, status: int, code: str
) -> None:
    event_id = stack.new_event(1)
    r = admin(stack, method, path.replace("{e}", event_id), json=body)
    assert (r.status_code, r.json()["error"]["code"]) == (status, code)
    with stack.client() as c:  # no admin credential
        assert c.request(method, path.replace("{e}", event_id)).status_code == 401
