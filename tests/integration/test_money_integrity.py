"""Money integrity at the provider boundary, over HTTP, against the simulator told to contradict
itself (ADR 0014). Each test is one finding: a provider that captures after it declined, refunds
or disputes a winner on its own, sends foreign metadata or wrong amounts, a buyer who reuses an
Idempotency-Key across events, and a charge with two attempts. After every scenario the nightly
reconciliation runs on the event and must be clean, with the money invariant holding:
provider captured - provider returned == what our charges say the provider holds."""

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import redis.asyncio as redis_asyncio

from engine.config.settings import Settings
from engine.providers import build_provider
from engine.store import Store
from loadtest.devstack.buyer import BuyerApi
from persistence import database
from persistence.database import create_pool
from persistence.migrate import migrate
from persistence.nightly import provider_entries, reconcile_event
from persistence.nightly_report import EventReport
from persistence.rebuild import rebuild
from persistence.writer import LedgerWriter
from tests.conftest import REDIS_URL
from tests.integration.conftest import Stack, claim, eventually, hold_state, pay
from tests.pg import PG_DSN

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]

PRICE = 4500


@pytest.fixture(autouse=True)
def honest_provider(stack: Stack) -> None:
    stack.sim_config(
        decline_rate=0.0,
        fail_rate=0.0,
        late_rate=0.0,
        duplicate_rate=0.5,
        loss_rate=0.0,
        contradict_rate=0.0,
        refund_fail_rate=0.0,
    )


@pytest.fixture(scope="module")
def ledger_dsn() -> Iterator[str]:
    """A private, migrated ledger database for this module (the tests here are synchronous)."""
    name = f"onsale_test_{uuid.uuid4().hex[:10]}"

    async def migrated() -> str:
        dsn = await database.create_database(PG_DSN, name)
        conn = await asyncpg.connect(dsn, timeout=5)
        try:
            await migrate(conn)
        finally:
            await conn.close()
        return dsn

    dsn = asyncio.run(migrated())
    try:
        yield dsn
    finally:
        asyncio.run(database.drop_database(PG_DSN, name))


@pytest.fixture
def reconciled(stack: Stack, ledger_dsn: str) -> Iterator[list[str]]:
    """Events a test touched; after it, the nightly run on each must be clean and exact."""
    events: list[str] = []
    yield events
    for event_id in events:
        asyncio.run(_assert_nightly_clean(stack, ledger_dsn, event_id))


async def _assert_nightly_clean(stack: Stack, dsn: str, event_id: str) -> None:
    report = await _nightly(stack, dsn, event_id)
    assert [d for d in report.discrepancies if not d.repaired] == [], report
    assert report.provider_net == report.expected_net, report
    client = redis_asyncio.from_url(REDIS_URL, decode_responses=True)
    try:
        audit = await Store(client, prefix=stack.prefix).read.audit(event_id)
        assert audit.ok, audit.violations
    finally:
        await client.aclose()


def sim_post(stack: Stack, path: str, **body: Any) -> httpx.Response:
    r = httpx.post(f"{stack.sim}{path}", json=body, timeout=5)
    assert r.status_code < 300, r.text
    return r


def attempt_of(stack: Stack, charge_id: str) -> str:
    """The provider's attempt for our charge (the latest under its key), on either wire."""
    return str(stack.record(charge_id)["attempt_id"])


def money_of(stack: Stack, attempt_id: str) -> list[str]:
    """The money movements of one attempt at the provider, in order."""
    return [e["kind"] for e in stack.ledger()["entries"] if e["attempt_id"] == attempt_id]


def exceptions(stack: Stack, event_id: str) -> dict[str, Any]:
    with stack.client() as c:
        r = c.get(f"/v1/admin/events/{event_id}/exceptions", headers=stack.admin_headers())
        assert r.status_code == 200, r.text
        data: dict[str, Any] = r.json()
        return data


def state_is(stack: Stack, buyer: BuyerApi, hold_id: str, want: str) -> Callable[[], Any]:
    return lambda: (s := hold_state(stack, buyer, hold_id))["state"] == want and s


