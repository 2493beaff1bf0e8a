"""Prices per seat level, against the whole stack and a private ledger: an event's
`price_levels` give each seat of that level its price (a seat without a level pays the event's
`price_minor`); a party across two levels is charged the sum, its hold view names each seat's
price; a level the table lacks is refused whole at the create; the ledger keeps each seat's
price and a rebuilt event charges the same."""

import csv
import io
import uuid
from typing import Any

import pytest

from engine.model.event_config import EventConfig
from engine.model.holds import SeatSpec
from engine.store.prices import seat_prices
from persistence.rebuild import rebuild
from tests.integration.conftest import Stack, StackLedger, eventually, hold_state, pay

pytestmark = [pytest.mark.redis, pytest.mark.slow]

LEVELS = {"front": 9_000, "back": 4_500}


def seats(n: int = 8) -> list[dict[str, Any]]:
    """Rows of four: the first row 'front', the next 'back', the rest without a level."""
    level = ["front", "back"]
    return [
        {"seat_id": f"s{i}", "rank": i, "row": str(i // 4 + 1), "x": (i % 4) * 30,
         "y": (i // 4) * 30, **({"price_level": level[i // 4]} if i < 8 else {})}
        for i in range(n)
    ]  # fmt: skip


def create(stack: Stack, body: dict[str, Any]) -> tuple[str, Any]:
    event_id = f"lv-{uuid.uuid4().hex[:8]}"
    with stack.client() as c:
        r = c.post(
            "/v1/admin/events",
            json={"event_id": event_id, "opens_at_ms": 0, **body},
            headers=stack.admin_headers(),
        )
    return event_id, r


def test_a_party_across_two_levels_pays_the_sum_of_its_seats(stack: Stack) -> None:
    stack.sim_config(decline_rate=0.0, fail_rate=0.0, late_rate=0.0, loss_rate=0.0)
    event_id, r = create(stack, {"seats": seats(12), "price_levels": LEVELS, "price_minor": 1_000})
    assert r.status_code == 201, r.text
    buyer = stack.buyer(event_id, "pat")
    # s3 (front), s4 (back) and s8 (no level): one party across the levels.
    claimed = stack.send(buyer.claim_seats(["s3", "s4", "s8"]))
    assert claimed.status == 201, claimed
    # The claim's answer names each seat's price and what the charge will ask.
    assert claimed.body["seat_prices"] == {"s3": 9_000, "s4": 4_500, "s8": 1_000}
    assert claimed.body["amount"] == 14_500
    hold_id = claimed.body["hold_id"]
    held = hold_state(stack, buyer, hold_id)
    assert held["seat_prices"] == {"s3": 9_000, "s4": 4_500, "s8": 1_000}
    assert held["amount"] == 14_500
    started = pay(stack, buyer, hold_id)
    assert started["amount"] == 14_500  # what the provider is asked for
    done = eventually(
        lambda: (h := hold_state(stack, buyer, hold_id))["state"] == "CONFIRMED" and h
    )
    assert done["order"]["amount"] == 14_500
    assert done["order"]["seat_prices"] == {"s3": 9_000, "s4": 4_500, "s8": 1_000}
    with stack.client() as c:  # the merchant's listing and its CSV name each seat's price
        orders = c.get(f"/v1/admin/events/{event_id}/orders", headers=stack.admin_headers())
        sheet = c.get(f"/v1/admin/events/{event_id}/orders.csv", headers=stack.admin_headers())
    [row] = orders.json()["orders"]
    assert (row["seat_prices"], row["amount"]) == ({"s3": 9_000, "s4": 4_500, "s8": 1_000}, 14_500)
    [row] = csv.DictReader(io.StringIO(sheet.text))
    assert (row["seat_prices"], row["amount"]) == ("s3=9000 s4=4500 s8=1000", "14500")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"price_levels": {"front": 9_000}}, "price_level back of s4 is not in price_levels"),
        ({"price_levels": {}}, "price_levels must be an object of 1 to 64 names"),
        ({"price_levels": {"front": -1, "back": 1}}, "price of level front must be"),
        ({"price_levels": {"x\n": 1, "front": 1, "back": 1}}, "price level x\n must be"),
    ],
)
def test_a_price_table_that_does_not_fit_its_seats_is_refused_whole(
    stack: Stack, body: dict[str, Any], message: str
) -> None:
    event_id, r = create(stack, {"seats": seats(), **body})
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert (error["code"], message in error["message"]) == ("invalid_request", True), r.text
    with stack.client() as c:  # nothing was written
        assert c.get(f"/v1/events/{event_id}").status_code == 404


def test_levels_on_a_stock_event_are_refused(stack: Stack) -> None:
    _, r = create(stack, {"kind": "stock", "price_levels": LEVELS,
                          "skus": [{"sku": "ga", "price_minor": 5, "on_hand": {"east": 1}}],
                          "locations": ["east"]})  # fmt: skip
    assert r.status_code == 400, r.text
    assert "a stock event takes no price_levels" in r.json()["error"]["message"]


@pytest.mark.postgres
async def test_the_ledger_keeps_each_seats_price_and_a_rebuild_charges_the_same(
    stack: Stack, stack_ledger: StackLedger
) -> None:
    store, pool = stack_ledger.store, stack_ledger.pool
    event_id = f"lv-{uuid.uuid4().hex[:8]}"
    specs = [SeatSpec("a", 0, "A", 9_000), SeatSpec("b", 1, "A", None), SeatSpec("c", 2, "B", 5)]
    await store.create_event(
        event_id, specs, EventConfig(hold_ttl_ms=60_000, quarantine_ms=60_000), price_minor=700
    )
    await store.open_sale(event_id, 0)
    assert await seat_prices(store.runner, event_id, ["a", "b", "c"]) == [9_000, 700, 5]
    await stack_ledger.drain(event_id)
    async with pool.acquire() as conn:
        rows = await conn.fetch("select seat_id, price_minor from seats where event_id = $1 "
                                "order by seat_id", event_id)  # fmt: skip
        assert [(r["seat_id"], r["price_minor"]) for r in rows] == [
            ("a", 9_000),
            ("b", None),
            ("c", 5),
        ]
        await store.restore.drop_event(event_id)
        await rebuild(store, conn, event_id)
    assert await seat_prices(store.runner, event_id, ["c", "b", "a"]) == [5, 700, 9_000]


def test_a_charge_asks_in_the_events_currency(stack: Stack) -> None:
    """The charge's answer and the provider's attempt carry the event's currency, not a default
    (the charge reads only that field of the event)."""
    stack.sim_config(decline_rate=0.0, fail_rate=0.0, late_rate=0.0, loss_rate=0.0)
    event_id, r = create(stack, {"seats": seats(4), "price_minor": 2_500, "currency": "GBP"})
    assert r.status_code == 201, r.text
    buyer = stack.buyer(event_id, "gbp")
    claimed = stack.send(buyer.claim_seats(["s1"]))
    assert claimed.status == 201, claimed
    started = pay(stack, buyer, claimed.body["hold_id"])
    assert (started["currency"], started["amount"]) == ("GBP", 2_500)
    attempt = stack.record(started["charge_id"])
    assert (attempt["currency"], attempt["amount"]) == ("GBP", 2_500)
