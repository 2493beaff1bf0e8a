"""Rebuilding Redis from the ledger, and the nightly three-way reconciliation, against the
whole stack (API, simulator, worker) plus a private ledger database."""

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
import pytest

from engine.model import errors
from engine.model.holds import ProviderOutcome
from engine.model.states import ChargeState, HoldState
from engine.providers import SimulatorProvider
from engine.store import Store
from persistence.nightly import reconcile_event
from persistence.rebuild import RebuildRefused, rebuild
from persistence.writer import LedgerWriter
from tests.conftest import REDIS_URL
from tests.integration.conftest import Stack, StackLedger
from tests.integration.test_e2e import claim, eventually, hold_state, pay

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]


@pytest.fixture
def ledger(stack_ledger: StackLedger) -> tuple[Store, asyncpg.Pool, LedgerWriter, str]:
    return stack_ledger.store, stack_ledger.pool, stack_ledger.writer, stack_ledger.dsn


async def drain(writer: LedgerWriter, event_id: str) -> None:
    while await writer.step(event_id):
        pass


def sales(stack: Stack, event_id: str) -> dict[str, Any]:
    """Two confirmed sales, one refunded capture, one charge still in flight."""
    stack.sim_config(decline_rate=0.0, fail_rate=0.0, late_rate=0.0, loss_rate=0.0)
    out: dict[str, Any] = {}
    for name in ("ann", "ben"):
        buyer = stack.buyer(event_id, name)
        h = claim(stack, buyer)
        pay(stack, buyer, h["hold_id"])
        eventually(
            lambda h=h, buyer=buyer: hold_state(stack, buyer, h["hold_id"])["state"] == "CONFIRMED"
        )
        out[name] = h
    cat = stack.buyer(event_id, "cat")
    h = claim(stack, cat)
    stack.sim_config(late_rate=1.0, late_delay_ms=800)
    pay(stack, cat, h["hold_id"])
    stack.sim_config(late_rate=0.0)
    stack.send(cat.release(h["hold_id"]))
    eventually(lambda: hold_state(stack, cat, h["hold_id"])["charges"][0]["state"] == "REFUNDED")
    dan = stack.buyer(event_id, "dan")
    h = claim(stack, dan)
    stack.sim_config(late_rate=1.0, late_delay_ms=600_000)  # stays CHARGING
    out["charging"] = pay(stack, dan, h["hold_id"])
    stack.sim_config(late_rate=0.0)
    return out


def ghost_capture(stack: Stack, event_id: str) -> None:
    """Money the engine never heard of: a capture for our event whose callback is lost."""
    stack.sim_config(loss_rate=1.0)
    httpx.post(
        f"{stack.sim}/v1/charges",
        json={"amount": 4500, "metadata": {"event_id": event_id}},
        headers={"Idempotency-Key": "ghost-charge"},
    ).raise_for_status()
    eventually(
        lambda: any(e["idempotency_key"] == "ghost-charge" for e in stack.ledger()["entries"])
    )
    stack.sim_config(loss_rate=0.0)


async def test_rebuild_from_the_ledger(stack: Stack, ledger: Any) -> None:
    store, pool, writer, _dsn = ledger
    event_id = stack.new_event(6)
    sold = await asyncio.to_thread(sales, stack, event_id)
    await drain(writer, event_id)
    before = await store.read.availability(event_id)
    async with pool.acquire() as conn:
        with pytest.raises(RebuildRefused, match="still exists"):
            await rebuild(store, conn, event_id)
        # Forced, it still refuses while the outbox holds decisions the ledger lacks.
        stream = store.keys(event_id)[12]
        extra = (await store.read.outbox(event_id))[0]
        await store.client.xadd(stream, {**extra, "decision_id": "not-in-ledger"})
        with pytest.raises(RebuildRefused, match="not yet in the ledger"):
            await rebuild(store, conn, event_id, force=True)
        await drain(writer, event_id)
        ended = [
            h
            for h in (await store.read.holds(event_id)).values()
            if h.state in ("EXPIRED", "RELEASED")
        ]
        await store.restore.drop_event(event_id)  # Redis lost the event entirely
        report = await rebuild(store, conn, event_id)
    assert (report.seats, report.sold) == (6, 2)
    after = await store.read.availability(event_id)
    assert (after.sold, after.seats_total, after.status) == (before.sold, 6, "open")
    for name in ("ann", "ben"):
        h = await store.read.hold(event_id, sold[name]["hold_id"])
        assert (h.state, h.listing) == (HoldState.CONFIRMED, sold[name]["seat_id"])
    in_flight = await store.read.charge(event_id, sold["charging"]["charge_id"])
    assert (in_flight.state, in_flight.refund_only) == (ChargeState.CHARGING, True)
    # Ended holds come back as records: a replayed claim id gets its first outcome, no seat.
    for h in ended:
        again = await store.read.hold(event_id, h.hold_id)
        assert (again.state, again.hold_id) == (h.state, h.hold_id)
    # The hold whose buyer was paying (the ledger knows it only through its charge) comes back
    # ended, naming the charge: its buyer reads a terminal state and where the money is.
    paying = await store.read.hold(event_id, sold["charging"]["hold_id"])
    assert (paying.state, paying.charge_ids) == (HoldState.EXPIRED, (in_flight.charge_id,))
    assert in_flight.hold_id == paying.hold_id
    assert report.ended_holds == len(ended) + 1
    # A callback while the event is rebuilt is told to retry: nothing is recorded.
    await store.client.hset(store.keys(event_id)[0], "status", "draft")
    with pytest.raises(errors.Recovering):
        await store.apply_outcome(event_id, ProviderOutcome("pe-x", "cx", "ax", "", "CAPTURED"))
    await store.client.hset(store.keys(event_id)[0], "status", "open")
    report_audit = await store.read.audit(event_id)
    assert report_audit.ok, report_audit.violations
    # The rebuilt event sells on, and never resells a sold seat.
    eve = stack.buyer(event_id, "eve")
    fresh = await asyncio.to_thread(claim, stack, eve)
    assert fresh["seat_id"] not in {sold["ann"]["seat_id"], sold["ben"]["seat_id"]}