def bought(stack: Stack, event_id: str, name: str) -> tuple[BuyerApi, dict[str, Any], str]:
    """A buyer who claimed and paid: (buyer, hold, charge id), the hold CONFIRMED."""
    buyer = stack.buyer(event_id, name)
    h = claim(stack, buyer)
    charge = pay(stack, buyer, h["hold_id"])
    eventually(state_is(stack, buyer, h["hold_id"], "CONFIRMED"))
    return buyer, h, charge["charge_id"]


def test_a_capture_after_the_providers_decline_is_refunded(
    stack: Stack, reconciled: list[str]
) -> None:
    event_id = stack.new_event(2)
    reconciled.append(event_id)
    buyer = stack.buyer(event_id, "dora")
    h = claim(stack, buyer)
    stack.sim_config(decline_rate=1.0)
    first = pay(stack, buyer, h["hold_id"])["charge_id"]
    eventually(lambda: hold_state(stack, buyer, h["hold_id"])["charges"][0]["state"] == "DECLINED")
    stack.sim_config(decline_rate=0.0)
    attempt = attempt_of(stack, first)
    sim_post(stack, f"/v1/test/attempts/{attempt}/capture")  # the provider changes its mind
    second = pay(stack, buyer, h["hold_id"])["charge_id"]
    final = eventually(state_is(stack, buyer, h["hold_id"], "CONFIRMED"))
    assert final["winner"] == second
    # The contradicting capture is money to give back: refunded, exactly once.
    eventually(lambda: money_of(stack, attempt) == ["capture", "refund"])
    charges = {
        c["charge_id"]: c["state"] for c in hold_state(stack, buyer, h["hold_id"])["charges"]
    }
    assert charges == {first: "REFUNDED", second: "CAPTURED"}
    seen = exceptions(stack, event_id)
    assert [c["charge_id"] for c in seen["captured_without_seat"]] == [first]
    assert any(a["reason"] == "capture_after_declined" for a in seen["alerts"])
    # The capture-to-refund bound the dashboard shows: one refund, timed, none still waiting.
    times = seen["refund_times"]
    assert (times["refunded"], times["waiting"], times["oldest_waiting_ms"]) == (1, 0, None)
    assert 0 <= times["p50_ms"] == times["max_ms"] == times["bound_ms"] < 30_000


@pytest.mark.parametrize("policy", ["manual", "revoke"])
def test_a_refund_made_at_the_provider_leaves_a_visible_exception(
    stack: Stack, reconciled: list[str], policy: str
) -> None:
    event_id = stack.new_event(2, reversal_policy=policy)
    reconciled.append(event_id)
    buyer, h, charge_id = bought(stack, event_id, "ella")
    attempt = attempt_of(stack, charge_id)
    sim_post(stack, f"/v1/test/attempts/{attempt}/refund")  # from the provider's dashboard
    want = "EXCEPTION" if policy == "manual" else "REVOKED"
    final = eventually(state_is(stack, buyer, h["hold_id"], want))
    assert final["charges"][0]["state"] == "PROVIDER_REFUNDED"
    seen = exceptions(stack, event_id)
    avail = stack.send(buyer.availability()).body
    if policy == "manual":
        assert [s["hold_id"] for s in seen["seats_without_money"]] == [h["hold_id"]]
        assert avail["sold"] == 1  # still assigned, for an operator to decide
        with stack.client() as c:
            path = f"/v1/admin/events/{event_id}/holds/{h['hold_id']}/revoke"
            r = c.post(path, headers=stack.admin_headers())
            assert (r.status_code, r.json()["state"]) == (200, "REVOKED"), r.text
            again = c.post(path, headers=stack.admin_headers())
            assert (again.status_code, again.json()["error"]["code"]) == (409, "not_an_exception")
        avail = stack.send(buyer.availability()).body
    assert (avail["sold"], avail["free"]) == (0, 2)  # the seat is on sale again
    assert money_of(stack, attempt) == ["capture", "refund"]  # we never refunded it twice


