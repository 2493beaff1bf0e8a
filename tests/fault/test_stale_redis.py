"""A Redis that comes back older than the ledger (restarted from an older snapshot: what a
failover to a lagging replica looks like) or empty (no persistence), on a private server with a
private ledger (ADR 0017): the ledger writer notices, the event answers "recovering" instead of
selling again what the ledger shows as sold, and `rebuild` brings back every sale the ledger
holds (every sale a buyer was told, ADR 0016) without being blocked by what the stale Redis
decided meanwhile."""

import asyncpg
import httpx
import pytest

from engine.model import errors
from engine.model.event_config import EventConfig
from engine.model.holds import ProviderOutcome
from engine.model.states import HoldState
from engine.providers import SimulatorProvider
from engine.store import Store
from loadtest.provider_sim.server import SimConfig, create_app
from persistence.nightly import reconcile_event
from persistence.nightly_report import EventReport
from persistence.rebuild import RebuildReport, rebuild
from persistence.writer import LedgerWriter
from tests.conftest import seats
from tests.fault.conftest import PrivateRedis
from tests.fault.test_redis_durability import connect

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]


async def buy(store: Store, i: int, seat: str | None = None) -> str:
    await store.claim("ev", f"u{i}", f"h{i}", seat)
    await store.start_charge("ev", f"h{i}", f"u{i}", f"c{i}", 100)
    outcome = ProviderOutcome(f"pe{i}", f"c{i}", f"a{i}", f"pi{i}", "CAPTURED", amount=100)
    return (await store.apply_outcome("ev", outcome)).decision


async def drain(writer: LedgerWriter) -> None:
    while await writer.step("ev"):
        pass


async def sold_then_snapshot_then_sold(server: PrivateRedis, pool: asyncpg.Pool) -> list[str]:
    """h0 sold, snapshot, h1 and h2 sold: the ledger holds all three, the snapshot one."""
    store = connect(server)
    await store.create_event("ev", seats(6), EventConfig(hold_ttl_ms=600_000, quarantine_ms=60_000))
    await store.open_sale("ev")
    writer = LedgerWriter(store.client, pool, prefix=store.prefix, consumer="before")
    assert await buy(store, 0) == "CONFIRMED"
    await drain(writer)
    await store.client.save()
    assert [await buy(store, 1), await buy(store, 2)] == ["CONFIRMED", "CONFIRMED"]
    await drain(writer)
    await store.client.aclose()
    return ["h0", "h1", "h2"]


async def nightly(store: Store, pool: asyncpg.Pool, writer: LedgerWriter) -> EventReport:
    """The nightly run of the event, with the simulator in process as the provider (it holds
    none of these test charges)."""
    app = create_app(SimConfig(webhook_url="http://127.0.0.1:9/none", retries_max=1))
    async with app.router.lifespan_context(app):
        provider = SimulatorProvider("http://sim", transport=httpx.ASGITransport(app=app))
        async with pool.acquire() as conn:
            report = await reconcile_event(
                store, conn, writer, [], "ev", provider=provider, grace_ms=0
            )
        await provider.aclose()
    return report


async def lost_sales(store: Store, pool: asyncpg.Pool, writer: LedgerWriter) -> dict[str, bool]:
    """The nightly run's sale_lost_by_redis findings (hold -> repaired)."""
    report = await nightly(store, pool, writer)
    return {d.entity: d.repaired for d in report.discrepancies if d.cls == "sale_lost_by_redis"}


async def alerts(pool: asyncpg.Pool) -> int:
    async with pool.acquire() as conn:
        return int(await conn.fetchval("select count(*) from ledger_alerts"))


async def assert_rebuilt(store: Store, pool: asyncpg.Pool, sold: list[str]) -> RebuildReport:
    async with pool.acquire() as conn:
        rebuilt = await rebuild(store, conn, "ev", force=True)
    for hold_id in sold:
        assert (await store.read.hold("ev", hold_id)).state == HoldState.CONFIRMED
    report = await store.read.audit("ev")
    assert report.ok, report.violations
    assert (await store.read.availability("ev")).sold == len(sold)
    # The sale goes on, numbered after the ledger: nothing new is refused.
    before = await alerts(pool)
    assert await buy(store, 7) == "CONFIRMED"
    writer = LedgerWriter(store.client, pool, prefix=store.prefix, consumer="after")
    await drain(writer)
    assert await alerts(pool) == before
    assert not (await writer.fencer.check()).fenced
    return rebuilt


