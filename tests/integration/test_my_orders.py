"""A buyer finds their own orders (GET /v1/me/orders, ADR 0042), against the whole stack with
a ledger: the login's confirmed orders, newest first, each with its number, seats, amount and
the event's name; another login's are not listed; one event's on asking; pages follow the
cursor; a deployment without a ledger database keeps none (kept: false); a part of an order
given back is what the merchant is told and what the buyer's order says."""

from typing import Any

import pytest

from engine.model import webhooks as wh
from engine.model.orders import order_number
from loadtest.devstack.buyer import bearer
from tests.integration.conftest import Stack, claim, eventually, hold_state, pay
from tests.integration.test_money_integrity import refund
from tests.integration.test_webhooks_http import bought, hooks, receiver, register
from tests.receiver import Receiver

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]
__all__ = ["hooks", "receiver"]  # the stack with a ledger and a merchant's receiver, shared


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


def test_a_part_given_back_reaches_the_merchant_and_the_buyers_orders(
    hooks: Stack, receiver: Receiver
) -> None:
    """ADR 0043: one seat of a party of four given back is order.partially_refunded to the
    merchant (signed, with the seat and its price) once its money is back, and the buyer's
    orders, read from the ledger, list the three seats kept and what came back."""
    secret = register(hooks, receiver.url, event_types=[wh.ORDER_PARTIALLY_REFUNDED])["secret"]
    event_id = hooks.new_event(4)
    buyer = hooks.buyer(event_id, "uma")
    h = claim(hooks, buyer, party=4)
    pay(hooks, buyer, h["hold_id"])
    eventually(lambda: hold_state(hooks, buyer, h["hold_id"])["state"] == "CONFIRMED")
    seat = h["seat_ids"][2]
    r = refund(hooks, event_id, h["hold_id"], "broken-seat", seat_ids=[seat])
    assert r.status_code == 202, r.text
    receiver.wait(lambda rc: len(rc.received) >= 1)
    [told] = receiver.verified(secret)
    assert told["type"] == wh.ORDER_PARTIALLY_REFUNDED
    assert (told["data"]["seat_ids"], told["data"]["amount"], told["data"]["hold_id"]) == (
        [seat], 4500, h["hold_id"]
    )  # fmt: skip
    assert told["data"]["order_number"] == order_number(event_id, h["hold_id"])
    mine = bearer(buyer.token)
    listed = eventually(
        lambda: [o for o in orders(hooks, mine, event_id=event_id).json()["orders"]
                 if len(o["seat_ids"]) == 3]
    )  # fmt: skip
    assert (listed[0]["amount"], listed[0]["refunded"]) == (3 * 4500, 4500)
    assert seat not in listed[0]["seat_ids"]