def test_a_dispute_opens_an_exception_and_its_outcome_settles_it(
    stack: Stack, reconciled: list[str]
) -> None:
    event_id = stack.new_event(3, reversal_policy="revoke")
    reconciled.append(event_id)
    buyer, won, won_charge = bought(stack, event_id, "fay")
    buyer2, lost, lost_charge = bought(stack, event_id, "gus")
    for charge_id in (won_charge, lost_charge):
        sim_post(stack, f"/v1/test/attempts/{attempt_of(stack, charge_id)}/dispute", status="open")
    eventually(state_is(stack, buyer, won["hold_id"], "EXCEPTION"))
    eventually(state_is(stack, buyer2, lost["hold_id"], "EXCEPTION"))
    assert len(exceptions(stack, event_id)["disputes"]) == 2
    sim_post(stack, f"/v1/test/attempts/{attempt_of(stack, won_charge)}/dispute", status="won")
    sim_post(stack, f"/v1/test/attempts/{attempt_of(stack, lost_charge)}/dispute", status="lost")
    back = eventually(state_is(stack, buyer, won["hold_id"], "CONFIRMED"))
    assert back["charges"][0]["state"] == "CAPTURED"
    gone = eventually(state_is(stack, buyer2, lost["hold_id"], "REVOKED"))
    assert gone["charges"][0]["state"] == "CHARGED_BACK"


def test_a_capture_naming_another_event_never_refunds_the_winner(
    stack: Stack, reconciled: list[str]
) -> None:
    event_id, other = stack.new_event(2), stack.new_event(2)
    reconciled += [event_id, other]
    buyer, h, charge_id = bought(stack, event_id, "hugo")
    attempt = attempt_of(stack, charge_id)
    sim_post(
        stack,
        f"/v1/test/attempts/{attempt}/callback",
        type="charge.captured",
        metadata={"event_id": other},
    )
    eventually(lambda: exceptions(stack, event_id)["alerts"])
    alert = exceptions(stack, event_id)["alerts"][0]
    assert alert["reason"] == "mismatch:event" and alert["charge_id"] == charge_id
    assert exceptions(stack, other)["captured_without_seat"] == []
    assert hold_state(stack, buyer, h["hold_id"])["state"] == "CONFIRMED"
    assert money_of(stack, attempt) == ["capture"]  # nobody asked to refund the winner


def test_a_client_key_reused_across_events_buys_nothing_twice(
    stack: Stack, reconciled: list[str]
) -> None:
    a, b, c = stack.new_event(1), stack.new_event(1), stack.new_event(1)
    reconciled += [a, b, c]
    token = stack.token("ivy")  # one login, three events
    paid: dict[str, str] = {}
    for event_id in (a, b, c):
        buyer = BuyerApi(event_id, token)
        h = claim(stack, buyer)
        if event_id == c:  # its capture lands after the release, however slow the machine
            stack.sim_config(late_rate=1.0, late_delay_ms=2500)
        r = stack.send(buyer.pay(h["hold_id"], key="K-123"))
        assert r.status == 202, r
        paid[event_id] = r.body["charge_id"]
        if event_id == c:
            assert stack.send(buyer.release(h["hold_id"])).status == 200
            stack.sim_config(late_rate=0.0)
        else:
            eventually(state_is(stack, buyer, h["hold_id"], "CONFIRMED"))
    # Three server-minted keys: three provider attempts, three captures, one refund (C's).
    assert len(set(paid.values())) == 3 and "K-123" not in paid.values()
    attempts = {e: attempt_of(stack, k) for e, k in paid.items()}
    assert len(set(attempts.values())) == 3
    eventually(lambda: money_of(stack, attempts[c]) == ["capture", "refund"])
    assert money_of(stack, attempts[a]) == ["capture"]
    assert money_of(stack, attempts[b]) == ["capture"]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"amount": -5}, "amount"),
        ({"amount": "4500"}, "amount"),
        ({"amount": None}, "amount"),
        ({"status": "declined"}, "status"),
        ({"status": "processing"}, "status"),
    ],
)
def test_an_incoherent_capture_message_confirms_nothing_and_moves_no_money(
    stack: Stack, reconciled: list[str], data: dict[str, Any], problem: str
) -> None:
    event_id = stack.new_event(1)
    reconciled.append(event_id)
    buyer = stack.buyer(event_id, f"jan-{uuid.uuid4().hex[:6]}")
    h = claim(stack, buyer)
    stack.sim_config(late_rate=1.0, late_delay_ms=600_000)  # the real outcome will not come
    charge_id = pay(stack, buyer, h["hold_id"])["charge_id"]
    stack.sim_config(late_rate=0.0)
    attempt = attempt_of(stack, charge_id)
    claimed = {"status": "captured", **data}  # a capture message, wrong in one field
    sim_post(stack, f"/v1/test/attempts/{attempt}/callback", type="charge.captured", data=claimed)
    eventually(lambda: exceptions(stack, event_id)["alerts"])
    assert problem in exceptions(stack, event_id)["alerts"][0]["reason"]
    state = hold_state(stack, buyer, h["hold_id"])
    assert (state["state"], state["charges"][0]["state"]) == ("RESERVED", "CHARGING")
    # Nothing moved at the provider either: let it fail so the event ends clean.
    stack.send(buyer.release(h["hold_id"]))


