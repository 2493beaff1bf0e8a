"""The purchase flow end to end over HTTP (API, provider, worker as separate processes), every
scenario against both providers (ADR 0023): the simulator's own protocol, and Stripe's API
spoken by the simulator to the Stripe adapter (the official library), with Stripe-signed
events. Callbacks come duplicated, reordered, late or not at all; a scenario whose payments
settle ends with a clean nightly reconciliation of its event through the same provider.
Requests that move no money are in test_e2e_requests.py."""

import asyncio
import time
import uuid
from collections.abc import Iterator

import httpx
import orjson
import pytest
import redis.asyncio as redis_asyncio

from api.qr import qr_data_url
from engine.model import keys
from engine.model.orders import order_number
from engine.store import Store
from loadtest.devstack.buyer import BuyerApi
from tests.conftest import REDIS_URL
from tests.integration.conftest import Stack, claim, eventually, hold_state, pay, running_stack
from tests.integration.test_money_integrity import (
    exceptions,
    ledger_dsn,
    reconciled,
    sim_post,
    state_is,
)
from tests.provider_wire import PROVIDERS, Payment, outcome_message

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]
__all__ = ["claim", "eventually", "hold_state", "ledger_dsn", "pay", "reconciled"]


@pytest.fixture(scope="module", params=PROVIDERS, ids=PROVIDERS)
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """One stack per provider; every scenario of this module runs on each."""
    with running_stack(tmp_path_factory.mktemp(f"stack-{request.param}"), request.param) as s:
        yield s


@pytest.fixture(autouse=True)
def honest_provider(stack: Stack) -> None:
    """Every payment captured within 150 ms (the scenarios settle quickly), half of the
    callbacks duplicated; each scenario sets what it needs besides."""
    stack.sim_config(
        decline_rate=0.0, fail_rate=0.0, late_rate=0.0, duplicate_rate=0.5, loss_rate=0.0,
        contradict_rate=0.0, refund_updated_rate=0.5, delay_min_ms=20, delay_max_ms=150,
    )  # fmt: skip


def moves(stack: Stack, charge_id: str) -> list[tuple[str, int]]:
    """The money the provider moved under our charge's key, in order."""
    entries = stack.ledger()["entries"]
    return [(e["kind"], e["amount"]) for e in entries if e["idempotency_key"] == charge_id]


def charge_states(stack: Stack, buyer: BuyerApi, hold_id: str) -> dict[str, str]:
    return {c["charge_id"]: c["state"] for c in hold_state(stack, buyer, hold_id)["charges"]}


def test_happy_path(stack: Stack, reconciled: list[str]) -> None:
    event_id = stack.new_event(3)
    reconciled.append(event_id)
    alice = stack.buyer(event_id, "alice")
    h = claim(stack, alice)
    assert h["seat_id"] == "s0" and h["state"] == "RESERVED"
    charge = pay(stack, alice, h["hold_id"])
    assert (charge["state"], charge["amount"], charge["provider_status"]) == (
        "CHARGING", 4500, "processing",
    )  # fmt: skip
    final = eventually(state_is(stack, alice, h["hold_id"], "CONFIRMED"))
    assert final["winner"] == charge["charge_id"]
    number = order_number(event_id, h["hold_id"])
    assert final["order"] == {
        "order_number": number, "qr": qr_data_url(number),
        "seat_ids": ["s0"], "seat_prices": {"s0": 4500}, "amount": 4500, "refunded": 0,
        "currency": "EUR",
        "charge_id": charge["charge_id"],
    }  # fmt: skip
    avail = stack.send(alice.availability()).body
    assert (avail["sold"], avail["free"]) == (1, 2)
    assert moves(stack, charge["charge_id"]) == [("capture", 4500)]
    if stack.provider == "stripe":  # the buyer's page confirms the intent with Stripe.js
        intent = stack.record(charge["charge_id"])["intent_id"]
        assert intent.startswith("pi_") and charge["client_secret"].startswith(f"{intent}_secret_")
    else:
        assert charge["client_secret"] is None


def test_decline_then_pay_again(stack: Stack, reconciled: list[str]) -> None:
    event_id = stack.new_event(2)
    reconciled.append(event_id)
    bob = stack.buyer(event_id, "bob")
    h = claim(stack, bob)
    stack.sim_config(decline_rate=1.0)
    first = pay(stack, bob, h["hold_id"])
    eventually(lambda: hold_state(stack, bob, h["hold_id"])["charges"][0]["state"] == "DECLINED")
    assert hold_state(stack, bob, h["hold_id"])["state"] == "RESERVED"
    stack.sim_config(decline_rate=0.0)
    second = pay(stack, bob, h["hold_id"])
    assert second["charge_id"] != first["charge_id"]
    final = eventually(state_is(stack, bob, h["hold_id"], "CONFIRMED"))
    assert final["winner"] == second["charge_id"]


