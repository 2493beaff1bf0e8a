"""Quantity stock over HTTP (ADR 0022), the stack as processes: a cart from two locations pays
once and its order lists its lines; a late capture on an expired cart is refunded in full and
leaves the stock as it was; corrections are applied, replayed, refused below zero with the
figures, and refused when their id is reused; bad stock input answers a stable 4xx; the
`onsale stock` commands correct and show the same counts."""

import uuid
from typing import Any

import pytest

from api.qr import qr_data_url
from engine.model.orders import order_number
from loadtest.devstack.buyer import Answer, Call, bearer
from onsale.cli import main
from tests.conftest import REDIS_URL
from tests.integration.conftest import Stack
from tests.integration.test_e2e import eventually

pytestmark = [pytest.mark.redis, pytest.mark.slow]

CHAIN, TUBE = 2_500, 900  # prices, minor units


@pytest.fixture(autouse=True)
def honest_provider(stack: Stack) -> None:
    stack.sim_config(
        decline_rate=0.0, fail_rate=0.0, late_rate=0.0, duplicate_rate=0.5, loss_rate=0.0
    )


def create(stack: Stack, body: dict[str, Any]) -> Answer:
    with stack.client() as c:
        r = c.post("/v1/admin/events", json=body, headers=stack.admin_headers())
    return Answer.of(r.status_code, r.content)


def warehouse(stack: Stack, **options: Any) -> str:
    """CHAIN in east (5) and west (3); TUBE only in west (4). Open now, no per-login cap."""
    event_id = f"stock-{uuid.uuid4().hex[:8]}"
    body = {
        "event_id": event_id,
        "kind": "stock",
        "locations": ["east", "west"],
        "skus": [
            {"sku": "CHAIN", "price_minor": CHAIN, "on_hand": {"east": 5, "west": 3}},
            {"sku": "TUBE", "price_minor": TUBE, "on_hand": {"west": 4}},
        ],
        "hold_ttl_ms": 600_000,
        "quarantine_ms": 900_000,
        "login_cap": 0,
        "opens_at_ms": 0,
        **options,
    }
    answer = create(stack, body)
    assert answer.status == 201, answer
    assert answer.body == {"event_id": event_id, "kind": "stock", "skus": 2, "units": 12}
    return event_id


class Shopper:
    """One login's requests on one event (the buyer API of the load tools has no carts)."""

    def __init__(self, stack: Stack, event_id: str, name: str) -> None:
        self.stack, self.path = stack, f"/v1/events/{event_id}"
        self.headers = bearer(stack.token(name))

    def claim(self, body: dict[str, Any]) -> Answer:
        return self.stack.send(Call("claim", "POST", f"{self.path}/holds", body, self.headers))

    def cart(self, *lines: tuple[str, int]) -> dict[str, Any]:
        answer = self.claim({"lines": [{"sku": sku, "quantity": n} for sku, n in lines]})
        assert answer.status == 201, answer
        return answer.body

    def hold(self, hold_id: str) -> dict[str, Any]:
        path = f"{self.path}/holds/{hold_id}"
        answer = self.stack.send(Call("hold", "GET", path, None, self.headers))
        assert answer.status == 200, answer
        return answer.body

    def pay(self, hold_id: str) -> dict[str, Any]:
        path = f"{self.path}/holds/{hold_id}/charges"
        answer = self.stack.send(Call("pay", "POST", path, None, self.headers))
        assert answer.status == 202, answer
        return answer.body


def stock(stack: Stack, event_id: str) -> dict[str, dict[str, dict[str, int]]]:
    """sku -> location -> counters, from the public stock view."""
    answer = stack.send(Call("stock", "GET", f"/v1/events/{event_id}/stock"))
    assert answer.status == 200, answer
    return {s["sku"]: {x.pop("location"): x for x in s["locations"]} for s in answer.body["skus"]}


def moves(stack: Stack, charge_id: str) -> list[tuple[str, int]]:
    entries = stack.ledger()["entries"]
    return [(e["kind"], e["amount"]) for e in entries if e["idempotency_key"] == charge_id]


