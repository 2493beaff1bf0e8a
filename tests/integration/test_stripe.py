"""End to end with ONSALE_PROVIDER=stripe: the API and the worker talk to the simulator speaking
Stripe's API through the official `stripe` library, and take its Stripe-signed events
(`Stripe-Signature`), duplicated, reordered and late (ADR 0023). The purchase flow, a decline
then a new payment, a late capture refunded, two tabs, refunds and disputes made at the
provider, a lost webhook found by reconciliation (Stripe's search), forged and stale signatures;
every event touched ends with a clean nightly reconciliation through the provider interface."""

import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
import redis
import stripe

from loadtest.stack import LocalStack
from tests.conftest import REDIS_URL
from tests.integration.conftest import ADMIN, Stack
from tests.integration.test_e2e import claim, eventually, hold_state, pay
from tests.integration.test_money_integrity import (
    _nightly,
    exceptions,
    ledger_dsn,
    money_of,
    reconciled,
    sim_post,
    state_is,
)

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]
__all__ = ["ledger_dsn", "reconciled"]  # fixtures used from test_money_integrity


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prefix = f"onsale:test:{uuid.uuid4().hex[:12]}"
    local = LocalStack(
        redis_url=REDIS_URL,
        key_prefix=prefix,
        log_dir=tmp_path_factory.mktemp("stripe-stack"),
        admin_token=ADMIN,
        provider="stripe",
        sim_args=("--duplicate-rate", "0.5"),
        extra_env={
            "ONSALE_PROVIDER_TIMEOUT_MS": "1000",
            "ONSALE_SWEEP_INTERVAL_MS": "50",
            "ONSALE_REFUND_INTERVAL_MS": "100",
            "ONSALE_RECONCILE_INTERVAL_MS": "300",
            "ONSALE_RECONCILE_STALE_MS": "1500",
        },
    )
    local.start()
    try:
        yield Stack(local.api_url, local.sim_url, prefix, local)
        assert local.alive(), f"a stack process died; logs in {local.log_dir}"
    finally:
        local.stop()
        client = redis.Redis.from_url(REDIS_URL)
        for key in client.scan_iter(match=f"{prefix}:*"):
            client.delete(key)
        client.close()


@pytest.fixture(autouse=True)
def honest_provider(stack: Stack) -> None:
    stack.sim_config(
        decline_rate=0.0, fail_rate=0.0, late_rate=0.0, duplicate_rate=0.5, loss_rate=0.0,
        contradict_rate=0.0, refund_updated_rate=0.5,
    )  # fmt: skip


def record(stack: Stack, charge_id: str) -> dict[str, Any]:
    """The simulator's own record of the latest attempt under our key."""
    r = httpx.get(f"{stack.sim}/v1/test/keys/{charge_id}", timeout=5)
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()
    return data


def stripe_post(stack: Stack, event: dict[str, Any], *, secret: str = "", at: int = 0) -> Any:
    body = orjson.dumps(event)
    header = stripe.WebhookSignature.generate_signature_header(
        body.decode(), secret or stack.local.stripe_webhook_secret, at or None
    )
    return httpx.post(
        f"{stack.api}/v1/provider/callbacks",
        content=body,
        headers={"Stripe-Signature": header, "Content-Type": "application/json"},
        timeout=5,
    )


def succeeded_event(stack: Stack, charge_id: str, evt: str) -> dict[str, Any]:
    """A payment_intent.succeeded for our charge, as Stripe (the simulator) would send it."""
    rec = record(stack, charge_id)
    r = httpx.get(
        f"{stack.sim}/v1/payment_intents/{rec['intent_id']}",
        headers={"Authorization": f"Bearer {stack.local.stripe_api_key}"},
        timeout=5,
    )
    assert r.status_code == 200, r.text
    return {"id": evt, "object": "event", "type": "payment_intent.succeeded",
            "created": int(time.time()), "data": {"object": r.json()}}  # fmt: skip