def test_a_zero_capture_closes_the_attempt_and_reconciliation_lists_it(
    stack: Stack, ledger_dsn: str
) -> None:
    """A signed capture of 0 for a charge of 1000: the attempt can never win, so it is closed
    (refund requested, the hold free to pay again, never left in flight until its deadline), and
    the nightly run lists it beside the money (an alert, a refund pending)."""
    event_id = stack.new_event(1)
    buyer = stack.buyer(event_id, f"zed-{uuid.uuid4().hex[:6]}")
    h = claim(stack, buyer)
    stack.sim_config(late_rate=1.0, late_delay_ms=600_000)  # the real outcome will not come
    first = pay(stack, buyer, h["hold_id"])["charge_id"]
    stack.sim_config(late_rate=0.0)
    attempt = attempt_of(stack, first)
    claimed = {"status": "captured", "amount": 0}
    sim_post(stack, f"/v1/test/attempts/{attempt}/callback", type="charge.captured", data=claimed)
    state = eventually(
        lambda: (
            (s := hold_state(stack, buyer, h["hold_id"]))["charges"][0]["state"] != "CHARGING" and s
        )
    )
    assert state["state"] == "RESERVED" and state["charges"][0]["state"] in (
        "REFUNDING",
        "REFUNDED",
    )
    [alert] = exceptions(stack, event_id)["alerts"]
    assert alert["reason"] == "mismatch:amount"
    report = asyncio.run(_nightly(stack, ledger_dsn, event_id))
    assert report.open_exceptions["alerts"] == 1
    second = pay(stack, buyer, h["hold_id"])["charge_id"]
    assert eventually(state_is(stack, buyer, h["hold_id"], "CONFIRMED"))["winner"] == second


@pytest.mark.parametrize("captured", [{"amount": 1}, {"amount": 9999}, {"currency": "USD"}])
def test_a_capture_of_other_money_is_refunded_and_the_buyer_pays_again(
    stack: Stack, reconciled: list[str], captured: dict[str, Any]
) -> None:
    event_id = stack.new_event(1)
    reconciled.append(event_id)
    buyer = stack.buyer(event_id, f"kai-{uuid.uuid4().hex[:6]}")
    h = claim(stack, buyer)
    stack.sim_config(late_rate=1.0, late_delay_ms=600_000)
    first = pay(stack, buyer, h["hold_id"])["charge_id"]
    stack.sim_config(late_rate=0.0)
    attempt = attempt_of(stack, first)
    sim_post(stack, f"/v1/test/attempts/{attempt}/capture", **captured)
    eventually(lambda: money_of(stack, attempt) == ["capture", "refund"])
    assert hold_state(stack, buyer, h["hold_id"])["state"] == "RESERVED"
    second = pay(stack, buyer, h["hold_id"])["charge_id"]
    final = eventually(state_is(stack, buyer, h["hold_id"], "CONFIRMED"))
    assert final["winner"] == second


def test_a_second_attempt_after_a_decline_confirms_and_reconciles_clean(
    stack: Stack, reconciled: list[str]
) -> None:
    event_id = stack.new_event(1)
    reconciled.append(event_id)
    buyer = stack.buyer(event_id, "lia")
    h = claim(stack, buyer)
    stack.sim_config(decline_rate=1.0)
    charge_id = pay(stack, buyer, h["hold_id"])["charge_id"]
    eventually(lambda: hold_state(stack, buyer, h["hold_id"])["charges"][0]["state"] == "DECLINED")
    stack.sim_config(decline_rate=0.0)
    # A new authorization attempt on the same intent and key (the buyer retried the card).
    retry = sim_post(stack, f"/v1/test/attempts/{attempt_of(stack, charge_id)}/retry").json()
    final = eventually(state_is(stack, buyer, h["hold_id"], "CONFIRMED"))
    assert final["winner"] == f"{charge_id}/{retry['attempt_id']}"
    # The fixture's nightly run asserts no discrepancy for this legitimate two-attempt charge.


