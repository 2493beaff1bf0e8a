"""The indexes across events the workers read (ADR 0051, engine/model/keys.py INDEXES): the
scripts put an event in the refund index when a refund falls due and in the watch index when a
charge is to be asked about, never later than that work; `event_reindex` sets every score
exactly; and on the server's clock the refund worker and provider reconciliation read their
index, not every event, setting right an event they found with nothing to do."""

import time

import pytest

from engine.model import errors, keys
from engine.model.keys import EVENT_KEYS, INDEXES
from engine.providers import SimulatorProvider
from engine.store import Store
from engine.store.scripts import Scripts
from engine.workers.looks import FULL_LOOK_S, Looks
from engine.workers.reconcile import ProviderReconciler
from engine.workers.refunds import RefundWorker
from tests.conftest import Sale, _drop_prefix, _real_client, new_prefix, open_sale
from tests.helpers import callback

T0 = 1_900_000_000_000


def index(store: Store, sale: Sale, kind: str) -> str:
    return store.keys(sale.event_id)[len(EVENT_KEYS) + INDEXES.index(kind)]


async def score(store: Store, sale: Sale, kind: str) -> float | None:
    found = await store.client.zscore(index(store, sale, kind), sale.event_id)
    return float(found) if found is not None else None


async def test_the_scripts_keep_the_watch_and_refund_indexes(store: Store) -> None:
    sale = await open_sale(store, 3, now_ms=T0)
    ev = sale.event_id
    await store.claim(ev, "ann", "h1")
    assert await score(store, sale, keys.WATCHES) is None
    await store.start_charge(ev, "h1", "ann", "c1", 100)  # CHARGING since T0
    assert await score(store, sale, keys.WATCHES) == T0
    await sale.at(T0 + 50)
    await callback(sale, "c1", "DECLINED")  # watched since its decline: no later score written
    assert await score(store, sale, keys.WATCHES) == T0
    await store.reindex(ev)
    assert await score(store, sale, keys.WATCHES) == T0 + 50  # exactly the decline now
    assert await score(store, sale, keys.REFUNDS) is None
    await store.claim(ev, "bob", "h2")
    await store.start_charge(ev, "h2", "bob", "c2", 100)
    await sale.at(T0 + 80)
    await store.release(ev, "h2", "bob")  # its payment can no longer win
    await callback(sale, "c2", "CAPTURED")  # captured after: refunded
    assert await score(store, sale, keys.REFUNDS) == T0 + 80
    await store.refund_result(ev, "c2", refunded=True)  # (sent by the API that decided it)
    await store.reindex(ev)
    assert await score(store, sale, keys.REFUNDS) is None
    await sale.audit_ok()


async def test_a_reindex_sets_every_index_right(store: Store) -> None:
    sale = await open_sale(store, 2, hold_ttl_ms=1_000, now_ms=T0)
    await store.claim(sale.event_id, "ann", "h1")
    for kind in INDEXES:  # scores far too early: a worker would look for nothing
        await store.client.zadd(index(store, sale, kind), {sale.event_id: 1})
    await store.reindex(sale.event_id)
    assert [await score(store, sale, kind) for kind in INDEXES] == [T0 + 1_000, None, None, None]
    with pytest.raises(errors.EventNotFound):
        await store.reindex("no-such-event")


@pytest.fixture
async def server_clock_store() -> Store:
    """Production scripts (the server's clock) on real Redis."""
    client = _real_client()
    store = Store(client, scripts=Scripts(client), prefix=new_prefix())
    await store.scripts.load_all()
    yield store  # type: ignore[misc]
    await _drop_prefix(client, store.prefix)
    await client.aclose()


@pytest.mark.redis
async def test_the_workers_read_their_index_and_set_right_what_they_found_idle(
    server_clock_store: Store,
) -> None:
    """On the server's clock, after the first pass's look at every event: the refund worker and
    reconciliation read only the events their index names; an event named with nothing to do
    (a score left early) is reindexed out; an event whose entry was lost waits for the next look
    at every event."""
    store = server_clock_store
    stale = await open_sale(store, 1)  # in both indexes, with nothing to do
    lost = await open_sale(store, 1)
    for kind in (keys.REFUNDS, keys.WATCHES):
        await store.client.zadd(index(store, stale, kind), {stale.event_id: 1})
    await store.claim(lost.event_id, "ann", "h1")
    await store.start_charge(lost.event_id, "h1", "ann", "c1", 100)
    await store.client.zrem(index(store, lost, keys.WATCHES), lost.event_id)  # an entry lost
    provider = SimulatorProvider("http://127.0.0.1:9")  # never called: nothing is due to it
    refunds, reconcile = (
        RefundWorker(store, provider),
        ProviderReconciler(store, provider, stale_ms=3_600_000),
    )
    for worker in (refunds, reconcile):
        worker.looks.full_look_at = time.monotonic()  # just looked at every event
    await refunds.run_once()
    await reconcile.run_once()
    assert await score(store, stale, keys.REFUNDS) is None
    assert await score(store, stale, keys.WATCHES) is None
    now = await store.read.server_time_ms()
    watches = Looks(store, keys.WATCHES)
    watches.full_look_at = time.monotonic()
    assert lost.event_id not in (await watches.events(now)).events  # the index lost it ...
    watches.full_look_at -= FULL_LOOK_S
    assert (await watches.events(now)).events == [lost.event_id]  # ... the look at every event has
    await provider.aclose()