def test_a_cart_from_two_locations_pays_once_and_its_order_lists_its_lines(stack: Stack) -> None:
    event_id = warehouse(stack)
    ann = Shopper(stack, event_id, "ann")
    cart = ann.cart(("CHAIN", 4), ("TUBE", 2))
    lines = [
        {"sku": "CHAIN", "location": "east", "quantity": 4},  # east first: it has 5
        {"sku": "TUBE", "location": "west", "quantity": 2},  # east has none
    ]
    amount = 4 * CHAIN + 2 * TUBE
    assert (cart["lines"], cart["amount"], cart["seat_id"], cart["seat_ids"]) == (
        lines, amount, None, [],
    )  # fmt: skip
    assert stock(stack, event_id)["CHAIN"]["east"] == {
        "on_hand": 5, "available": 1, "held": 4, "blocked": 0, "sold": 0,
    }  # fmt: skip
    charge = ann.pay(cart["hold_id"])
    assert (charge["amount"], charge["currency"]) == (amount, "EUR")
    final = eventually(lambda: (s := ann.hold(cart["hold_id"]))["state"] == "CONFIRMED" and s)
    assert (final["lines"], final["amount"]) == (lines, amount)
    number = order_number(event_id, final["hold_id"])
    assert final["order"] == {
        "order_number": number, "qr": qr_data_url(number),
        "lines": lines, "amount": amount, "refunded": 0, "currency": "EUR",
        "charge_id": charge["charge_id"],
    }  # fmt: skip
    assert moves(stack, charge["charge_id"]) == [("capture", amount)]  # paid once
    after = stock(stack, event_id)
    assert (after["CHAIN"]["east"]["sold"], after["TUBE"]["west"]["sold"]) == (4, 2)
    totals = stack.send(Call("availability", "GET", f"/v1/events/{event_id}")).body
    assert (totals["seats_total"], totals["sold"], totals["free"]) == (12, 6, 6)


def test_a_late_capture_on_an_expired_cart_is_refunded_and_the_stock_is_unchanged(
    stack: Stack,
) -> None:
    event_id = warehouse(stack, hold_ttl_ms=1000, quarantine_ms=1000, policy="release_refund")
    before = stock(stack, event_id)
    bo = Shopper(stack, event_id, "bo")
    cart = bo.cart(("CHAIN", 5), ("TUBE", 1))
    stack.sim_config(late_rate=1.0, late_delay_ms=2500)
    charge = bo.pay(cart["hold_id"])
    assert charge["provider_status"] == "timeout"
    eventually(lambda: bo.hold(cart["hold_id"])["state"] == "EXPIRED")
    stack.sim_config(late_rate=0.0)
    assert stock(stack, event_id) == before  # the cart's units are available again
    eventually(lambda: bo.hold(cart["hold_id"])["charges"][0]["state"] == "REFUNDED")
    amount = 5 * CHAIN + TUBE
    assert moves(stack, charge["charge_id"]) == [("capture", amount), ("refund", amount)]
    assert bo.hold(cart["hold_id"])["order"] is None
    assert stock(stack, event_id) == before  # the late capture took nothing


def correct(stack: Stack, event_id: str, body: dict[str, Any], admin: bool = True) -> Answer:
    path = f"/v1/admin/events/{event_id}/stock/corrections"
    headers = stack.admin_headers() if admin else {}
    with stack.client() as c:
        r = c.post(path, json=body, headers=headers)
    return Answer.of(r.status_code, r.content)