def test_late_success_after_the_hold_died_is_refunded(stack: Stack, reconciled: list[str]) -> None:
    event_id = stack.new_event(1, hold_ttl_ms=1000, quarantine_ms=1000, policy="release_refund")
    reconciled.append(event_id)
    carol, dave = stack.buyer(event_id, "carol"), stack.buyer(event_id, "dave")
    h = claim(stack, carol)
    # Stripe: the refund is announced twice, by charge.refunded and charge.refund.updated.
    stack.sim_config(late_rate=1.0, late_delay_ms=2500, refund_updated_rate=1.0)
    charge = pay(stack, carol, h["hold_id"])
    assert charge["provider_status"] == "timeout"  # told "timed out" (Stripe: after retries)
    eventually(state_is(stack, carol, h["hold_id"], "EXPIRED"))
    stack.sim_config(late_rate=0.0)
    resold = claim(stack, dave)  # the seat went back on sale and is sold again
    assert resold["seat_id"] == h["seat_id"]
    eventually(lambda: hold_state(stack, carol, h["hold_id"])["charges"][0]["state"] == "REFUNDED")
    assert moves(stack, charge["charge_id"]) == [("capture", 4500), ("refund", 4500)]


def test_the_api_that_decides_a_refund_asks_for_it_without_the_worker(
    stack: Stack, reconciled: list[str]
) -> None:
    """A late capture's refund is asked of the provider by the API process that decided it, as
    soon as it has answered the callback (ADR 0045); the worker's refund queue is the backstop.
    With the worker down the whole time, the money still goes back."""
    event_id = stack.new_event(1, hold_ttl_ms=1000, quarantine_ms=1000, policy="release_refund")
    reconciled.append(event_id)
    erin = stack.buyer(event_id, "erin")
    h = claim(stack, erin)
    stack.local.kill("worker")
    try:
        stack.sim_config(late_rate=1.0, late_delay_ms=2500, refund_updated_rate=1.0)
        charge = pay(stack, erin, h["hold_id"])
        assert charge["provider_status"] == "timeout"
        states = lambda: charge_states(stack, erin, h["hold_id"])  # noqa: E731
        eventually(lambda: states()[charge["charge_id"]] == "REFUNDED")
        assert states() == {charge["charge_id"]: "REFUNDED"}
        assert moves(stack, charge["charge_id"]) == [("capture", 4500), ("refund", 4500)]
    finally:
        stack.sim_config(late_rate=0.0)
        stack.local.restart("worker")


def test_a_party_of_four_pays_once(stack: Stack, reconciled: list[str]) -> None:
    event_id = stack.new_event(6)
    reconciled.append(event_id)
    fam = stack.buyer(event_id, "family")
    h = claim(stack, fam, party=4)
    assert h["seat_ids"] == ["s0", "s1", "s2", "s3"] and h["seat_id"] == "s0"
    charge = pay(stack, fam, h["hold_id"])
    assert charge["amount"] == 4 * 4500
    final = eventually(state_is(stack, fam, h["hold_id"], "CONFIRMED"))
    assert final["seat_ids"] == h["seat_ids"] and final["winner"] == charge["charge_id"]
    number = order_number(event_id, h["hold_id"])
    assert final["order"] == {
        "order_number": number, "qr": qr_data_url(number),
        "seat_ids": h["seat_ids"], "seat_prices": dict.fromkeys(h["seat_ids"], 4500),
        "amount": 4 * 4500, "refunded": 0, "currency": "EUR", "charge_id": charge["charge_id"],
    }  # fmt: skip
    assert stack.send(fam.availability()).body["sold"] == 4
    assert moves(stack, charge["charge_id"]) == [("capture", 4 * 4500)]


