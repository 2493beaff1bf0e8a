"""Presale access codes in the ledger (ADR 0049): each batch of codes is an outbox record the
writer keeps (every code with its window and terms), each hold that ended having spent a code
is kept with how it ended, and a rebuild after Redis lost the event puts the codes back with
the uses of the sales: the live holds were lost, their uses with them. Real Redis and real
PostgreSQL, the test clock."""

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from engine.model import errors
from engine.model.event_config import EventConfig
from engine.store import Store
from engine.store.presales import Presale
from persistence.rebuild import rebuild
from persistence.writer import LedgerWriter
from tests.conftest import Sale, seats
from tests.helpers import callback
from tests.pg import migrated_pool

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


@pytest.fixture
async def pool() -> AsyncIterator[asyncpg.Pool]:
    async with migrated_pool() as p:
        yield p


async def test_the_ledger_keeps_the_codes_and_a_rebuild_puts_them_back_with_the_sales_uses(
    real_store: Store, pool: asyncpg.Pool
) -> None:
    store = real_store
    now = await store.read.server_time_ms()
    t0 = now + 3_600_000
    fans = Presale("fans", now - 60_000, t0)
    event_id = f"ps-{uuid.uuid4().hex[:8]}"
    await store.create_event(
        event_id, seats(5), EventConfig(hold_ttl_ms=480_000, quarantine_ms=900_000)
    )
    sale = Sale(store, event_id)
    await sale.at(now)
    await store.open_sale(event_id, t0)
    terms = {"per_login": 1, "expires_ms": t0}
    await store.presales.add(event_id, fans, ["FAN1"], uses=2, batch_id="b1", **terms)
    await store.presales.add(event_id, fans, ["FAN2"], uses=1, batch_id="b2", **terms)
    await store.claim(event_id, "ann", "a1", access_code="FAN1")
    await store.start_charge(event_id, "a1", "ann", "pay-a1", 100)
    assert (await callback(sale, "pay-a1", "CAPTURED")).decision == "CONFIRMED"
    await store.claim(event_id, "bob", "b1", access_code="FAN1")  # live at the loss
    await store.claim(event_id, "cat", "c1", access_code="FAN2")
    await store.release(event_id, "c1", "cat")

    writer = LedgerWriter(store.client, pool, prefix=store.prefix, consumer="t", batch_max=5)
    while await writer.step(event_id):
        pass
    async with pool.acquire() as conn:
        codes = await conn.fetch(
            "select code, presale, opens_at_ms, closes_at_ms, uses, per_login, expires_ms "
            "from presale_codes where event_id = $1 order by code",
            event_id,
        )
        uses = await conn.fetch(
            "select hold_id, code, login, to_state from presale_code_uses where event_id = $1 "
            "order by hold_id",
            event_id,
        )
    assert [tuple(r) for r in codes] == [
        ("FAN1", "fans", fans.opens_at_ms, t0, 2, 1, t0),
        ("FAN2", "fans", fans.opens_at_ms, t0, 1, 1, t0),
    ]
    assert [tuple(r) for r in uses] == [
        ("a1", "FAN1", "ann", "CONFIRMED"),
        ("c1", "FAN2", "cat", "RELEASED"),
    ]

    await store.restore.drop_event(event_id)  # Redis lost the event
    async with pool.acquire() as conn:
        report = await rebuild(store, conn, event_id)
    assert report.codes == 2 and report.sold == 1

    assert await store.presales.windows(event_id) == [fans]
    assert {c.code: c.used for c in await store.presales.codes(event_id)} == {
        "FAN1": 1,  # ann's sale; bob's live hold went with the loss
        "FAN2": 0,
    }
    await sale.at(now + 1_000)
    with pytest.raises(errors.AccessCodeLimit):  # ann bought with FAN1 already
        await store.claim(event_id, "ann", "a2", access_code="FAN1")
    await store.claim(event_id, "dan", "d1", access_code="FAN1")
    with pytest.raises(errors.AccessCodeUsedUp):
        await store.claim(event_id, "eve", "e1", access_code="FAN1")
    with pytest.raises(errors.AccessCodeRequired):
        await store.claim(event_id, "eve", "e1")
    await sale.audit_ok()
