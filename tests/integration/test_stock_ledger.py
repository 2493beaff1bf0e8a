"""Quantity stock in the ledger (ADR 0022), on real Redis and real PostgreSQL: a stock event sold
through the engine is mirrored (its SKUs, every applied correction, its carts), rebuilt from the
ledger after Redis lost it, and reconciled nightly against it."""

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from engine.model import errors
from engine.model.event_config import EventConfig
from engine.model.states import ChargeState, HoldState
from engine.model.stock_lines import SkuSpec, StockLine
from engine.store import Store
from persistence.nightly import reconcile_event
from persistence.rebuild import rebuild
from persistence.writer import LedgerWriter
from tests.conftest import Sale
from tests.helpers import callback
from tests.pg import migrated_pool

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

TTL = 600_000
DELIVERY = "delivery (Müller)"  # a reason as an operator writes it, not only ASCII
# Every correction the sale below applies, in order: (id, sku@location, before, after, mode,
# value, reason, operator). The refused one (below zero) is not among them.
APPLIED = [
    ("initial:CHAIN:east", "CHAIN@east", 0, 5, "set", 5, "initial count", "setup"),
    ("initial:CHAIN:west", "CHAIN@west", 0, 3, "set", 3, "initial count", "setup"),
    ("initial:TUBE:east", "TUBE@east", 0, 0, "set", 0, "initial count", "setup"),
    ("initial:TUBE:west", "TUBE@west", 0, 4, "set", 4, "initial count", "setup"),
    ("delivery-1", "CHAIN@west", 3, 7, "adjust", 4, DELIVERY, "olga"),
    ("count-1", "CHAIN@east", 5, 4, "set", 4, "cycle count", "olga"),
]


@pytest.fixture
async def pool() -> AsyncIterator[asyncpg.Pool]:
    async with migrated_pool() as p:
        yield p


def writer_of(store: Store, pool: asyncpg.Pool) -> LedgerWriter:
    return LedgerWriter(store.client, pool, prefix=store.prefix, consumer="stock", batch_max=5)


async def drain(writer: LedgerWriter, event_id: str) -> None:
    while await writer.step(event_id):
        pass


async def buy(sale: Sale, login: str, hold_id: str, *lines: StockLine) -> str:
    """A cart claimed, paid and captured: CONFIRMED. Returns its line list."""
    store, event_id = sale.store, sale.event_id
    cart = await store.claim(event_id, login, hold_id, lines=lines)
    amount = (await store.read.hold(event_id, hold_id)).amount
    await store.start_charge(event_id, hold_id, login, f"pay-{hold_id}", amount)
    assert (await callback(sale, f"pay-{hold_id}", "CAPTURED")).decision == "CONFIRMED"
    return cart.listing


async def stock_sale(store: Store) -> Sale:
    """Two SKUs at two locations; three carts bought (two of them the same line text), one
    left to expire, a delivery and a cycle count applied, a count refused below zero, and a
    replay of the delivery (applied once)."""
    event_id = "bikes"
    skus = [
        SkuSpec("CHAIN", 2_500, {"east": 5, "west": 3}),
        SkuSpec("TUBE", 900, {"east": 0, "west": 4}),
    ]
    await store.stock.create_event(
        event_id,
        ["east", "west"],
        skus,
        EventConfig(hold_ttl_ms=TTL, quarantine_ms=900_000, login_cap=0),
    )
    sale = Sale(store, event_id)
    # The sale's clock an hour behind Redis's: a rebuild, which happens now, comes after it.
    t0 = await store.read.server_time_ms() - 3_600_000
    await sale.at(t0)
    await store.open_sale(event_id)
    assert await buy(sale, "ann", "cart-ann", StockLine("CHAIN", 2)) == "CHAIN@east*2"
    assert await buy(sale, "bob", "cart-bob", StockLine("CHAIN", 1, "east")) == "CHAIN@east*1"
    assert await buy(sale, "cy", "cart-cy", StockLine("CHAIN", 1, "east")) == "CHAIN@east*1"
    await store.claim(event_id, "dan", "cart-dan", lines=[StockLine("TUBE", 3)])  # TUBE@west*3
    correct = store.stock.correct
    await correct(event_id, "delivery-1", "CHAIN", "west", adjust_by=4, reason=DELIVERY,
                  operator="olga")  # fmt: skip
    with pytest.raises(errors.StockBelowZero):  # dan's cart holds 3 of the 4
        await correct(event_id, "count-0", "TUBE", "west", set_to=0, reason="cycle count",
                      operator="olga")  # fmt: skip
    again = await correct(event_id, "delivery-1", "CHAIN", "west", adjust_by=4, reason=DELIVERY,
                          operator="olga")  # fmt: skip
    assert (again.replay, again.on_hand) == (True, 7)
    await correct(event_id, "count-1", "CHAIN", "east", set_to=4, reason="cycle count",
                  operator="olga")  # fmt: skip
    await sale.at(t0 + TTL)
    assert (await store.sweep(event_id)).expired == 1  # dan's cart: back to available
    await sale.audit_ok()
    return sale


