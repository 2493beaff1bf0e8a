"""A buyer finds their own orders (GET /v1/me/orders, ADR 0042), against the whole stack with
a ledger: the login's confirmed orders, newest first, each with its number, seats, amount and
the event's name; another login's are not listed; one event's on asking; pages follow the
cursor; a deployment without a ledger database keeps none (kept: false)."""

from typing import Any

import pytest

from engine.orders import order_number
from loadtest.buyer import bearer
from tests.integration.conftest import Stack, claim, eventually
from tests.integration.test_webhooks_http import bought, hooks

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]
__all__ = ["hooks"]  # the stack with a ledger, shared with the webhook tests


def orders(stack: Stack, login_headers: dict[str, str], **params: Any) -> Any:
    with stack.client() as c:
        return c.get("/v1/me/orders", headers=login_headers, params=params)


def test_a_buyer_lists_their_own_orders_newest_first(hooks: Stack) -> None:
    first = hooks.new_event(3, name="First Night")
    second = hooks.new_event(3)
    h1, _ = bought(hooks, first, "ola")
    h2, _ = bought(hooks, second, "ola")
    bought(hooks, first, "pia")  # someone else's order
    mine = bearer(hooks.buyer(first, "ola").token)
    # Every event's, newest first; not pia's.
    listed = eventually(lambda: len((r := orders(hooks, mine)).json()["orders"]) == 2 and r.json())
    assert [o["hold_id"] for o in listed["orders"]] == [h2["hold_id"], h1["hold_id"]]
    one = orders(hooks, mine, event_id=first).json()["orders"]
    assert [o["hold_id"] for o in one] == [h1["hold_id"]]
    [o] = one
    assert (o["order_number"], o["event_name"], o["seat_ids"], o["amount"], o["currency"]) == (
        order_number(first, h1["hold_id"]), "First Night", [h1["seat_id"]], 4500, "EUR",
    )  # fmt: skip
    assert listed["orders"][0]["event_name"] is None  # that event has no name
    page = orders(hooks, mine, limit=1).json()  # a page at a time, by the cursor
    rest = orders(hooks, mine, limit=1, cursor=page["next_cursor"]).json()
    assert [o["hold_id"] for o in page["orders"] + rest["orders"]] == [h2["hold_id"], h1["hold_id"]]
    bad = orders(hooks, mine, cursor="nope")
    assert (bad.status_code, bad.json()["error"]["code"]) == (400, "invalid_request")


def test_without_a_ledger_no_orders_are_kept(stack: Stack) -> None:
    event_id = stack.new_event(1)
    r = orders(stack, bearer(stack.buyer(event_id, "qin").token))
    assert (r.status_code, r.json()) == (200, {"orders": [], "next_cursor": None, "kept": False})


def test_a_buyer_finds_their_live_hold_without_its_id(stack: Stack) -> None:
    event_id = stack.new_event(3)
    buyer = stack.buyer(event_id, "sam")

    def live() -> Any:
        with stack.client() as c:
            return c.get("/v1/me/holds", headers=bearer(buyer.token), params={"event_id": event_id})

    assert live().json()["holds"] == []
    h = claim(stack, buyer, party=2)
    [found] = live().json()["holds"]
    assert (found["hold_id"], found["state"], found["seat_ids"]) == (
        h["hold_id"], "RESERVED", h["seat_ids"],
    )  # fmt: skip
    assert stack.send(buyer.release(h["hold_id"])).status == 200
    assert live().json()["holds"] == []
    with stack.client() as c:
        r = c.get("/v1/me/holds", headers=bearer(buyer.token))
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request")