def test_purchase_flow(stack: Stack, reconciled: list[str]) -> None:
    event_id = stack.new_event(3)
    reconciled.append(event_id)
    alice = stack.buyer(event_id, "alice")
    h = claim(stack, alice)
    charge = pay(stack, alice, h["hold_id"])
    assert (charge["state"], charge["provider_status"]) == ("CHARGING", "processing")
    assert charge["client_secret"].startswith("pi_")  # for Stripe.js on the buyer's page
    final = eventually(state_is(stack, alice, h["hold_id"], "CONFIRMED"))
    assert final["winner"] == charge["charge_id"]
    assert final["charges"][0]["state"] == "CAPTURED"
    rec = record(stack, charge["charge_id"])
    assert rec["attempt_id"].startswith("ch_") and rec["intent_id"].startswith("pi_")
    assert money_of(stack, rec["attempt_id"]) == ["capture"]


def test_decline_then_pay_again(stack: Stack, reconciled: list[str]) -> None:
    event_id = stack.new_event(1)
    reconciled.append(event_id)
    bob = stack.buyer(event_id, "bob")
    h = claim(stack, bob)
    stack.sim_config(decline_rate=1.0)
    first = pay(stack, bob, h["hold_id"])["charge_id"]
    eventually(lambda: hold_state(stack, bob, h["hold_id"])["charges"][0]["state"] == "DECLINED")
    stack.sim_config(decline_rate=0.0)
    second = pay(stack, bob, h["hold_id"])["charge_id"]
    final = eventually(state_is(stack, bob, h["hold_id"], "CONFIRMED"))
    assert final["winner"] == second != first


def test_a_late_capture_after_the_hold_died_is_refunded(
    stack: Stack, reconciled: list[str]
) -> None:
    event_id = stack.new_event(1, hold_ttl_ms=1000, quarantine_ms=1000, policy="release_refund")
    reconciled.append(event_id)
    carol, dave = stack.buyer(event_id, "carol"), stack.buyer(event_id, "dave")
    h = claim(stack, carol)
    stack.sim_config(late_rate=1.0, late_delay_ms=4000, refund_updated_rate=1.0)
    charge = pay(stack, carol, h["hold_id"])
    assert charge["provider_status"] == "timeout"  # Stripe's 5xx after the library's retries
    eventually(state_is(stack, carol, h["hold_id"], "EXPIRED"))
    stack.sim_config(late_rate=0.0)
    assert claim(stack, dave)["seat_id"] == h["seat_id"]  # back on sale, sold again
    eventually(lambda: hold_state(stack, carol, h["hold_id"])["charges"][0]["state"] == "REFUNDED")
    attempt = record(stack, charge["charge_id"])["attempt_id"]
    eventually(lambda: money_of(stack, attempt) == ["capture", "refund"])


def test_two_tabs_one_wins_the_other_is_refunded(stack: Stack, reconciled: list[str]) -> None:
    event_id = stack.new_event(2)
    reconciled.append(event_id)
    tab1, tab2 = stack.buyer(event_id, "erin"), stack.buyer(event_id, "erin")
    h = claim(stack, tab1)
    stack.sim_config(late_rate=1.0, late_delay_ms=2500)
    c1 = pay(stack, tab1, h["hold_id"])
    assert stack.send(tab1.abandon(h["hold_id"], c1["charge_id"])).body["abandoned"] is True
    stack.sim_config(late_rate=0.0)
    c2 = pay(stack, tab2, h["hold_id"])
    final = eventually(state_is(stack, tab2, h["hold_id"], "CONFIRMED"))
    assert final["winner"] == c2["charge_id"]
    want = {c1["charge_id"]: "REFUNDED", c2["charge_id"]: "CAPTURED"}
    charges = lambda: hold_state(stack, tab1, h["hold_id"])["charges"]  # noqa: E731
    eventually(lambda: {c["charge_id"]: c["state"] for c in charges()} == want)


