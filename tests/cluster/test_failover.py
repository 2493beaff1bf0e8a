"""A primary killed during a burst of claims, and an event's slot moved to another primary
mid-sale, on a private cluster (ADR 0030). Every answer a client was given is checked
afterwards against what the cluster holds, with and without waiting for replicas."""

import asyncio
import random
import time
from dataclasses import dataclass, field

import pytest

from engine.gate.claims import GatedClaims
from engine.gate.soldout import SoldOutMemory
from engine.model import errors, keys
from engine.store import Store
from loadtest.devstack.cluster import LocalCluster
from tests.cluster.conftest import close_store, cluster_store
from tests.conftest import open_sale
from tests.helpers import wait_until

pytestmark = [pytest.mark.redis, pytest.mark.cluster, pytest.mark.slow]

T0 = 1_900_000_000_000


@dataclass
class Told:
    """What the clients were told: hold id -> seat, and refusals."""

    held: dict[str, str] = field(default_factory=dict)
    sold_out: int = 0
    retries: int = 0
    not_found: int = 0  # event_not_found while the failover settled (see below)
    last_error: str = ""


async def buyer(
    claims: GatedClaims, event_id: str, i: int, told: Told, deadline: float, spread_s: float = 0.0
) -> None:
    """Claims until told something, retrying an outage with the same key (idempotent); starts
    within `spread_s` (seeded by `i`), so that claims go on while nodes fail or move."""
    await asyncio.sleep(random.Random(i).uniform(0, spread_s))
    while time.monotonic() < deadline:
        try:
            got = await claims.claim(event_id, f"u{i}", f"k{i}")
        except errors.SoldOut:
            told.sold_out += 1
            return
        except errors.StoreUnavailable as exc:
            told.retries += 1
            told.last_error = repr(exc)[:300]
            await asyncio.sleep(0.05)
            continue
        except errors.EventNotFound:
            # Seen once in many runs, right after the old primary came back empty as a replica:
            # a call answered by a node that did not have the event yet. Asked again; counted.
            told.not_found += 1
            await asyncio.sleep(0.05)
            continue
        told.held[got.hold_id] = got.listing
        return
    raise AssertionError(f"buyer {i} was never answered; last: {told.last_error}")


async def crowd(
    store: Store,
    event_id: str,
    n: int,
    *,
    spread_s: float,
    until_held: int,
    memory: SoldOutMemory | None = None,
) -> tuple[Told, list[asyncio.Task[None]]]:
    """`n` buyers starting within `spread_s` (through the gate of `memory`, if any); returns
    once `until_held` were told they hold."""
    told, claims = Told(), GatedClaims(store, memory)
    deadline = time.monotonic() + 60
    tasks = [
        asyncio.create_task(buyer(claims, event_id, i, told, deadline, spread_s)) for i in range(n)
    ]
    await wait_until(lambda: len(told.held) >= until_held, timeout_s=20)
    return told, tasks


async def lost_answers(store: Store, event_id: str, told: Told) -> list[str]:
    lost = []
    for hold_id, seat in told.held.items():
        try:
            hold = await store.read.hold(event_id, hold_id)
        except errors.HoldNotFound:
            lost.append(hold_id)
            continue
        if hold.listing != seat:
            lost.append(hold_id)
    return lost


