"""End to end with ONSALE_PROVIDER=stripe, what only Stripe has (ADR 0023): the API and the
worker talk to the simulator speaking Stripe's API through the official `stripe` library. The
purchase flow, late captures, two tabs, refunds, lost webhooks and forged signatures run on
both providers in test_e2e.py; here, Stripe's recorded events that move no money are answered
and applied never, and the nightly reconciliation reads Stripe's charges and disputes."""

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.conftest import Stack, claim, eventually, hold_state, pay, running_stack
from tests.integration.test_money_integrity import (
    PRICE,
    _assert_nightly_clean,
    _nightly,
    attempt_of,
    exceptions,
    ledger_dsn,
    party_of_four,
    refund,
    refunds_at_provider,
    sim_post,
    state_is,
)
from tests.provider_wire import Payment, stripe_event

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]
__all__ = ["ledger_dsn"]  # a fixture used from test_money_integrity


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("stripe-stack"), "stripe") as s:
        yield s


@pytest.fixture(autouse=True)
def honest_provider(stack: Stack) -> None:
    stack.sim_config(
        decline_rate=0.0, fail_rate=0.0, late_rate=0.0, duplicate_rate=0.5, loss_rate=0.0,
        contradict_rate=0.0, refund_updated_rate=0.5,
    )  # fmt: skip


def unrelated(event: dict[str, Any]) -> dict[str, Any]:
    """The event about a payment that is not ours: its intent's metadata names nothing of ours."""
    event["data"]["object"]["metadata"] = {"order": "shop-7731"}
    return event


@pytest.mark.parametrize(
    ("fixture", "change", "reason"),
    [
        ("event.charge.dispute.created.inquiry.json", None, "dispute_warning_needs_response"),
        ("event.charge.refund.updated.pending.json", None, "refund_pending"),
        ("event.payment_intent.payment_failed.no_charge.json", None, "no_attempt"),
        ("event.payment_intent.succeeded.json", unrelated, "not_ours"),
        ("event.payment_intent.succeeded.json", "customer.created", "type:customer.created"),
    ],
    ids=["dispute-inquiry", "refund-pending", "failed-before-a-charge", "not-ours", "other-type"],
)
def test_recorded_events_that_move_no_money_are_answered_and_applied_never(
    stack: Stack, fixture: str, change: Any, reason: str
) -> None:
    """Each recorded event (tests/fixtures/stripe/) carries a sale of ours; Stripe is answered
    200 IGNORED (so it stops retrying) and the sale is untouched."""
    event_id = stack.new_event(1)
    buyer = stack.buyer(event_id, f"ivo-{uuid.uuid4().hex[:6]}")
    h = claim(stack, buyer)
    charge_id = pay(stack, buyer, h["hold_id"])["charge_id"]
    eventually(state_is(stack, buyer, h["hold_id"], "CONFIRMED"))
    event = stripe_event(
        fixture, Payment.of_record(stack.record(charge_id)), f"evt_{uuid.uuid4().hex}"
    )
    if isinstance(change, str):
        event["type"] = change
    elif change is not None:
        event = change(event)
    r = stack.post_callback(event)
    assert r.status_code == 200, r.text
    assert (r.json()["decision"], r.json()["reason"]) == ("IGNORED", reason)
    state = hold_state(stack, buyer, h["hold_id"])
    assert (state["state"], [c["state"] for c in state["charges"]]) == ("CONFIRMED", ["CAPTURED"])
    assert exceptions(stack, event_id)["alerts"] == []


