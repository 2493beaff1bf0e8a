"""The refund queue and provider reconciliation, in process: the store on fakeredis, the
provider simulator behind httpx's ASGI transport (no network; its webhooks point nowhere)."""

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from engine.model import keys
from engine.model.states import ChargeState, HoldState
from engine.providers import ProviderCharge, SimulatorProvider
from engine.store import Store
from engine.workers.reconcile import ProviderReconciler
from engine.workers.refunds import RefundWorker
from loadtest.provider_sim.server import SimConfig, create_app
from tests.conftest import Sale, open_sale
from tests.helpers import callback

PRICE = 100


@pytest.fixture
async def provider() -> AsyncIterator[SimulatorProvider]:
    app = create_app(
        SimConfig(
            webhook_url="http://127.0.0.1:9/none",
            decline_rate=0.0,
            fail_rate=0.0,
            delay_min_ms=1,
            delay_max_ms=2,
            retries_max=1,
        )
    )
    async with app.router.lifespan_context(app):
        client = SimulatorProvider("http://sim", transport=httpx.ASGITransport(app=app))
        yield client
        await client.aclose()


async def paying(
    store: Store, provider: SimulatorProvider, login: str = "alice"
) -> tuple[Sale, str]:
    """An open sale (server clock) where `login` holds a seat and paid: the provider captured,
    its callback never came (the charge is still CHARGING here)."""
    sale = await open_sale(store, 2)
    hold = f"h-{login}"
    await store.claim(sale.event_id, login, hold)
    key = keys.charge_key(sale.event_id, hold, login, "k")
    await store.start_charge(sale.event_id, hold, login, key, PRICE)
    meta = {"event_id": sale.event_id, "hold_id": hold, "charge_id": key}
    await provider.create_charge(key, PRICE, "EUR", meta)
    for _ in range(200):
        found = await provider.find_charge(key)
        if found is not None and found.status == "captured":
            break
        await asyncio.sleep(0.005)
    await asyncio.sleep(0.005)  # the charge is now older than the reconciler's 1 ms
    return sale, key


async def test_reconciliation_applies_a_capture_whose_callback_was_lost(
    fake_store: Store, provider: SimulatorProvider
) -> None:
    sale, _key = await paying(fake_store, provider)
    reconciler = ProviderReconciler(fake_store, provider, stale_ms=1)
    await reconciler.run_once()
    assert (reconciler.stats.examined, reconciler.stats.resolved) == (1, 1)
    assert (await fake_store.read.hold(sale.event_id, "h-alice")).state == HoldState.CONFIRMED
    await reconciler.run_once()  # nothing is CHARGING any more
    assert reconciler.stats.examined == 1
    await sale.audit_ok()


async def test_a_charge_the_provider_never_saw_is_closed_as_failed(
    fake_store: Store, provider: SimulatorProvider
) -> None:
    sale = await open_sale(fake_store, 1)
    await fake_store.claim(sale.event_id, "bo", "h1")
    await fake_store.start_charge(sale.event_id, "h1", "bo", "never-sent", PRICE)
    await asyncio.sleep(0.005)
    reconciler = ProviderReconciler(fake_store, provider, stale_ms=1)
    await reconciler.run_once()
    assert reconciler.stats.never_reached_provider == 1
    assert (await fake_store.read.charge(sale.event_id, "never-sent")).state == ChargeState.FAILED
    assert (await fake_store.read.hold(sale.event_id, "h1")).state == HoldState.RESERVED
    await sale.audit_ok()


async def test_the_refund_queue_refunds_a_capture_that_cannot_win(
    fake_store: Store, provider: SimulatorProvider
) -> None:
    sale, key = await paying(fake_store, provider)
    await fake_store.release(sale.event_id, "h-alice", "alice")  # the capture can no longer win
    await ProviderReconciler(fake_store, provider, stale_ms=1).run_once()
    assert (await fake_store.read.charge(sale.event_id, key)).state == ChargeState.REFUNDING
    worker = RefundWorker(fake_store, provider, seed=1)
    assert await worker.run_once() == 1
    assert (worker.stats.refunded, worker.stats.parked) == (1, 0)
    assert (await fake_store.read.charge(sale.event_id, key)).state == ChargeState.REFUNDED
    ledger: dict[str, Any] = await provider.ledger()
    assert [e["kind"] for e in ledger["entries"]] == ["capture", "refund"]
    assert await worker.run_once() == 0  # nothing due any more
    await sale.audit_ok()