async def test_an_older_snapshot_is_fenced_before_it_sells_again(
    private_redis: PrivateRedis, pool: asyncpg.Pool, opened: list[Store]
) -> None:
    sold = await sold_then_snapshot_then_sold(private_redis, pool)
    private_redis.kill()
    private_redis.start()  # from the snapshot: h1 and h2 are gone, their seats free
    store = connect(private_redis)
    opened.append(store)
    assert (await store.read.availability("ev")).sold == 1
    await store.claim("ev", "u8", "h8")  # a claim writes no record: nothing to notice yet
    writer = LedgerWriter(store.client, pool, prefix=store.prefix, consumer="stale")
    assert (await writer.fencer.check()).fenced == ["ev"]
    with pytest.raises(errors.Recovering):
        await store.claim("ev", "u9", "h9")
    with pytest.raises(errors.Recovering):
        await store.read.hold("ev", "h1")  # not "not found": the ledger has it
    await store.release("ev", "h8", "u8")  # decided by the fenced Redis, never mirrored
    await drain(writer)
    lost = await lost_sales(store, pool, writer)
    assert lost == {"h1": False, "h2": False}  # reported, never "repaired" by a refund
    rebuilt = await assert_rebuilt(store, pool, sold)
    assert rebuilt.superseded == ["hold:h8:RELEASED"]  # the ledger won, and says what it replaced


async def test_a_stale_redis_that_decides_first_is_fenced_by_its_numbers(
    private_redis: PrivateRedis, pool: asyncpg.Pool, opened: list[Store]
) -> None:
    """Before the writer looks, the stale Redis sells h1's seat again: its records carry numbers
    the ledger already holds, the ledger refuses them, the event is fenced, the second buyer is
    never told CONFIRMED, and the rebuild is not blocked by the refused decisions."""
    sold = await sold_then_snapshot_then_sold(private_redis, pool)
    async with pool.acquire() as conn:
        seat_of_h1 = await conn.fetchval("select seat_id from holds where hold_id = 'h1'")
    private_redis.kill()
    private_redis.start()
    store = connect(private_redis)
    opened.append(store)
    assert await buy(store, 5, seat_of_h1) == "CONFIRMED"  # decided by the stale Redis ...
    writer = LedgerWriter(store.client, pool, prefix=store.prefix, consumer="stale")
    await drain(writer)
    refused = await alerts(pool)
    assert refused > 0  # ... refused by the ledger
    before = await nightly(store, pool, writer)
    assert {d.cls for d in before.discrepancies if not d.repaired} >= {"decision_refused_by_ledger"}
    h5 = await store.read.hold("ev", "h5")
    assert await store.read.sale_status("ev", "h5", h5.record) == "fenced"  # ... never told
    assert (await store.read.availability("ev")).status == "fenced"
    await assert_rebuilt(store, pool, sold)
    # The rebuild settled what the ledger refused: listed as superseded, no longer for a person.
    after = await nightly(store, pool, writer)
    assert [d for d in after.discrepancies if d.cls == "decision_refused_by_ledger"] == []
    assert after.open_exceptions["superseded_by_rebuild"] == refused
    async with pool.acquire() as conn:
        winner = await conn.fetchval(
            "select hold_id from holds where seat_id = $1 and state = 'CONFIRMED'", seat_of_h1
        )
    assert winner == "h1"


async def test_an_empty_redis_answers_recovering_until_rebuilt(
    private_redis: PrivateRedis, pool: asyncpg.Pool, opened: list[Store]
) -> None:
    sold = await sold_then_snapshot_then_sold(private_redis, pool)
    before = connect(private_redis)
    opened.append(before)
    await before.claim("ev", "u4", "h4")  # paying when Redis is lost
    await before.start_charge("ev", "h4", "u4", "c4", 100)
    await drain(LedgerWriter(before.client, pool, prefix=before.prefix, consumer="paying"))
    (private_redis.workdir / "dump.rdb").unlink()
    private_redis.kill()
    private_redis.start()  # empty
    store = connect(private_redis)
    opened.append(store)
    with pytest.raises(errors.HoldNotFound):  # nobody noticed yet
        await store.read.hold("ev", "h1")
    writer = LedgerWriter(store.client, pool, prefix=store.prefix, consumer="empty")
    assert (await writer.fencer.check()).lost == ["ev"]
    with pytest.raises(errors.Recovering):
        await store.read.hold("ev", "h1")
    with pytest.raises(errors.Recovering):
        await store.claim("ev", "u9", "h9")
    await assert_rebuilt(store, pool, sold)
    # The buyer who was paying reads a terminal state naming the charge, and its capture,
    # arriving now, goes back.
    paying = await store.read.hold("ev", "h4")
    assert (paying.state, paying.charge_ids, paying.listing) == (
        HoldState.EXPIRED,
        ("c4",),
        "s00003",
    )
    outcome = ProviderOutcome("pe4", "c4", "a4", "pi4", "CAPTURED", amount=100)
    assert (await store.apply_outcome("ev", outcome)).decision == "REFUND"