def test_nightly_finds_what_stripe_did_without_telling_us(stack: Stack, ledger_dsn: str) -> None:
    """Every webhook lost: a dashboard refund of a sale. The nightly run reads Stripe's charges
    and disputes through the interface, repairs it (a visible exception) and is then clean."""
    event_id = stack.new_event(2)
    buyer = stack.buyer(event_id, "mo")
    h = claim(stack, buyer)
    charge_id = pay(stack, buyer, h["hold_id"])["charge_id"]
    eventually(state_is(stack, buyer, h["hold_id"], "CONFIRMED"))
    stack.sim_config(loss_rate=1.0)
    sim_post(stack, f"/v1/test/attempts/{stack.record(charge_id)['attempt_id']}/refund")
    first = asyncio.run(_nightly(stack, ledger_dsn, event_id))
    assert {(d.cls, d.entity): d.repaired for d in first.discrepancies} == {
        ("seat_sold_without_money", h["hold_id"]): True
    }, first
    second = asyncio.run(_nightly(stack, ledger_dsn, event_id))
    assert second.discrepancies == [] and second.provider_net == second.expected_net == 0
    assert second.open_exceptions["seats_without_money"] == 1


def test_a_refund_delivered_before_its_capture_never_sells_the_seat(stack: Stack) -> None:
    """Stripe does not order its events. The buyer paid, the money was refunded at Stripe, and
    `charge.refunded` reaches us before `payment_intent.succeeded`: the refund is answered 200
    (noted, never a 503), and the success then ends as the in-order pair does: the seat is an
    exception whose money left, never a sale; every redelivery changes nothing (ADR 0036)."""
    stack.sim_config(loss_rate=1.0)  # the simulator delivers nothing: we deliver, in our order
    event_id = stack.new_event(1)
    buyer = stack.buyer(event_id, f"ria-{uuid.uuid4().hex[:6]}")
    h = claim(stack, buyer)
    charge_id = pay(stack, buyer, h["hold_id"])["charge_id"]
    record = eventually(lambda: (r := stack.record(charge_id))["status"] == "captured" and r)
    sim_post(stack, f"/v1/test/attempts/{record['attempt_id']}/refund")
    payment = Payment.of_record(stack.record(charge_id))
    refunded = stripe_event("event.charge.refunded.json", payment, f"evt_{uuid.uuid4().hex}")
    succeeded = stripe_event(
        "event.payment_intent.succeeded.json", payment, f"evt_{uuid.uuid4().hex}"
    )
    decisions = []
    for event in (refunded, succeeded, refunded, succeeded):
        r = stack.post_callback(event)
        assert r.status_code == 200, r.text
        decisions.append(r.json()["decision"])
    assert decisions[0] == "NOTED"
    state = hold_state(stack, buyer, h["hold_id"])
    assert (state["state"], [c["state"] for c in state["charges"]]) == (
        "EXCEPTION",
        ["PROVIDER_REFUNDED"],
    )
    [listed] = exceptions(stack, event_id)["seats_without_money"]
    assert (listed["hold_id"], listed["reason"]) == (h["hold_id"], "money_refunded_at_provider")


def test_one_seat_of_a_party_refunded_through_stripe_leaves_the_rest_sold(
    stack: Stack, ledger_dsn: str
) -> None:
    """Stripe refunds exactly the seat's price (a refund of an amount, keyed per part) and then
    reports the charge's refunded total (charge.refunded, refund.updated): our own part, not
    money that left the order; the order keeps three seats and the nightly run is clean."""
    event_id = stack.new_event(4)
    buyer, h, charge_id = party_of_four(stack, event_id)
    r = refund(stack, event_id, h["hold_id"], "one-seat", seat_ids=h["seat_ids"][:1])
    assert r.status_code == 202, r.text
    attempt = attempt_of(stack, charge_id)
    eventually(lambda: refunds_at_provider(stack, attempt) == [PRICE])
    part = r.json()["charge_id"]
    eventually(
        lambda: any(
            ch["charge_id"] == part and ch["state"] == "REFUNDED"
            for ch in hold_state(stack, buyer, h["hold_id"])["charges"]
        )
    )
    held = hold_state(stack, buyer, h["hold_id"])
    assert (held["state"], len(held["seat_ids"]), held["order"]["amount"]) == (
        "CONFIRMED", 3, 3 * PRICE
    )  # fmt: skip
    assert exceptions(stack, event_id)["alerts"] == []
    asyncio.run(_assert_nightly_clean(stack, ledger_dsn, event_id))