def test_a_late_capture_on_an_expired_party_is_refunded_in_full(
    stack: Stack, reconciled: list[str]
) -> None:
    event_id = stack.new_event(4, hold_ttl_ms=1000, quarantine_ms=1000, policy="release_refund")
    reconciled.append(event_id)
    fam, other = stack.buyer(event_id, "late-family"), stack.buyer(event_id, "next-family")
    h = claim(stack, fam, party=3)
    stack.sim_config(late_rate=1.0, late_delay_ms=2500)
    charge = pay(stack, fam, h["hold_id"])
    eventually(state_is(stack, fam, h["hold_id"], "EXPIRED"))
    stack.sim_config(late_rate=0.0)
    resold = claim(stack, other, party=3)  # the whole party went back on sale
    assert sorted(resold["seat_ids"]) == sorted(h["seat_ids"])
    eventually(lambda: hold_state(stack, fam, h["hold_id"])["charges"][0]["state"] == "REFUNDED")
    assert moves(stack, charge["charge_id"]) == [("capture", 3 * 4500), ("refund", 3 * 4500)]
    assert hold_state(stack, fam, h["hold_id"])["order"] is None  # nothing was bought


def test_two_tabs_one_wins_the_other_is_refunded(stack: Stack, reconciled: list[str]) -> None:
    event_id = stack.new_event(2)
    reconciled.append(event_id)
    tab1 = stack.buyer(event_id, "erin")
    tab2 = stack.buyer(event_id, "erin")  # same login, second tab: one identity
    h = claim(stack, tab1)
    stack.sim_config(late_rate=1.0, late_delay_ms=2500)  # lands after the second tab paid
    c1 = pay(stack, tab1, h["hold_id"])
    r = stack.send(tab2.pay(h["hold_id"]))
    assert (r.status, r.code) == (409, "charge_in_flight")
    r = stack.send(tab1.abandon(h["hold_id"], c1["charge_id"]))
    assert r.body["abandoned"] is True
    stack.sim_config(late_rate=0.0)
    c2 = pay(stack, tab2, h["hold_id"])
    final = eventually(state_is(stack, tab2, h["hold_id"], "CONFIRMED"))
    assert final["winner"] == c2["charge_id"]
    want = {c1["charge_id"]: "REFUNDED", c2["charge_id"]: "CAPTURED"}
    eventually(lambda: charge_states(stack, tab1, h["hold_id"]) == want)


def test_duplicate_and_reordered_callbacks_process_once(
    stack: Stack, reconciled: list[str]
) -> None:
    event_id = stack.new_event(2)
    reconciled.append(event_id)
    frank = stack.buyer(event_id, "frank")
    h = claim(stack, frank)
    stack.sim_config(duplicate_rate=1.0)  # every callback delivered two or three times
    charge = pay(stack, frank, h["hold_id"])
    eventually(state_is(stack, frank, h["hold_id"], "CONFIRMED"))
    # Replays of our own: the same provider event twice, a new event id for the same attempt.
    paid = Payment.of_record(stack.record(charge["charge_id"]))
    replay = outcome_message(stack.provider, paid, "CAPTURED", f"evt_replay_{uuid.uuid4().hex}")
    first, again = stack.post_callback(replay), stack.post_callback(replay)
    assert first.status_code == again.status_code == 200
    assert again.json()["duplicate"] is True
    assert again.json()["decision"] == first.json()["decision"] == "CONFIRMED"
    assert list(charge_states(stack, frank, h["hold_id"]).values()) == ["CAPTURED"]
    assert moves(stack, charge["charge_id"]) == [("capture", 4500)]


def held_back(stack: Stack, buyer: BuyerApi, hold_id: str) -> Payment:
    """Pay, the provider deciding nothing while the test runs: the charge stays CHARGING."""
    stack.sim_config(delay_min_ms=600_000, delay_max_ms=600_000)
    charge_id = pay(stack, buyer, hold_id)["charge_id"]
    return Payment.of_record(stack.record(charge_id))


def test_forged_and_stale_callbacks_change_nothing(stack: Stack) -> None:
    event_id = stack.new_event(1)
    gina = stack.buyer(event_id, "gina")
    h = claim(stack, gina)
    capture = outcome_message(stack.provider, held_back(stack, gina, h["hold_id"]), "CAPTURED",
                              f"evt_forged_{uuid.uuid4().hex}")  # fmt: skip
    forged = stack.post_callback(capture, secret="whsec_not_the_endpoints_secret_at_all")
    assert (forged.status_code, forged.json()["error"]["code"]) == (401, "bad_signature")
    stale = stack.post_callback(capture, at=int(time.time()) - 3600)
    assert stale.status_code == 401
    other = next(p for p in PROVIDERS if p != stack.provider)  # the right secret, another scheme
    assert stack.post_callback(capture, provider=other).status_code == 401
    unsigned = httpx.post(f"{stack.api}/v1/provider/callbacks", json=capture, timeout=5)
    assert unsigned.status_code == 401
    state = hold_state(stack, gina, h["hold_id"])
    assert state["state"] == "RESERVED" and state["charges"][0]["state"] == "CHARGING"