async def test_a_stock_sale_is_mirrored_corrections_and_carts_alike(
    real_store: Store, pool: asyncpg.Pool
) -> None:
    sale = await stock_sale(real_store)
    event_id = sale.event_id
    writer = writer_of(real_store, pool)
    await drain(writer, event_id)
    async with pool.acquire() as conn:
        config = await conn.fetchrow("select * from event_configs where event_id = $1", event_id)
        assert (config["kind"], config["locations"]) == ("stock", "east,west")
        assert (config["login_cap"], config["max_party"]) == (0, 0)
        skus = await conn.fetch("select sku, price_minor from event_skus order by sku")
        assert [tuple(r) for r in skus] == [("CHAIN", 2_500), ("TUBE", 900)]
        rows = await conn.fetch(
            "select correction_id, sku || '@' || location, on_hand_before, on_hand_after, mode, "
            "value, reason, operator from stock_corrections order by seq"
        )
        assert [tuple(r) for r in rows] == APPLIED
        decisions = await conn.fetch(
            "select entity_id, from_state, to_state, terminal, seat_id, login from decisions "
            "where kind = 'correction' order by seq"
        )
        assert [tuple(r) for r in decisions] == [
            (c, str(before), str(after), True, where, operator)
            for c, where, before, after, _m, _v, _r, operator in APPLIED
        ]
        # Corrections move no hold or charge; the two carts of one line text are both sold.
        holds = await conn.fetch("select hold_id, seat_id, state from holds order by hold_id")
        assert [tuple(r) for r in holds] == [
            ("cart-ann", "CHAIN@east*2", "CONFIRMED"),
            ("cart-bob", "CHAIN@east*1", "CONFIRMED"),
            ("cart-cy", "CHAIN@east*1", "CONFIRMED"),
            ("cart-dan", "TUBE@west*3", "EXPIRED"),
        ]
        charges = await conn.fetch("select charge_id, state from charges order by charge_id")
        assert [tuple(r) for r in charges] == [
            (f"pay-cart-{n}", "CAPTURED") for n in ("ann", "bob", "cy")
        ]
        assert await conn.fetchval("select count(*) from ledger_alerts") == 0
        # A replayed batch writes nothing twice.
        counts = "select (select count(*) from decisions), (select count(*) from stock_corrections)"
        before = tuple(await conn.fetchrow(counts))
    assert not await writer.write(event_id, await real_store.read.outbox_entries(event_id))
    async with pool.acquire() as conn:
        assert tuple(await conn.fetchrow(counts)) == before


async def test_two_stock_carts_of_one_line_text_are_both_sold_in_the_ledger(
    pool: asyncpg.Pool,
) -> None:
    """The one-sale-per-seat index is a seat rule: a stock hold's seat_id is its line list, and
    two carts may buy the same units' worth; a seat is still sold once."""
    async with pool.acquire() as conn:
        await conn.execute("insert into events (event_id) values ('x')")
        insert = (
            "insert into holds values ('x', $1, $2, 'l', 'CONFIRMED', $3, 'quarantine', 0, 0, 0)"
        )
        await conn.execute(insert, "h1", "CHAIN@east*1", "c1")
        await conn.execute(insert, "h2", "CHAIN@east*1", "c2")
        await conn.execute(insert, "h3", "s1", "c3")
        with pytest.raises(asyncpg.UniqueViolationError):
            await conn.execute(insert, "h4", "s1", "c4")