async def test_a_stop_ends_the_refund_pass_after_the_refund_in_hand(
    fake_store: Store, provider: SimulatorProvider
) -> None:
    """SIGTERM during a pass of several due refunds: the one being asked of the provider is
    made and recorded, the others stay due, untouched, for the next process."""
    sales = [await paying(fake_store, provider, login) for login in ("ann", "bo", "cy")]
    for (sale, _key), login in zip(sales, ("ann", "bo", "cy"), strict=True):
        await fake_store.release(sale.event_id, f"h-{login}", login)
    await ProviderReconciler(fake_store, provider, stale_ms=1).run_once()
    stop = asyncio.Event()
    worker = RefundWorker(fake_store, provider, seed=1, stop=stop)
    real_refund = provider.refund

    async def refund_then_sigterm(key: str, attempt_id: str, **how: Any) -> Any:
        stop.set()  # the signal arrives while the provider is asked
        return await real_refund(key, attempt_id, **how)

    provider.refund = refund_then_sigterm  # type: ignore[method-assign]
    assert await worker.run_once() == 1
    states = [(await fake_store.read.charge(s.event_id, k)).state for s, k in sales]
    assert sorted(states) == [ChargeState.REFUNDED, ChargeState.REFUNDING, ChargeState.REFUNDING]
    stop.clear()
    provider.refund = real_refund  # type: ignore[method-assign]
    assert await worker.run_once() == 2  # the next pass (another process) makes the others
    for sale, key in sales:
        assert (await fake_store.read.charge(sale.event_id, key)).state == ChargeState.REFUNDED
        await sale.audit_ok()


async def test_a_refund_the_providers_record_disowns_is_parked_not_paid(
    fake_store: Store, provider: SimulatorProvider
) -> None:
    """A capture message for the winner's attempt under a key we never minted becomes an
    orphan here; the provider's record says the attempt is the winner's: no refund."""
    sale, key = await paying(fake_store, provider)
    await ProviderReconciler(fake_store, provider, stale_ms=1).run_once()
    found = await provider.find_charge(key)
    assert found is not None
    await callback(sale, "forged-key", "CAPTURED", attempt=found.attempt_id, amount=PRICE)
    # (the attempt is bound to the winner: the forged message is a mismatch, nothing moves)
    other = await open_sale(fake_store, 1)
    await callback(other, "forged-key", "CAPTURED", attempt=found.attempt_id, amount=PRICE)
    worker = RefundWorker(fake_store, provider, seed=1)
    await worker.run_once()
    assert (worker.stats.refunded, worker.stats.parked) == (0, 1)
    orphan = await fake_store.read.charge(other.event_id, f"orphan/{found.attempt_id}")
    assert (orphan.state, orphan.parked) == (ChargeState.REFUNDING, True)
    ledger: dict[str, Any] = await provider.ledger()
    assert [e["kind"] for e in ledger["entries"]] == ["capture"]  # the winner keeps its money
    assert (await fake_store.read.hold(sale.event_id, "h-alice")).state == HoldState.CONFIRMED
    await other.audit_ok()


async def test_a_recent_decline_is_asked_about_again_and_a_contradicting_capture_goes_back(
    fake_store: Store, provider: SimulatorProvider
) -> None:
    """The provider declines, then captures that very attempt, and the capture's webhook is
    lost: within the watch window the worker asks again and the money goes down the refund
    path; outside it (and for a fresh decline) it does not ask."""
    sale, key, created = await declined(fake_store, provider)
    await provider.http.post(f"/v1/test/attempts/{created.attempt_id}/capture")
    fresh = ProviderReconciler(fake_store, provider, stale_ms=60_000, watch_ms=120_000)
    await fresh.run_once()  # the decline is younger than stale_ms: not yet
    assert fresh.stats.rechecked == 0
    await asyncio.sleep(0.005)
    watching = ProviderReconciler(fake_store, provider, stale_ms=1, watch_ms=60_000)
    await watching.run_once()
    assert (watching.stats.rechecked, watching.stats.contradictions) == (1, 1)
    c = await fake_store.read.charge(sale.event_id, key)
    assert (c.state, c.captured) == (ChargeState.REFUNDING, PRICE)
    assert await fake_store.read.due_refunds(sale.event_id, 2**62) == [key]
    assert await watched_ids(fake_store, sale) == []  # on the refund path: no longer watched
    await sale.audit_ok()