def test_verified_callbacks_are_kept_raw_and_forged_ones_are_not(stack: Stack) -> None:
    event_id = stack.new_event(1)
    lee = stack.buyer(event_id, "lee")
    h = claim(stack, lee)
    paid = held_back(stack, lee, h["hold_id"])  # no real capture will interfere
    good = outcome_message(stack.provider, paid, "CAPTURED", "evt-raw-good")
    bad = outcome_message(stack.provider, paid, "CAPTURED", "evt-raw-forged")
    assert stack.post_callback(good).json()["decision"] == "CONFIRMED"
    assert (
        stack.post_callback(bad, secret="whsec_wrong_secret_for_this_endpoint").status_code == 401
    )

    async def kept() -> list[dict[str, str]]:
        client = redis_asyncio.from_url(REDIS_URL, decode_responses=True)
        try:
            return await Store(client, prefix=stack.prefix).read.raw_callbacks(event_id)
        finally:
            await client.aclose()

    raw = asyncio.run(kept())
    assert [r["provider_event_id"] for r in raw] == ["evt-raw-good"]
    assert orjson.loads(raw[0]["body"]) == good  # the exact bytes we verified


def test_lost_callback_is_found_by_reconciliation(stack: Stack, reconciled: list[str]) -> None:
    """Stripe: the intent is found by its metadata (Stripe's search)."""
    event_id = stack.new_event(1)
    reconciled.append(event_id)
    jo = stack.buyer(event_id, "jo")
    h = claim(stack, jo)
    stack.sim_config(loss_rate=1.0)  # the provider captures but never calls back
    charge = pay(stack, jo, h["hold_id"])
    eventually(lambda: moves(stack, charge["charge_id"]) == [("capture", 4500)])
    stack.sim_config(loss_rate=0.0)  # the capture above was emitted (and lost) already
    final = eventually(state_is(stack, jo, h["hold_id"], "CONFIRMED"))
    assert final["charges"][0]["state"] == "CAPTURED"


def test_charge_the_provider_never_saw_is_closed_as_failed(
    stack: Stack, reconciled: list[str]
) -> None:
    """A crash between registering the charge and calling the provider: reconciliation asks,
    the provider has never heard of it, the charge is closed FAILED and the buyer can pay."""
    event_id = stack.new_event(1)
    reconciled.append(event_id)
    kim = stack.buyer(event_id, "kim")
    h = claim(stack, kim)

    async def register_only() -> None:
        client = redis_asyncio.from_url(REDIS_URL, decode_responses=True)
        store = Store(client, prefix=stack.prefix)
        charge_id = keys.charge_key(event_id, h["hold_id"], "kim", "crashed")  # as the API mints
        await store.start_charge(event_id, h["hold_id"], "kim", charge_id, 4500)
        await client.aclose()

    asyncio.run(register_only())
    eventually(lambda: hold_state(stack, kim, h["hold_id"])["charges"][0]["state"] == "FAILED")
    assert hold_state(stack, kim, h["hold_id"])["state"] == "RESERVED"
    pay(stack, kim, h["hold_id"])
    eventually(state_is(stack, kim, h["hold_id"], "CONFIRMED"))


def test_a_refund_and_a_dispute_made_at_the_provider_are_followed(
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
        paid.append((buyer, h, stack.record(charge_id)["attempt_id"]))
    (fay, fay_hold, fay_attempt), (gus, gus_hold, gus_attempt) = paid
    sim_post(stack, f"/v1/test/attempts/{fay_attempt}/refund")  # from the provider's dashboard
    gone = eventually(state_is(stack, fay, fay_hold["hold_id"], "EXCEPTION"))
    assert gone["charges"][0]["state"] == "PROVIDER_REFUNDED"
    sim_post(stack, f"/v1/test/attempts/{gus_attempt}/dispute", status="open")
    eventually(state_is(stack, gus, gus_hold["hold_id"], "EXCEPTION"))
    sim_post(stack, f"/v1/test/attempts/{gus_attempt}/dispute", status="won")
    back = eventually(state_is(stack, gus, gus_hold["hold_id"], "CONFIRMED"))
    assert back["charges"][0]["state"] == "CAPTURED"
    held = {s["hold_id"] for s in exceptions(stack, event_id)["seats_without_money"]}
    assert held == {fay_hold["hold_id"]}
