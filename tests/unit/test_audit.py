"""engine/model/audit.py: each invariant's check catches a planted violation of it, by kind, and a
clean event has none (fakeredis: no network)."""

from collections.abc import Awaitable, Callable

import orjson
import pytest

from engine.model.audit import Invariant
from engine.model.event_config import EventConfig
from engine.model.keys import EVENT_KEYS
from engine.model.stock_lines import SkuSpec, StockLine
from engine.store import Store
from tests.conftest import Sale, open_sale
from tests.helpers import callback

T0 = 1_900_000_000_000


async def sold_and_held(store: Store) -> Sale:
    """s00000 sold to h1 (charge c1), s00001 held by h2, s00002 free."""
    sale = await open_sale(store, 3, now_ms=T0)
    await store.claim(sale.event_id, "alice", "h1")
    await store.start_charge(sale.event_id, "h1", "alice", "c1", 100)
    await callback(sale, "c1", "CAPTURED")
    await store.claim(sale.event_id, "bob", "h2")
    return sale


async def _json_set(sale: Sale, name: str, ident: str, **changes: object) -> None:
    key = _key(sale, name)
    raw = orjson.loads(await sale.store.client.hget(key, ident))
    raw.update(changes)
    await sale.store.client.hset(key, ident, orjson.dumps(raw))


def _key(sale: Sale, name: str) -> str:
    return sale.store.keys(sale.event_id)[EVENT_KEYS.index(name)]


async def _unwatched_charge(sale: Sale) -> None:
    await sale.store.start_charge(sale.event_id, "h2", "bob", "c2", 100)
    await sale.store.client.zrem(_key(sale, "watch"), "c2")


Plant = Callable[[Sale], Awaitable[object]]
PLANTS: list[tuple[str, Plant, Invariant]] = [
    ("a live hold out of the deadline index",
     lambda s: s.store.client.zrem(_key(s, "deadlines"), "h2"), Invariant.TIMERS_INDEXED),
    ("a charge in flight out of the watch index", _unwatched_charge, Invariant.TIMERS_INDEXED),
    ("a counter that drifted",
     lambda s: s.store.client.hincrby(_key(s, "event"), "sold", 1), Invariant.COUNTERS_AGREE),
    ("a sold seat also free",
     lambda s: s.store.client.zadd(_key(s, "free"), {"s00000": 0}), Invariant.SEAT_MAP),
    ("two holds sold the same seat",
     lambda s: _json_set(s, "holds", "h2", state="CONFIRMED", seat="s00000"),
     Invariant.NEVER_OVERSELL),
    ("an owner entry naming the wrong state",
     lambda s: s.store.client.hset(_key(s, "owners"), "s00001", "S:h2"), Invariant.OWNERS_AGREE),
    ("a sold seat whose winner is not captured",
     lambda s: _json_set(s, "charges", "c1", state="DECLINED"), Invariant.SEAT_HAS_MONEY),
    ("captured money that wins no hold",
     lambda s: _json_set(s, "holds", "h1", winner=""), Invariant.MONEY_HAS_SEAT),
    ("a second terminal record",
     lambda s: s.store.client.xadd(
         _key(s, "outbox"), {"kind": "hold", "id": "h1", "terminal": "1", "decision_id": "x"}
     ),
     Invariant.ONE_TERMINAL_RECORD),
    ("a sale the per-login cap does not count",
     lambda s: s.store.client.hset(_key(s, "quota"), "bought:alice", 0), Invariant.BOUGHT_COUNTED),
    ("a sale counted for a login that bought nothing",
     lambda s: s.store.client.hincrby(_key(s, "quota"), "bought:bob", 1), Invariant.BOUGHT_COUNTED),
]  # fmt: skip


async def test_a_clean_event_has_no_violation(fake_store: Store) -> None:
    sale = await sold_and_held(fake_store)
    report = await fake_store.read.audit(sale.event_id)
    assert report.ok, report.violations
    assert (report.counts["sold"], report.counts["held"], report.counts["free"]) == (1, 1, 1)


@pytest.mark.parametrize(("what", "plant", "kind"), PLANTS, ids=[p[0] for p in PLANTS])
async def test_each_check_catches_its_own_violation(
    fake_store: Store, what: str, plant: Plant, kind: Invariant
) -> None:
    sale = await sold_and_held(fake_store)
    await plant(sale)
    report = await fake_store.read.audit(sale.event_id)
    assert report.of(kind), f"{what}: {report.violations}"


async def stock_sold_and_held(store: Store) -> Sale:
    """A stock event: 2 CHAIN@east sold to h1, 1 held by h2, 2 available."""
    await store.stock.create_event(
        "shop",
        ["east"],
        [SkuSpec("CHAIN", 100, {"east": 5})],
        EventConfig(hold_ttl_ms=60_000, quarantine_ms=60_000),
    )
    sale = Sale(store, "shop")
    await sale.at(T0)
    await store.open_sale("shop")
    await store.claim("shop", "alice", "h1", lines=[StockLine("CHAIN", 2)])
    await store.start_charge("shop", "h1", "alice", "c1", 200)
    await callback(sale, "c1", "CAPTURED")
    await store.claim("shop", "bob", "h2", lines=[StockLine("CHAIN", 1)])
    return sale


STOCK_PLANTS: list[tuple[str, Plant, Invariant]] = [
    ("on hand that does not add up",
     lambda s: s.store.client.hincrby(_key(s, "stock"), "CHAIN@east:on_hand", 1),
     Invariant.STOCK_AGREES),
    ("units sold that no hold owns",
     lambda s: _json_set(s, "holds", "h1", seat="CHAIN@east*1"), Invariant.STOCK_AGREES),
    ("a stock counter below zero",
     lambda s: s.store.client.hset(_key(s, "stock"), "CHAIN@east:available", -1),
     Invariant.STOCK_AGREES),
    ("a sale the cap counts by seats, not units",
     lambda s: s.store.client.hset(_key(s, "quota"), "bought:alice", 1), Invariant.BOUGHT_COUNTED),
]  # fmt: skip


async def test_a_clean_stock_event_has_no_violation(fake_store: Store) -> None:
    sale = await stock_sold_and_held(fake_store)
    report = await fake_store.read.audit(sale.event_id)
    assert report.ok, report.violations
    counts = report.counts
    assert (counts["seats"], counts["sold"], counts["held"], counts["free"]) == (5, 2, 1, 2)


@pytest.mark.parametrize(("what", "plant", "kind"), STOCK_PLANTS, ids=[p[0] for p in STOCK_PLANTS])
async def test_each_stock_check_catches_its_own_violation(
    fake_store: Store, what: str, plant: Plant, kind: Invariant
) -> None:
    sale = await stock_sold_and_held(fake_store)
    await plant(sale)
    report = await fake_store.read.audit(sale.event_id)
    assert report.of(kind), f"{what}: {report.violations}"