async def test_a_decline_older_than_the_watch_window_leaves_the_index_unasked(
    fake_store: Store, provider: SimulatorProvider
) -> None:
    sale, key, _created = await declined(fake_store, provider)
    assert await watched_ids(fake_store, sale) == [key]
    await asyncio.sleep(0.005)
    unwatched = ProviderReconciler(fake_store, provider, stale_ms=1, watch_ms=2)
    await unwatched.run_once()  # left to the nightly run
    assert unwatched.stats.rechecked == 0
    assert await watched_ids(fake_store, sale) == []


async def declined(store: Store, provider: SimulatorProvider) -> tuple[Sale, str, ProviderCharge]:
    """cy holds a seat; the provider declined its charge (and its callback said so)."""
    sale = await open_sale(store, 1)
    await store.claim(sale.event_id, "cy", "h1")
    key = keys.charge_key(sale.event_id, "h1", "cy", "k")
    await store.start_charge(sale.event_id, "h1", "cy", key, PRICE)
    created = await provider.create_charge(key, PRICE, "EUR", {"event_id": sale.event_id})
    await callback(sale, key, "DECLINED", attempt=created.attempt_id, intent_id=created.intent_id)
    return sale, key, created


async def watched_ids(store: Store, sale: Sale) -> list[str]:
    return [str(i) for i in await store.client.zrange(store.key(sale.event_id, "watch"), 0, -1)]


async def test_reconciliation_reads_the_watch_index_page_by_page_not_every_charge(
    fake_store: Store, provider: SimulatorProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seven charges the provider never saw, three captured ones: only the seven are in the
    index, and a pass in pages of two settles all seven (settled ones leave the range, the
    pages do not skip any)."""
    sale = await open_sale(fake_store, 10)
    for n in range(10):
        await fake_store.claim(sale.event_id, f"b{n}", f"h{n}")
        await fake_store.start_charge(sale.event_id, f"h{n}", f"b{n}", f"c{n}", PRICE)
    for n in range(3):
        await callback(sale, f"c{n}", "CAPTURED", attempt=f"a{n}", amount=PRICE)
    assert sorted(await watched_ids(fake_store, sale)) == [f"c{n}" for n in range(3, 10)]
    await asyncio.sleep(0.005)
    monkeypatch.setattr(ProviderReconciler, "PAGE", 2)
    reconciler = ProviderReconciler(fake_store, provider, stale_ms=1, watch_ms=2)
    await reconciler.run_once()
    assert (reconciler.stats.examined, reconciler.stats.never_reached_provider) == (7, 7)
    states = [c.state for c in await fake_store.read.scan_charges(sale.event_id)]
    assert sorted(states) == [ChargeState.CAPTURED] * 3 + [ChargeState.FAILED] * 7
    await sale.audit_ok()


async def test_the_refund_pass_reads_every_events_queue_at_once_and_keeps_the_due(
    fake_store: Store,
) -> None:
    """engine/store/reads.py due_refunds_of: one pipelined read per thousand events; only the events
    with a refund due now come back, each with its due charges."""
    sales = [await open_sale(fake_store, 2) for _ in range(3)]
    busy = sales[1]
    await fake_store.claim(busy.event_id, "u", "h")
    await fake_store.start_charge(busy.event_id, "h", "u", "c", 100)
    await fake_store.release(busy.event_id, "h", "u")
    await callback(busy, "c", "CAPTURED")  # a capture that cannot win: refunded
    now = await fake_store.read.server_time_ms()
    due = await fake_store.read.due_refunds_of([s.event_id for s in sales], now + 1)
    assert due == {busy.event_id: ["c"]}


async def test_reconciliation_looks_only_at_events_with_a_charge_old_enough(
    fake_store: Store,
) -> None:
    """engine/store/reads.py with_entries_upto: of three events, only the one whose watch index has
    a charge in flight since at most the cut is asked about."""
    sales = [await open_sale(fake_store, 2) for _ in range(3)]
    busy = sales[2]
    await fake_store.claim(busy.event_id, "u", "h")
    await fake_store.start_charge(busy.event_id, "h", "u", "c", 100)
    now = await fake_store.read.server_time_ms()
    events = [s.event_id for s in sales]
    assert await fake_store.read.with_entries_upto(events, "watch", now + 1) == [busy.event_id]
    assert await fake_store.read.with_entries_upto(events, "watch", 0) == []