def test_nightly_finds_what_the_provider_did_without_telling_us(
    stack: Stack, ledger_dsn: str, tmp_path: Path
) -> None:
    """Every webhook lost: a refund from the provider's dashboard, a dispute, a capture after its
    own decline. The nightly run finds each, repairs it through the verifying scripts (the two
    seats become visible exceptions, the contradicting capture goes back), and the next run is
    clean and exits 0."""
    event_id = stack.new_event(4)
    _, refunded, refunded_charge = bought(stack, event_id, "mo")
    _, disputed, disputed_charge = bought(stack, event_id, "ned")
    buyer = stack.buyer(event_id, "ola")
    h = claim(stack, buyer)
    stack.sim_config(decline_rate=1.0)
    declined = pay(stack, buyer, h["hold_id"])["charge_id"]
    eventually(lambda: hold_state(stack, buyer, h["hold_id"])["charges"][0]["state"] == "DECLINED")
    stack.sim_config(decline_rate=0.0, loss_rate=1.0)  # from now on no webhook arrives
    sim_post(stack, f"/v1/test/attempts/{attempt_of(stack, refunded_charge)}/refund")
    sim_post(stack, f"/v1/test/attempts/{attempt_of(stack, disputed_charge)}/dispute")
    contradicting = attempt_of(stack, declined)
    sim_post(stack, f"/v1/test/attempts/{contradicting}/capture")

    first = asyncio.run(_nightly(stack, ledger_dsn, event_id))
    by_class = {(d.cls, d.entity): d.repaired for d in first.discrepancies}
    # The worker asks again about recent declines, so it may give the contradicting capture
    # back before the nightly run does; either way it is found and repaired.
    by_class.pop(("captured_without_seat_not_refunded", declined), True)
    assert by_class == {
        ("seat_sold_without_money", refunded["hold_id"]): True,
        ("seat_sold_without_money", disputed["hold_id"]): True,
    }, first
    assert all(d.repaired for d in first.discrepancies), first
    seen = exceptions(stack, event_id)
    assert {s["hold_id"] for s in seen["seats_without_money"]} == {
        refunded["hold_id"],
        disputed["hold_id"],
    }
    stack.sim_config(loss_rate=0.0)
    eventually(lambda: money_of(stack, contradicting) == ["capture", "refund"])
    eventually(  # and the engine recorded it (else the next run records it: a repair)
        lambda: hold_state(stack, buyer, h["hold_id"])["charges"][0]["state"] == "REFUNDED"
    )

    second = asyncio.run(_nightly(stack, ledger_dsn, event_id))
    assert second.discrepancies == [], second
    assert second.provider_net == second.expected_net == 0  # both sales lost their money
    assert second.open_exceptions["seats_without_money"] == 2
    env = {
        **os.environ,
        "ONSALE_REDIS_URL": REDIS_URL,
        "ONSALE_KEY_PREFIX": stack.prefix,
        "ONSALE_PG_DSN": ledger_dsn,
        "ONSALE_PROVIDER_URL": stack.sim,
    }
    cmd = [sys.executable, "-m", "onsale.cli", "reconcile", "--event", event_id]
    cmd += ["--json", str(tmp_path / "r.json"), "--grace-ms", "0"]
    proc = subprocess.run(cmd, env=env, capture_output=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()
    assert b"clean: nothing left unrepaired" in proc.stdout


async def _nightly(stack: Stack, dsn: str, event_id: str) -> EventReport:
    """The nightly run on one event, through the provider interface of the stack's deployment
    (the simulator's protocol, or Stripe's: tests/integration/test_stripe.py)."""
    client = redis_asyncio.from_url(REDIS_URL, decode_responses=True)
    pool = await create_pool(dsn, size_max=2, timeout_s=5)
    provider = build_provider(Settings.from_env(stack.local.env()))
    try:
        store = Store(client, prefix=stack.prefix)
        writer = LedgerWriter(client, pool, prefix=stack.prefix, consumer="n", batch_max=500)
        while await writer.step(event_id):
            pass
        entries = await provider_entries(provider)
        async with pool.acquire() as conn:
            return await reconcile_event(
                store, conn, writer, entries, event_id, provider=provider, grace_ms=0
            )
    finally:
        await provider.aclose()
        await pool.close()
        await client.aclose()


def test_a_capture_under_a_forged_key_never_refunds_the_money_it_names(
    stack: Stack, reconciled: list[str]
) -> None:
    """A signed capture for the winner's attempt, but naming a key we never minted and another
    event: that event records an orphan capture, and the refund worker, asking the provider whose
    money the attempt is, parks the refund instead of returning the winner's money."""
    event_id, other = stack.new_event(2), stack.new_event(2)
    reconciled += [event_id, other]
    buyer, h, charge_id = bought(stack, event_id, "pia")
    attempt = attempt_of(stack, charge_id)
    sim_post(
        stack,
        f"/v1/test/attempts/{attempt}/callback",
        type="charge.captured",
        data={"idempotency_key": "forged-key"},
        metadata={"event_id": other, "charge_id": "forged-key"},
    )
    parked = eventually(lambda: exceptions(stack, other)["refunds_parked"])
    assert [(c["charge_id"], c["state"]) for c in parked] == [(f"orphan/{attempt}", "REFUNDING")]
    assert any(a["reason"].startswith("refund_parked") for a in exceptions(stack, other)["alerts"])
    assert hold_state(stack, buyer, h["hold_id"])["state"] == "CONFIRMED"
    assert money_of(stack, attempt) == ["capture"]  # the winner's money never went back
    # An operator retries the parked refund: it is unparked and due now, and the refund worker,
    # asking the provider again, parks it again: a retry never returns money not this charge's.
    with stack.client() as c:
        retry = f"/v1/admin/events/{other}/refunds/retry"
        r = c.post(retry, json={"charge_id": f"orphan/{attempt}"}, headers=stack.admin_headers())
        assert r.status_code == 200, r.text
        assert (r.json()["was_parked"], r.json()["due_now"]) == (True, True)
        eventually(lambda: exceptions(stack, other)["refunds_parked"])
        r = c.post(retry, json={"charge_id": charge_id}, headers=stack.admin_headers())
        assert (r.status_code, r.json()["error"]["code"]) == (
            404,
            "charge_not_found",
        )  # not in `other`
        r = c.post(
            f"/v1/admin/events/{event_id}/refunds/retry",
            json={"charge_id": charge_id},
            headers=stack.admin_headers(),
        )
        assert (r.status_code, r.json()["error"]["code"]) == (409, "not_refunding")  # the winner's
        for bad in ({}, {"charge_id": "a/b"}, {"charge_id": charge_id, "x": 1}):
            r = c.post(retry, json=bad, headers=stack.admin_headers())
            assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request"), bad
        assert c.post(retry, json={"charge_id": charge_id}).status_code == 401
    assert money_of(stack, attempt) == ["capture"]
    assert hold_state(stack, buyer, h["hold_id"])["state"] == "CONFIRMED"


async def lose_redis_and_rebuild(
    stack: Stack,
    ledger_dsn: str,
    event_id: str,
    *,
    holds: tuple[str, ...] = (),
    charges: tuple[str, ...] = (),
) -> tuple[Any, list[Any], list[Any], Any]:
    """The event mirrored to the ledger, dropped from Redis and rebuilt from the ledger: the
    rebuild's report, then the named holds and charges as Redis has them again, and the audit."""
    client = redis_asyncio.from_url(REDIS_URL, decode_responses=True)
    pool = await create_pool(ledger_dsn, size_max=2, timeout_s=5)
    try:
        store = Store(client, prefix=stack.prefix)
        writer = LedgerWriter(client, pool, prefix=stack.prefix, consumer="r", batch_max=500)
        while await writer.step(event_id):
            pass
        await store.restore.drop_event(event_id)
        async with pool.acquire() as conn:
            report = await rebuild(store, conn, event_id)
        return (
            report,
            [await store.read.hold(event_id, h) for h in holds],
            [await store.read.charge(event_id, c) for c in charges],
            await store.read.audit(event_id),
        )
    finally:
        await pool.close()
        await client.aclose()


def test_rebuild_keeps_a_seat_whose_money_left_as_an_exception(
    stack: Stack, ledger_dsn: str
) -> None:
    event_id = stack.new_event(3)
    buyer, h, charge_id = bought(stack, event_id, "quin")
    _buyer2, kept, _kept_charge = bought(stack, event_id, "rue")
    sim_post(stack, f"/v1/test/attempts/{attempt_of(stack, charge_id)}/refund")
    eventually(state_is(stack, buyer, h["hold_id"], "EXCEPTION"))

    report, [hold], [charge], audit = asyncio.run(
        lose_redis_and_rebuild(stack, ledger_dsn, event_id, holds=(h["hold_id"],),
                               charges=(charge_id,))
    )  # fmt: skip
    assert report.sold == 2
    assert (hold.state, hold.listing, hold.winner) == ("EXCEPTION", h["seat_id"], charge_id)
    assert charge.state == "PROVIDER_REFUNDED"
    assert audit.ok, audit.violations
    avail = stack.send(buyer.availability()).body
    assert (avail["sold"], avail["free"]) == (2, 1)
    assert kept["seat_id"] != h["seat_id"]


# -- part of an order given back (ADR 0043) ----------------------------------------------------
# One seat of a party of four returns exactly that seat's price at the provider and goes back
# on sale; the whole rest returns the rest; a part the provider returned on its own waits for a
# person, whose revoke sends the rest back. Each closed by the clean nightly run above.


def refund(stack: Stack, event_id: str, hold_id: str, key: str, **body: Any) -> httpx.Response:
    with stack.client() as c:
        return c.post(
            f"/v1/admin/events/{event_id}/holds/{hold_id}/refunds",
            json={"reason": "seat broken", **body},
            headers={**stack.admin_headers(), "Idempotency-Key": key},
        )


def refunds_at_provider(stack: Stack, attempt_id: str) -> list[int]:
    return [
        e["amount"]
        for e in stack.ledger()["entries"]
        if e["attempt_id"] == attempt_id and e["kind"] == "refund"
    ]


def party_of_four(stack: Stack, event_id: str) -> tuple[Any, dict[str, Any], str]:
    buyer = stack.buyer(event_id, "quinn")
    h = claim(stack, buyer, party=4)
    charge_id = pay(stack, buyer, h["hold_id"])["charge_id"]
    eventually(state_is(stack, buyer, h["hold_id"], "CONFIRMED"))
    return buyer, h, charge_id


def test_one_seat_of_a_party_of_four_returns_its_price_and_goes_back_on_sale(
    stack: Stack, reconciled: list[str]
) -> None:
    event_id = stack.new_event(6)
    reconciled.append(event_id)
    buyer, h, charge_id = party_of_four(stack, event_id)
    seats = h["seat_ids"]
    r = refund(stack, event_id, h["hold_id"], "refund-1", seat_ids=[seats[1]])
    assert r.status_code == 202, r.text
    done = r.json()
    assert (done["amount"], done["whole"], done["hold_state"]) == (PRICE, False, "CONFIRMED")
    assert done["kept"] == {"seat_ids": [s for s in seats if s != seats[1]]}
    # The same key again is the same refund; with another seat it is refused.
    again = refund(stack, event_id, h["hold_id"], "refund-1", seat_ids=[seats[1]])
    assert (again.status_code, again.json()["charge_id"]) == (200, done["charge_id"])
    other = refund(stack, event_id, h["hold_id"], "refund-1", seat_ids=[seats[2]])
    assert (other.status_code, other.json()["error"]["code"]) == (422, "idempotency_key_reused")
    # Exactly one seat's price goes back at the provider, once.
    attempt = attempt_of(stack, charge_id)
    eventually(lambda: refunds_at_provider(stack, attempt) == [PRICE])
    # The seat is on sale again; the order keeps three seats and says what came back.
    after = stack.send(stack.buyer(event_id, "rory").claim(seat_id=seats[1]))
    assert after.status == 201, after
    order = hold_state(stack, buyer, h["hold_id"])["order"]
    assert (order["seat_ids"], order["amount"], order["refunded"]) == (
        done["kept"]["seat_ids"], 3 * PRICE, PRICE
    )  # fmt: skip
    part = eventually(
        lambda: next(
            (ch for ch in hold_state(stack, buyer, h["hold_id"])["charges"]
             if ch["charge_id"] == done["charge_id"] and ch["state"] == "REFUNDED"), None
        )
    )  # fmt: skip
    assert part["amount"] == PRICE
    # Seats the order does not hold, or a hold that is not a paid order, change nothing.
    bad = refund(stack, event_id, h["hold_id"], "refund-2", seat_ids=[seats[1]])
    assert (bad.status_code, bad.json()["error"]["code"]) == (409, "not_in_order")


def test_the_whole_rest_returns_the_rest_and_revokes_the_order(
    stack: Stack, reconciled: list[str]
) -> None:
    event_id = stack.new_event(4)
    reconciled.append(event_id)
    _, h, charge_id = party_of_four(stack, event_id)
    seats = h["seat_ids"]
    assert refund(stack, event_id, h["hold_id"], "a", seat_ids=seats[:1]).status_code == 202
    r = refund(stack, event_id, h["hold_id"], "b", seat_ids=seats[1:])
    assert r.status_code == 202, r.text
    assert (r.json()["whole"], r.json()["amount"], r.json()["hold_state"]) == (
        True, 3 * PRICE, "REVOKED"
    )  # fmt: skip
    attempt = attempt_of(stack, charge_id)
    eventually(lambda: sorted(refunds_at_provider(stack, attempt)) == [PRICE, 3 * PRICE])
    with stack.client() as c:
        avail = c.get(f"/v1/events/{event_id}").json()
    assert (avail["free"], avail["sold"]) == (4, 0)


def test_a_part_returned_at_the_provider_waits_for_a_person_then_the_rest_goes_back(
    stack: Stack, reconciled: list[str]
) -> None:
    event_id = stack.new_event(4)
    reconciled.append(event_id)
    buyer, h, charge_id = party_of_four(stack, event_id)
    attempt = attempt_of(stack, charge_id)
    r = httpx.post(
        f"{stack.sim}/v1/test/attempts/{attempt}/refund", json={"amount": PRICE}, timeout=5
    )
    assert r.status_code == 201, r.text
    held = eventually(state_is(stack, buyer, h["hold_id"], "EXCEPTION"))
    assert held["reason"] == "money_partly_refunded_at_provider"
    with stack.client() as c:
        revoked = c.post(
            f"/v1/admin/events/{event_id}/holds/{h['hold_id']}/revoke",
            headers=stack.admin_headers(),
        )
    assert revoked.status_code == 200, revoked.text
    eventually(lambda: sorted(refunds_at_provider(stack, attempt)) == [PRICE, 3 * PRICE])


def test_a_rebuild_keeps_a_part_on_its_way_back_at_exactly_its_amount(
    stack: Stack, ledger_dsn: str, reconciled: list[str]
) -> None:
    """The provider refuses refunds for a while: the part is still REFUNDING when Redis loses
    the event. The rebuilt event keeps the order's three seats, its winner counts what the part
    gives back, and the part, once the provider takes refunds again, returns exactly one seat's
    price on its order's payment (never the whole order)."""
    event_id = stack.new_event(4)
    reconciled.append(event_id)
    buyer, h, charge_id = party_of_four(stack, event_id)
    stack.sim_config(refund_fail_rate=1.0)
    r = refund(stack, event_id, h["hold_id"], "k", seat_ids=h["seat_ids"][:1])
    assert r.status_code == 202, r.text
    part_id = r.json()["charge_id"]

    _report, _holds, [winner, part], audit = asyncio.run(
        lose_redis_and_rebuild(stack, ledger_dsn, event_id, charges=(charge_id, part_id))
    )
    assert (winner.parted, winner.holds_money) == (PRICE, 3 * PRICE)
    assert (part.part_of, part.key, part.amount) == (charge_id, charge_id, PRICE)
    assert audit.ok, audit.violations
    held = hold_state(stack, buyer, h["hold_id"])
    assert (held["state"], held["seat_ids"]) == ("CONFIRMED", h["seat_ids"][1:])
    stack.sim_config(refund_fail_rate=0.0)
    attempt = attempt_of(stack, charge_id)
    eventually(lambda: refunds_at_provider(stack, attempt) == [PRICE], timeout_s=30)