def test_corrections_are_applied_replayed_and_refused_with_the_figures(stack: Stack) -> None:
    event_id = warehouse(stack)
    recount = {"correction_id": "recount-1", "sku": "CHAIN", "location": "east", "set": 8}
    first = correct(stack, event_id, {**recount, "reason": "stocktake"})
    assert (first.status, first.body) == (
        201, {"correction_id": "recount-1", "on_hand": 8, "available": 8, "replay": False},
    )  # fmt: skip
    again = correct(stack, event_id, {**recount, "reason": "stocktake"})
    assert (again.status, again.body["on_hand"], again.body["replay"]) == (200, 8, True)
    reused = correct(stack, event_id, {**recount, "set": 9, "reason": "stocktake"})
    assert (reused.status, reused.code) == (409, "correction_id_reused")
    Shopper(stack, event_id, "cy").cart(("CHAIN", 6))  # 6 of east's 8 held: 2 available
    below = correct(
        stack, event_id,
        {"correction_id": "shrink", "sku": "CHAIN", "location": "east", "adjust": -3,
         "reason": "damaged", "operator": "dana"},
    )  # fmt: skip
    assert (below.status, below.code) == (409, "stock_below_zero")
    figures = {k: below.body["error"][k] for k in ("available", "held", "blocked", "sold")}
    assert figures == {"available": 2, "held": 6, "blocked": 0, "sold": 0}
    assert stock(stack, event_id)["CHAIN"]["east"]["on_hand"] == 8  # nothing written
    shrink = {"correction_id": "shrink-2", "adjust": -2, "reason": "damaged"}
    applied = correct(stack, event_id, {**shrink, "sku": "CHAIN", "location": "east"})
    assert (applied.status, applied.body["on_hand"], applied.body["available"]) == (201, 6, 0)


@pytest.mark.parametrize(
    ("change", "status", "code", "detail"),
    [
        ({"sku": "BELL"}, 404, "unknown_sku", {"sku": "BELL"}),
        ({"location": "north"}, 404, "unknown_location", {"location": "north"}),
        ({"set": -1}, 400, "invalid_request", {}),
        ({"adjust": 1}, 400, "invalid_request", {}),  # set and adjust both
        ({"set": None}, 400, "invalid_request", {}),  # neither
        ({"reason": ""}, 400, "invalid_request", {}),
        ({"reason": "x" * 501}, 400, "invalid_request", {}),
        ({"operator": "a\nb"}, 400, "invalid_request", {}),
        ({"sku": "a:b"}, 400, "invalid_request", {}),
        ({"note": "x"}, 400, "invalid_request", {}),
    ],
    ids=repr,
)
def test_a_bad_correction_is_a_clear_4xx(
    stack: Stack, change: dict[str, Any], status: int, code: str, detail: dict[str, Any]
) -> None:
    event_id = warehouse(stack)
    body = {"correction_id": "c1", "sku": "CHAIN", "location": "east", "set": 1, "reason": "r"}
    answer = correct(stack, event_id, {**body, **change})
    assert (answer.status, answer.code) == (status, code), answer
    assert {k: answer.body["error"].get(k) for k in detail} == detail
    assert stock(stack, event_id)["CHAIN"]["east"]["on_hand"] == 5


def test_corrections_need_an_admin_and_a_stock_event(stack: Stack) -> None:
    event_id = warehouse(stack)
    body = {"correction_id": "c1", "sku": "CHAIN", "location": "east", "set": 1, "reason": "r"}
    assert correct(stack, event_id, body, admin=False).status == 401
    seats = correct(stack, stack.new_event(1), body)
    assert (seats.status, seats.code, seats.body["error"]["kind"]) == (
        400, "wrong_event_kind", "seats",
    )  # fmt: skip
    assert correct(stack, "no-such-event", body).code == "event_not_found"


def test_the_stock_view_of_a_seat_event_or_an_unknown_one(stack: Stack) -> None:
    seats = stack.send(Call("stock", "GET", f"/v1/events/{stack.new_event(1)}/stock"))
    assert (seats.status, seats.code, seats.body["error"]["kind"]) == (
        400, "wrong_event_kind", "seats",
    )  # fmt: skip
    unknown = stack.send(Call("stock", "GET", "/v1/events/no-such-event/stock"))
    assert (unknown.status, unknown.code) == (404, "event_not_found")


def _lines(*lines: tuple[str, int]) -> dict[str, Any]:
    return {"lines": [{"sku": sku, "quantity": n} for sku, n in lines]}