def test_a_refund_and_a_dispute_made_at_stripe_are_followed(
    stack: Stack, reconciled: list[str]
) -> None:
    event_id = stack.new_event(2)
    reconciled.append(event_id)
    paid = []
    for name in ("fay", "gus"):
        buyer = stack.buyer(event_id, name)
        h = claim(stack, buyer)
        charge_id = pay(stack, buyer, h["hold_id"])["charge_id"]
        eventually(state_is(stack, buyer, h["hold_id"], "CONFIRMED"))
        paid.append((buyer, h, record(stack, charge_id)["attempt_id"]))
    (fay, fay_hold, fay_attempt), (gus, gus_hold, gus_attempt) = paid
    sim_post(stack, f"/v1/test/attempts/{fay_attempt}/refund")  # charge.refunded
    gone = eventually(state_is(stack, fay, fay_hold["hold_id"], "EXCEPTION"))
    assert gone["charges"][0]["state"] == "PROVIDER_REFUNDED"
    sim_post(stack, f"/v1/test/attempts/{gus_attempt}/dispute", status="open")
    eventually(state_is(stack, gus, gus_hold["hold_id"], "EXCEPTION"))
    sim_post(stack, f"/v1/test/attempts/{gus_attempt}/dispute", status="won")
    back = eventually(state_is(stack, gus, gus_hold["hold_id"], "CONFIRMED"))
    assert back["charges"][0]["state"] == "CAPTURED"
    held = {s["hold_id"] for s in exceptions(stack, event_id)["seats_without_money"]}
    assert held == {fay_hold["hold_id"]}


def test_duplicates_process_once_and_forged_or_stale_signatures_change_nothing(
    stack: Stack, reconciled: list[str]
) -> None:
    event_id = stack.new_event(2)
    reconciled.append(event_id)
    frank = stack.buyer(event_id, "frank")
    h = claim(stack, frank)
    stack.sim_config(duplicate_rate=1.0)
    charge_id = pay(stack, frank, h["hold_id"])["charge_id"]
    eventually(state_is(stack, frank, h["hold_id"], "CONFIRMED"))
    event = succeeded_event(stack, charge_id, f"evt_replay_{uuid.uuid4().hex[:8]}")
    first, again = stripe_post(stack, event), stripe_post(stack, event)
    assert (first.status_code, again.status_code) == (200, 200)
    assert again.json()["duplicate"] is True and again.json()["decision"] == "CONFIRMED"
    forged = stripe_post(stack, event, secret="whsec_someone_else_entirely_x")
    stale = stripe_post(stack, event, at=int(time.time()) - 3600)
    assert [r.status_code for r in (forged, stale)] == [401, 401]
    assert forged.json()["error"]["code"] == "bad_signature"
    unsigned = httpx.post(f"{stack.api}/v1/provider/callbacks", json=event, timeout=5)
    assert unsigned.status_code == 401
    assert [c["state"] for c in hold_state(stack, frank, h["hold_id"])["charges"]] == ["CAPTURED"]


def test_a_lost_webhook_is_found_by_reconciliation(stack: Stack, reconciled: list[str]) -> None:
    event_id = stack.new_event(1)
    reconciled.append(event_id)
    jo = stack.buyer(event_id, "jo")
    h = claim(stack, jo)
    stack.sim_config(loss_rate=1.0)  # Stripe captures but its webhook never arrives
    charge_id = pay(stack, jo, h["hold_id"])["charge_id"]
    eventually(lambda: money_of(stack, record(stack, charge_id)["attempt_id"]) == ["capture"])
    stack.sim_config(loss_rate=0.0)
    final = eventually(state_is(stack, jo, h["hold_id"], "CONFIRMED"))
    assert final["charges"][0]["state"] == "CAPTURED"


def test_nightly_finds_what_stripe_did_without_telling_us(stack: Stack, ledger_dsn: str) -> None:
    """Every webhook lost: a dashboard refund of a sale. The nightly run reads Stripe's charges
    and disputes through the interface, repairs it (a visible exception) and is then clean."""
    import asyncio

    event_id = stack.new_event(2)
    buyer = stack.buyer(event_id, "mo")
    h = claim(stack, buyer)
    charge_id = pay(stack, buyer, h["hold_id"])["charge_id"]
    eventually(state_is(stack, buyer, h["hold_id"], "CONFIRMED"))
    stack.sim_config(loss_rate=1.0)
    sim_post(stack, f"/v1/test/attempts/{record(stack, charge_id)['attempt_id']}/refund")
    first = asyncio.run(_nightly(stack, ledger_dsn, event_id))
    assert {(d.cls, d.entity): d.repaired for d in first.discrepancies} == {
        ("seat_sold_without_money", h["hold_id"]): True
    }, first
    second = asyncio.run(_nightly(stack, ledger_dsn, event_id))
    assert second.discrepancies == [] and second.provider_net == second.expected_net == 0
    assert second.open_exceptions["seats_without_money"] == 1