# The variant without WAIT shows what is lost. It once stalled about one run in four: the burst
# ran on a cluster whose replicas had not begun their first copy (LocalCluster called it ok while
# they were still primaries without slots, and their copy waited 5 s), so the frozen replica was
# promoted empty and every claim after the failover read event_not_found for a minute.
@pytest.mark.parametrize(
    "wait_replicas", [pytest.param(0, id="no-wait"), pytest.param(1, id="wait-1")]
)
async def test_a_primary_killed_mid_burst(
    private_cluster: LocalCluster, wait_replicas: int
) -> None:
    """The event's replica is frozen and cut off for a second while claims go on (it falls
    behind, as an asynchronous replica may), then its primary is killed and the replica takes
    over. Without
    WAIT, claims answered during that second are gone; with WAIT 1 none was answered before
    the replica had it (they were retried), so every answer is still true."""
    store = await cluster_store(private_cluster.url, wait_replicas=wait_replicas)
    try:
        sale = await open_sale(store, 300, now_ms=T0)
        slot = keys.slot_of(sale.event_id)
        told, tasks = await crowd(store, sale.event_id, 600, spread_s=6.0, until_held=60)
        primary = private_cluster.owner(slot)
        replica = private_cluster.replica_of(primary)
        private_cluster.pause(replica)
        private_cluster.cut_replicas(primary)  # what is written from now on is on no replica
        await asyncio.sleep(1.0)
        private_cluster.kill(primary)
        private_cluster.resume(replica)
        new = await asyncio.to_thread(private_cluster.wait_failover, slot, primary)
        # The old primary comes back as the new one's replica (WAIT needs a replica to answer).
        await asyncio.to_thread(private_cluster.restart, primary)
        await asyncio.gather(*tasks)
        assert new is replica  # the frozen replica took over
        lost = await lost_answers(store, sale.event_id, told)
        if wait_replicas:
            assert lost == [], f"{len(lost)} answered claims lost with WAIT 1"
            assert told.retries > 0  # answers waited for a replica, then were asked again
        else:
            assert lost, "the frozen replica missed nothing: the test proved nothing"
        await sale.audit_ok()  # whatever was lost, nothing is sold twice or counted wrong
        avail = await store.read.availability(sale.event_id)
        assert avail.free + avail.held == 300
        print(f"wait={wait_replicas}: told {len(told.held)} held, {told.sold_out} sold out, "
              f"{told.retries} retries, {told.not_found} not found, "
              f"{len(lost)} answered claims lost")  # fmt: skip
    finally:
        await close_store(store)
        await asyncio.to_thread(private_cluster.wait_ok)


async def test_moving_an_events_slot_mid_sale(private_cluster: LocalCluster) -> None:
    """Claims run while the event's slot moves to another primary, key batch by key batch
    (ASK, TRYAGAIN, then MOVED): every seat sold once, every answer true afterwards; the
    sold-out memory loses its subscription with the slot and is renewed on the new owner."""
    store = await cluster_store(private_cluster.url)
    memory = SoldOutMemory(store.client, store.prefix, ttl_s=30.0)
    claims = GatedClaims(store, memory)
    await memory.start()
    try:
        sale = await open_sale(store, 120, now_ms=T0)
        slot = keys.slot_of(sale.event_id)
        told, tasks = await crowd(
            store, sale.event_id, 200, spread_s=3.0, until_held=30, memory=memory
        )
        src = private_cluster.owner(slot)
        dst = next(n for n in private_cluster.nodes if n.port in private_cluster.primary_ports()
                   and n is not src)  # fmt: skip
        await asyncio.to_thread(private_cluster.migrate_slot, slot, dst, 5, 0.01)
        await asyncio.gather(*tasks)
        assert private_cluster.owner(slot) is dst
        assert len(told.held) == 120 and told.sold_out == 80
        assert await lost_answers(store, sale.event_id, told) == []
        await sale.audit_ok()
        # Sold out on the new owner: remembered again; a seat back is heard from there.
        with pytest.raises(errors.SoldOut):
            await claims.claim(sale.event_id, "late", "late-0")
        await wait_until(lambda: sale.event_id in memory._events, timeout_s=5)
        hold_id, _seat = next(iter(told.held.items()))
        owner = (await store.read.hold(sale.event_id, hold_id)).login
        await store.release(sale.event_id, hold_id, owner)
        await wait_until(lambda: sale.event_id not in memory._events, timeout_s=5)
        assert (await claims.claim(sale.event_id, "late", "late-1")).listing
    finally:
        await memory.stop()
        await close_store(store)