@pytest.mark.parametrize(
    ("body", "status", "code", "detail"),
    [
        ({}, 400, "wrong_event_kind", {"kind": "stock"}),  # a seat claim on a stock event
        ({"quantity": 2}, 400, "wrong_event_kind", {"kind": "stock"}),
        (_lines(("BELL", 1)), 404, "unknown_sku", {"sku": "BELL"}),
        (
            {"lines": [{"sku": "CHAIN", "quantity": 1, "location": "north"}]},
            404,
            "unknown_location",
            {"location": "north"},
        ),
        (_lines(("TUBE", 5)), 409, "insufficient_stock", {"sku": "TUBE", "available": 4}),
        (_lines(("CHAIN", 0)), 400, "invalid_request", {}),
        (_lines(("CHAIN", 101)), 400, "invalid_request", {}),
        (_lines(*[(f"S{i}", 1) for i in range(51)]), 400, "invalid_request", {}),
        (_lines(("CHAIN", 1), ("CHAIN", 2)), 400, "invalid_request", {}),
        ({"lines": []}, 400, "invalid_request", {}),
        ({"lines": [{"sku": "CHAIN", "quantity": 1, "colour": "red"}]}, 400, "invalid_request", {}),
        ({"lines": [{"sku": "CH*1", "quantity": 1}]}, 400, "invalid_request", {}),
        ({**_lines(("CHAIN", 1)), "quantity": 1}, 400, "invalid_request", {}),
        ({"lines": "CHAIN"}, 400, "invalid_request", {}),
    ],
    ids=repr,
)
def test_bad_stock_claims_get_a_stable_4xx_and_take_nothing(
    stack: Stack, body: dict[str, Any], status: int, code: str, detail: dict[str, Any]
) -> None:
    event_id = warehouse(stack)
    answer = Shopper(stack, event_id, "eve").claim(body)
    assert (answer.status, answer.code) == (status, code), answer
    assert {k: answer.body["error"].get(k) for k in detail} == detail
    assert all(x["held"] == 0 for s in stock(stack, event_id).values() for x in s.values())


def test_lines_on_a_seat_event_are_the_wrong_kind(stack: Stack) -> None:
    answer = Shopper(stack, stack.new_event(2), "flo").claim(_lines(("CHAIN", 1)))
    assert (answer.status, answer.code, answer.body["error"]["kind"]) == (
        400, "wrong_event_kind", "seats",
    )  # fmt: skip


def test_an_event_cap_counts_units(stack: Stack) -> None:
    event_id = warehouse(stack, login_cap=3)
    answer = Shopper(stack, event_id, "gus").claim(_lines(("CHAIN", 4)))
    assert (answer.status, answer.code, answer.body["error"]["cap"]) == (409, "limit_exceeded", 3)


def test_the_stock_commands_correct_and_show(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ONSALE_REDIS_URL", REDIS_URL)
    monkeypatch.setenv("ONSALE_KEY_PREFIX", stack.prefix)
    monkeypatch.setenv("ONSALE_OPERATOR", "dana")
    event_id = warehouse(stack)
    where = ["--event", event_id, "--sku", "TUBE", "--location", "west"]
    argv = ["stock", "correct", *where, "--adjust", "3", "--reason", "found a box", "--id", "k1"]
    assert main(argv) == 0
    assert "on hand 7, available 7" in capsys.readouterr().out
    assert main(argv) == 0  # the same id again: its replay
    assert "replayed" in capsys.readouterr().out
    assert stock(stack, event_id)["TUBE"]["west"]["on_hand"] == 7
    refused = ["stock", "correct", *where, "--set", "0", "--reason", "x", "--id", "k1"]
    assert main(refused) == 1
    assert "correction_id_reused" in capsys.readouterr().err
    assert main(["stock", "show", "--event", event_id]) == 0
    shown = capsys.readouterr().out
    assert "TUBE" in shown and "west" in shown and "7" in shown
    assert main(["stock", "show", "--event", stack.new_event(1)]) == 1


def test_free_seats_per_section(stack: Stack) -> None:
    event_id = stack.new_event(4)  # s0..s3, all in section A
    assert Shopper(stack, event_id, "ann").claim({"quantity": 2}).status == 201
    got = stack.send(Call("sections", "GET", f"/v1/events/{event_id}/sections"))
    assert (got.status, got.body) == (200, {"sections": [{"section": "A", "seats": 4, "free": 2}]})
    unknown = stack.send(Call("sections", "GET", "/v1/events/no-such-event/sections"))
    assert (unknown.status, unknown.code) == (404, "event_not_found")
