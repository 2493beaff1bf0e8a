"""The whole stack on a Redis Cluster (API, worker, ledger writer, provider simulator as
processes; ADR 0030): the purchase flow on events spread over every primary, then a primary
killed during a burst with payments, with and without waiting for replicas. Afterwards every
confirmation a buyer was told is checked against Redis, the ledger and the provider's own
records, and the nightly reconciliation of each event must come out clean."""

import asyncio
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import httpx
import pytest
from redis.crc import key_slot

from engine.config.settings import Settings
from engine.model import keys
from engine.providers import build_provider
from engine.store import Store
from loadtest.devstack.buyer import Answer, BuyerApi, Call
from loadtest.devstack.cluster import LocalCluster
from loadtest.devstack.stack import QUICK_SETTLE_ENV, LocalStack
from persistence.database import create_pool
from persistence.nightly import provider_entries, reconcile_event
from persistence.writer import LedgerWriter
from tests.integration.conftest import ADMIN
from tests.integration.test_money_integrity import ledger_dsn

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.cluster, pytest.mark.slow]
__all__ = ["ledger_dsn"]  # a fixture of test_money_integrity


def started(cluster: LocalCluster, dsn: str, log_dir: Path, **env: str) -> LocalStack:
    stack = LocalStack(
        redis_url=cluster.url,
        key_prefix=f"onsale:test:{uuid.uuid4().hex[:12]}",
        log_dir=log_dir,
        admin_token=ADMIN,
        ledger_dsn=dsn,
        extra_env={**QUICK_SETTLE_ENV, "ONSALE_REDIS_TIMEOUT_MS": "3000", **env},
    )
    stack.start()
    honest = {"decline_rate": 0.0, "fail_rate": 0.0, "late_rate": 0.0, "loss_rate": 0.0}
    httpx.put(f"{stack.sim_url}/v1/config", json=honest, timeout=5).raise_for_status()
    return stack


@pytest.fixture(scope="module")
def stack(
    private_cluster: LocalCluster, ledger_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalStack]:
    local = started(private_cluster, ledger_dsn, tmp_path_factory.mktemp("cluster-stack"))
    try:
        yield local
        assert local.alive(), f"a stack process died; logs in {local.log_dir}"
    finally:
        local.stop()


async def send(client: httpx.AsyncClient, call: Call) -> Answer:
    try:
        r = await client.request(call.method, call.path, json=call.json, headers=call.headers)
    except httpx.TransportError as exc:
        return Answer(0, f"transport:{type(exc).__name__}", {})
    return Answer.of(r.status_code, r.content)


async def until_answered(client: httpx.AsyncClient, call: Call, deadline: float) -> Answer:
    """A request sent again (same idempotency key) while the API answers 503 or not at all."""
    while True:
        answer = await send(client, call)
        if answer.status not in (0, 503) or time.monotonic() > deadline:
            return answer
        await asyncio.sleep(0.1)


@dataclass
class Buyer:
    name: str
    told: str = ""  # the last state the buyer read: CONFIRMED, EXPIRED, sold_out...
    hold_id: str = ""
    seats: list[str] = field(default_factory=list)
    paid: str = ""  # the charge start's answer


async def purchase(client: httpx.AsyncClient, event_id: str, buyer: Buyer, deadline: float) -> None:
    """Log in, claim, pay, and read the hold until it is final (what a buyer's page does)."""
    login = await until_answered(client, BuyerApi.login(buyer.name), deadline)
    api = BuyerApi(event_id, str(login.body["token"]))
    claimed = await until_answered(client, api.claim(key=f"c-{buyer.name}"), deadline)
    if claimed.status != 201:
        buyer.told = claimed.code
        return
    buyer.hold_id, buyer.seats = claimed.body["hold_id"], claimed.body["seat_ids"]
    paid = await until_answered(client, api.pay(buyer.hold_id, key=f"p-{buyer.name}"), deadline)
    buyer.paid = paid.code
    while time.monotonic() < deadline:
        seen = await send(client, api.hold(buyer.hold_id))
        if seen.status == 200:
            buyer.told = str(seen.body["state"])
            if buyer.told in ("CONFIRMED", "EXPIRED", "RELEASED", "REVOKED"):
                return
        await asyncio.sleep(0.2)


async def crowd(api_url: str, event_id: str, n: int, spread_s: float) -> list[Buyer]:
    buyers = [Buyer(f"b{i}-{uuid.uuid4().hex[:6]}") for i in range(n)]
    deadline = time.monotonic() + 60

    async def one(i: int, b: Buyer) -> None:
        await asyncio.sleep(spread_s * i / n)
        await purchase(client, event_id, b, deadline)

    async with httpx.AsyncClient(base_url=api_url, timeout=10) as client:
        await asyncio.gather(*(one(i, b) for i, b in enumerate(buyers)))
    return buyers