async def test_a_stock_event_is_rebuilt_from_the_ledger(
    real_store: Store, pool: asyncpg.Pool
) -> None:
    store = real_store
    sale = await stock_sale(store)
    event_id = sale.event_id
    writer = writer_of(store, pool)
    await drain(writer, event_id)
    table = await store.stock.table(event_id)
    availability = await store.read.availability(event_id)
    await store.restore.drop_event(event_id)  # Redis lost the event
    async with pool.acquire() as conn:
        report = await rebuild(store, conn, event_id)
    assert (report.seats, report.sold, report.ended_holds) == (4 + 7 + 0 + 4, 3, 1)
    assert await store.stock.table(event_id) == table
    after = await store.read.availability(event_id)
    assert (after.seats_total, after.free, after.held, after.sold, after.status) == (
        availability.seats_total, availability.free, 0, availability.sold, "open",
    )  # fmt: skip
    await sale.audit_ok()
    # No initial count was recorded again: the rebuilt outbox is empty.
    assert await store.read.outbox(event_id) == []
    ann = await store.read.hold(event_id, "cart-ann")
    assert (ann.state, ann.listing, ann.winner) == ("CONFIRMED", "CHAIN@east*2", "pay-cart-ann")
    assert (await store.read.hold(event_id, "cart-dan")).state == HoldState.EXPIRED
    winner = await store.read.charge(event_id, "pay-cart-ann")
    assert (winner.state, winner.amount) == (ChargeState.CAPTURED, 5_000)
    # Every applied correction is still applied: a replay is answered as one, another body
    # under its id is refused; the refused one was never applied.
    correct = store.stock.correct
    for c, where, _before, after_count, mode, value, reason, operator in APPLIED:
        sku, _, location = where.partition("@")
        how: dict[str, Any] = {"set_to": value} if mode == "set" else {"adjust_by": value}
        done = await correct(event_id, c, sku, location, reason=reason, operator=operator, **how)
        assert (done.replay, done.on_hand) == (True, after_count), c
    with pytest.raises(errors.CorrectionIdReused):
        await correct(event_id, "delivery-1", "CHAIN", "west", adjust_by=5, reason=DELIVERY,
                      operator="olga")  # fmt: skip
    assert await store.read.outbox(event_id) == []  # replays record nothing
    # The rebuilt event sells on and corrects on; the writer mirrors it after the ledger's last
    # decision number.
    await store.claim(event_id, "eve", "cart-eve", lines=[StockLine("TUBE", 4)])
    late = await correct(event_id, "count-0", "TUBE", "west", set_to=6, reason="cycle count",
                         operator="olga")  # fmt: skip
    assert (late.replay, late.on_hand, late.available) == (False, 6, 2)
    await sale.audit_ok()
    await writer.step(event_id)  # the writer notices the new outbox (NOGROUP) and starts again
    await drain(writer, event_id)
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "select on_hand_before, on_hand_after, seq from stock_corrections "
            "where correction_id = 'count-0'"
        )
        last = await conn.fetchval("select max(seq) from decisions where decision_id not like "
                                   "'correction:count-0:%'")  # fmt: skip
        assert (row["on_hand_before"], row["on_hand_after"]) == (4, 6)
        assert row["seq"] > last
        assert await conn.fetchval("select count(*) from ledger_alerts") == 0


@dataclass
class Provider:
    """The provider's side for a sale paid through test callbacks: each captured charge's
    attempt holds its amount (the nightly run asks for nothing else on a clean sale)."""

    store: Store
    event_id: str

    async def entries(self) -> list[dict[str, Any]]:
        return [
            {
                "kind": "capture",
                "idempotency_key": c.key,
                "attempt_id": c.attempt_id,
                "amount": c.captured or c.amount,
                "event_id": self.event_id,
            }
            for c in await self.store.read.scan_charges(self.event_id)
            if c.state == ChargeState.CAPTURED
        ]

    async def money_movements(self) -> list[dict[str, Any]]:
        return await self.entries()

    async def get_attempt(self, attempt_id: str) -> None:
        return None


async def nightly(
    store: Store, pool: asyncpg.Pool, writer: LedgerWriter, event_id: str, grace_ms: int = 0
) -> list[tuple[str, str, str, bool]]:
    provider: Any = Provider(store, event_id)
    async with pool.acquire() as conn:
        report = await reconcile_event(
            store, conn, writer, await provider.entries(), event_id,
            provider=provider, grace_ms=grace_ms,
        )  # fmt: skip
    return [(d.cls, d.entity, d.detail, d.repaired) for d in report.discrepancies]


async def test_nightly_checks_stock_against_the_ledger_and_finds_a_drift(
    real_store: Store, pool: asyncpg.Pool
) -> None:
    store = real_store
    sale = await stock_sale(store)
    event_id = sale.event_id
    writer = writer_of(store, pool)
    await drain(writer, event_id)
    assert await nightly(store, pool, writer, event_id) == []
    # Decisions still on their way to the ledger (younger than the grace period) are counted
    # as the ledger will hold them: a sale going on is no difference.
    await buy(sale, "fay", "cart-fay", StockLine("TUBE", 2))
    await store.stock.correct(
        event_id, "delivery-2", "TUBE", "east", adjust_by=6, reason=DELIVERY, operator="olga"
    )
    assert await nightly(store, pool, writer, event_id, grace_ms=10**12) == []
    await drain(writer, event_id)
    # A drift planted in Redis's counters is found, with the figures, and never repaired.
    stock = store.key(event_id, "stock")
    await store.client.hincrby(stock, "CHAIN@east:on_hand", 2)
    await store.client.hincrby(stock, "TUBE@west:sold", -1)
    found = await nightly(store, pool, writer, event_id)
    assert found == [
        (
            "stock_mismatch",
            "CHAIN@east",
            "redis on_hand 6 sold 4; ledger corrections add up to 4, sold lines 4",
            False,
        ),
        (
            "stock_mismatch",
            "TUBE@west",
            "redis on_hand 4 sold 1; ledger corrections add up to 4, sold lines 2",
            False,
        ),
    ]
    assert await store.client.hget(stock, "CHAIN@east:on_hand") == "6"  # left for a person