async def test_nightly_finds_each_planted_discrepancy_and_a_clean_run_finds_none(
    stack: Stack, ledger: Any, tmp_path: Path
) -> None:
    store, pool, writer, dsn = ledger
    clean = stack.new_event(4)
    await asyncio.to_thread(sales, stack, clean)
    await drain(writer, clean)
    entries = stack.ledger()["entries"]
    provider = SimulatorProvider(stack.sim)
    async with pool.acquire() as conn:
        clean_report = await reconcile_event(
            store, conn, writer, entries, clean, provider=provider, grace_ms=0
        )
    assert clean_report.discrepancies == []
    assert clean_report.provider_net == clean_report.expected_net == 2 * 4500

    dirty = stack.new_event(4)
    await asyncio.to_thread(sales, stack, dirty)
    await drain(writer, dirty)
    # (1) money the engine never heard of: a capture whose callback was lost, for our event.
    await asyncio.to_thread(ghost_capture, stack, dirty)
    # (3) a decision the ledger does not hold yet; (2) and (4) planted in the ledger.
    frank = stack.buyer(dirty, "frank")
    await asyncio.to_thread(claim, stack, frank, seat_id="s3")
    stack.send(frank.release((await store.read.holds(dirty)).popitem()[0]))
    async with pool.acquire() as conn:
        await conn.execute(
            "insert into holds values ($1, 'phantom', 's9', 'x', 'CONFIRMED', 'nobody', "
            "'quarantine', 0, 0, 0)",
            dirty,
        )
        report = await reconcile_event(
            store, conn, writer, stack.ledger()["entries"], dirty, provider=provider, grace_ms=0
        )
    await provider.aclose()
    by_class: dict[str, list[Any]] = {}
    for d in report.discrepancies:
        by_class.setdefault(d.cls, []).append(d)
    ghost = by_class["captured_without_seat_not_refunded"]
    assert [(d.entity, d.repaired) for d in ghost] == [("ghost-charge", True)]
    ghost_attempt = next(
        e["attempt_id"] for e in stack.ledger()["entries"] if e["idempotency_key"] == "ghost-charge"
    )
    orphan = await store.read.charge(dirty, f"orphan/{ghost_attempt}")
    assert orphan.state in (ChargeState.REFUNDING, ChargeState.REFUNDED)
    assert (orphan.key, orphan.captured) == ("ghost-charge", 4500)
    assert [d.entity for d in by_class["seat_sold_without_money"]] == ["phantom"]
    assert [d.entity for d in by_class["ledger_row_unknown_to_redis"]] == ["phantom"]
    assert by_class["decision_missing_from_ledger"] and all(
        d.repaired for d in by_class["decision_missing_from_ledger"]
    )

    # The command: table, JSON report, and a non-zero exit while something is left unrepaired.
    env = {
        **os.environ,
        "ONSALE_REDIS_URL": REDIS_URL,
        "ONSALE_KEY_PREFIX": stack.prefix,
        "ONSALE_PG_DSN": dsn,
        "ONSALE_PROVIDER_URL": stack.sim,
    }
    report_path = tmp_path / "reconcile.json"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "onsale.cli",
        "reconcile",
        "--event",
        dirty,
        "--json",
        report_path,
        "--grace-ms",
        "0",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 1, out.decode()
    assert b"seat_sold_without_money" in out
    report = orjson.loads(await asyncio.to_thread(report_path.read_bytes))
    assert report["unrepaired"] >= 2