def event_on_each_primary(stack: LocalStack, cluster: LocalCluster, n_seats: int) -> list[str]:
    """Events created until every primary serves at least one."""
    events: list[str] = []
    ports: set[int] = set()
    while len(ports) < len(cluster.primary_ports()):
        event_id = f"cl-{uuid.uuid4().hex[:8]}"
        port = cluster.owner(key_slot(event_id.encode())).port
        if port in ports:
            continue
        stack.create_event(event_id, n_seats, price_minor=2500)
        events.append(event_id)
        ports.add(port)
    return events


async def nightly_clean(stack: LocalStack, dsn: str, event_id: str) -> None:
    """The nightly run on the event (through the deployment's own cluster client): no
    discrepancy left, the provider's net equal to the ledger's, the audit clean."""
    settings = Settings.from_env(stack.env())
    client = settings.redis_client()
    provider = build_provider(settings)
    pool = await create_pool(dsn, size_max=2, timeout_s=5)
    try:
        store = Store(client, prefix=stack.key_prefix, timeout_s=5)
        writer = LedgerWriter(client, pool, prefix=stack.key_prefix, consumer="n", batch_max=500)
        while await writer.step(event_id):
            pass
        entries = await provider_entries(provider)
        async with pool.acquire() as conn:
            report = await reconcile_event(
                store, conn, writer, entries, event_id, provider=provider, grace_ms=0
            )
        assert [d for d in report.discrepancies if not d.repaired] == [], report
        assert report.provider_net == report.expected_net, report
        audit = await store.read.audit(event_id)
        assert audit.ok, audit.violations
    finally:
        await provider.aclose()
        await pool.close()
        await client.aclose()


async def ledger_sales(dsn: str, event_id: str) -> dict[str, str]:
    """hold id -> its seats, for every hold the ledger holds as CONFIRMED."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT hold_id, seat_id FROM holds WHERE event_id = $1 AND state = 'CONFIRMED'",
            event_id,
        )
    finally:
        await conn.close()
    return {r["hold_id"]: r["seat_id"] for r in rows}


def test_the_purchase_flow_on_every_primary(
    stack: LocalStack, private_cluster: LocalCluster, ledger_dsn: str
) -> None:
    assert httpx.get(f"{stack.api_url}/readyz", timeout=5).status_code == 200
    events = event_on_each_primary(stack, private_cluster, 4)
    for event_id in events:
        buyers = asyncio.run(crowd(stack.api_url, event_id, 6, 0.5))
        told = sorted(b.told for b in buyers)
        assert told == ["CONFIRMED"] * 4 + ["sold_out"] * 2, [(b.told, b.paid) for b in buyers]
        sales = asyncio.run(ledger_sales(ledger_dsn, event_id))
        assert {b.hold_id for b in buyers if b.told == "CONFIRMED"} == set(sales)
        asyncio.run(nightly_clean(stack, ledger_dsn, event_id))
    listed = httpx.get(
        f"{stack.api_url}/v1/admin/events", headers=stack.admin_headers(), timeout=5
    ).json()
    assert set(events) <= {e["event_id"] for e in listed["events"]}


@pytest.mark.parametrize("wait_replicas", ["0", "1"], ids=["no-wait", "wait-1"])
def test_a_primary_killed_during_a_burst_with_payments(
    private_cluster: LocalCluster,
    ledger_dsn: str,
    tmp_path: Path,
    wait_replicas: str,
) -> None:
    local = started(private_cluster, ledger_dsn, tmp_path, ONSALE_REDIS_WAIT_REPLICAS=wait_replicas)
    try:
        event_id = f"fo-{uuid.uuid4().hex[:8]}"
        local.create_event(event_id, 30, price_minor=2500)
        slot = keys.slot_of(event_id)

        async def run() -> list[Buyer]:
            burst = asyncio.create_task(crowd(local.api_url, event_id, 60, 6.0))
            await asyncio.sleep(2.0)
            victim = private_cluster.kill_primary_of(slot)
            await asyncio.to_thread(private_cluster.wait_failover, slot, victim)
            await asyncio.to_thread(private_cluster.restart, victim)
            return await burst

        buyers = asyncio.run(run())
        confirmed = {b.hold_id: ",".join(b.seats) for b in buyers if b.told == "CONFIRMED"}
        assert confirmed, [b.told for b in buyers]
        # Every confirmation told is in the ledger with its seats; no seat is sold twice there.
        sales = asyncio.run(ledger_sales(ledger_dsn, event_id))
        assert {h: sales.get(h) for h in confirmed} == confirmed
        sold = [s for seats in sales.values() for s in seats.split(",")]
        assert len(sold) == len(set(sold)) <= 30
        asyncio.run(nightly_clean(local, ledger_dsn, event_id))
        assert local.alive(), f"a stack process died; logs in {local.log_dir}"
    finally:
        local.stop()
        private_cluster.wait_ok()
