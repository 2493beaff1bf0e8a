"""Merchant webhooks from the outbox through the ledger (ADR 0024), on real Redis and real
PostgreSQL, in process: the real scripts decide, the ledger writer mirrors and fans out, the
sender POSTs to a local receiver that verifies each delivery as a merchant would. Over HTTP,
with the admin API and the processes of the stack: test_webhooks_http.py; the sender killed
mid-delivery: tests/fault/test_webhook_sender_kill.py."""

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import pytest

from api.webhooks_db import SQL, WebhookDb, WebhookDbSettings
from engine.model import keys
from engine.model import webhooks as wh
from engine.model.ledger_progress import LEDGER_GROUP
from engine.store import Store
from persistence.settings import SenderSettings
from persistence.webhook_sender import WebhookSender
from persistence.writer import LedgerWriter
from tests.conftest import Sale, open_sale
from tests.helpers import callback, reversal
from tests.pg import private_database
from tests.receiver import Receiver, verify

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

QUICK = SenderSettings(
    timeout_ms=2_000, batch_max=8, interval_ms=20, backoff_ms=50, backoff_max_ms=300
)


@pytest.fixture
async def ledger_dsn() -> AsyncIterator[str]:
    from persistence.migrate import migrate

    async with private_database() as dsn:
        conn = await asyncpg.connect(dsn)
        await migrate(conn)
        await conn.close()
        yield dsn


@pytest.fixture
async def pool(ledger_dsn: str) -> AsyncIterator[asyncpg.Pool]:
    from persistence.database import create_pool

    p = await create_pool(ledger_dsn, size_max=4, timeout_s=5)
    yield p
    await p.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver().up()
    yield r
    r.down()


async def add_endpoint(
    pool: asyncpg.Pool, url: str, types: tuple[str, ...] = wh.EVENT_TYPES
) -> tuple[str, str]:
    """(endpoint id, secret) of a new endpoint, written as the admin route writes it."""
    secret = wh.new_secret()
    async with pool.acquire() as conn:
        endpoint_id = f"ep_{await conn.fetchval('select count(*) from webhook_endpoints')}"
        await conn.fetchrow(SQL["create_endpoint"], endpoint_id, url, "", list(types), secret, 100)
    return endpoint_id, secret


async def bought(sale: Sale, n: int) -> None:
    await sale.store.claim(sale.event_id, f"u{n}", f"h{n}")
    await sale.store.start_charge(sale.event_id, f"h{n}", f"u{n}", f"c{n}", 4500)
    await callback(sale, f"c{n}", "CAPTURED", attempt=f"att-{sale.event_id}-{n}")


async def mirror(store: Store, pool: asyncpg.Pool, event_id: str, name: str = "w") -> None:
    writer = LedgerWriter(store.client, pool, prefix=store.prefix, consumer=name, batch_max=7)
    while await writer.step(event_id):
        pass


async def deliveries(pool: asyncpg.Pool, endpoint_id: str = "") -> list[Any]:
    async with pool.acquire() as conn:
        return list(
            await conn.fetch(
                "select * from webhook_deliveries where $1 = '' or endpoint_id = $1 "
                "order by delivery_id",
                endpoint_id,
            )
        )


async def settle(sender: WebhookSender, pool: asyncpg.Pool, timeout_s: float = 20.0) -> None:
    """Run the sender until no delivery is pending."""
    for _ in range(int(timeout_s / 0.02)):
        await sender.run_once()
        if all(d["status"] != "pending" for d in await deliveries(pool)):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("deliveries still pending")


async def test_a_sale_its_refund_and_its_exception_reach_the_merchant_signed(
    real_store: Store, pool: asyncpg.Pool, receiver: Receiver
) -> None:
    endpoint_id, secret = await add_endpoint(pool, receiver.url)
    sale = await open_sale(real_store, 4)
    await bought(sale, 1)
    await reversal(sale, "c1", "REFUND", event_id="pev-refund-1")  # the provider's dashboard
    await real_store.revoke_hold(sale.event_id, "h1", "admin")
    # Money that never bought anything (released while paying, then captured): given back,
    # never told as an order.
    await real_store.claim(sale.event_id, "u2", "h2")
    await real_store.start_charge(sale.event_id, "h2", "u2", "c2", 4500)
    await real_store.release(sale.event_id, "h2", "u2")
    await callback(sale, "c2", "CAPTURED", attempt=f"att-{sale.event_id}-2")
    await real_store.refund_result(sale.event_id, "c2", refunded=True)
    await mirror(real_store, pool, sale.event_id)
    sender = WebhookSender(pool, QUICK)
    await settle(sender, pool)
    got = {p["type"]: p for p in receiver.verified(secret)}
    assert sorted(got) == sorted(
        [wh.ORDER_CONFIRMED, wh.ORDER_REFUNDED, wh.EXCEPTION_OPENED, wh.EXCEPTION_RESOLVED]
    )
    confirmed = got[wh.ORDER_CONFIRMED]["data"]
    assert (confirmed["hold_id"], confirmed["charge_id"], confirmed["buyer"]) == ("h1", "c1", "u1")
    assert (confirmed["amount"], confirmed["currency"], confirmed["seat_ids"]) == (
        4500,
        "EUR",
        ["s00000"],
    )
    assert got[wh.ORDER_REFUNDED]["data"]["refunded_by"] == "provider"
    assert got[wh.EXCEPTION_RESOLVED]["data"]["resolution"] == "revoked"
    ids = {r.webhook_id for r in receiver.requests()}
    rows = await deliveries(pool, endpoint_id)
    assert ids == {d["message_id"] for d in rows} and len(rows) == 4
    assert all(
        (d["status"], d["attempts"], d["last_status"]) == ("delivered", 1, 200) for d in rows
    )
    # The writer replaying the whole stream (a crash before its ack) writes no delivery twice.
    stream = keys.event_key(sale.event_id, "outbox", real_store.prefix)
    await real_store.client.xgroup_destroy(stream, LEDGER_GROUP)
    await mirror(real_store, pool, sale.event_id, "replay")
    assert len(await deliveries(pool)) == 4


async def test_an_endpoint_down_for_a_while_gets_everything_once_back(
    real_store: Store, pool: asyncpg.Pool, receiver: Receiver
) -> None:
    """Refusing connections, then answering 500: every notification is retried with backoff and
    reaches the merchant once it answers 2xx; every webhook-id at least once, the set complete."""
    _endpoint_id, secret = await add_endpoint(pool, receiver.url)
    receiver.down()
    sale = await open_sale(real_store, 12)
    for n in range(12):
        await bought(sale, n)
    await mirror(real_store, pool, sale.event_id)
    expected = {d["message_id"] for d in await deliveries(pool)}
    assert len(expected) == 12
    stop = asyncio.Event()
    sender = WebhookSender(pool, QUICK)
    task = asyncio.create_task(sender.run(stop))
    try:
        await wait_for(pool, lambda ds: all(d["attempts"] >= 2 for d in ds))  # refused, twice
        assert {d["last_error"].split(":")[0] for d in await deliveries(pool)} == {"ConnectError"}
        receiver.status = 500
        receiver.up()
        await wait_for(pool, lambda ds: all(d["last_status"] == 500 for d in ds))
        assert receiver.ids() and not any(
            d["status"] == "delivered" for d in await deliveries(pool)
        )
        receiver.status = 200
        await wait_for(pool, lambda ds: all(d["status"] == "delivered" for d in ds))
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    assert set(receiver.ids()) == expected  # complete, each at least once
    for r in receiver.requests():
        verify(r, secret)
    assert sender.stats.delivered == 12 and sender.stats.not_delivered >= 24


async def wait_for(pool: asyncpg.Pool, check: Any, timeout_s: float = 20.0) -> None:
    for _ in range(int(timeout_s / 0.05)):
        if check(await deliveries(pool)):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not reached: {[dict(d) for d in await deliveries(pool)][:3]}")


async def test_a_delivery_past_its_age_fails_and_a_replay_sends_it_again(
    real_store: Store, pool: asyncpg.Pool, ledger_dsn: str, receiver: Receiver
) -> None:
    endpoint_id, secret = await add_endpoint(pool, receiver.url)
    receiver.status = 503
    sale = await open_sale(real_store, 2)
    await bought(sale, 1)
    await mirror(real_store, pool, sale.event_id)
    sender = WebhookSender(pool, dataclasses.replace(QUICK, max_age_ms=200))
    await settle(sender, pool)
    [failed] = await deliveries(pool)
    assert (failed["status"], failed["last_status"]) == ("failed", 503)
    # How many attempts fit in 200 ms depends on the machine's load (one, on a busy one): the
    # retries and their backoff are the claim of the test above; this one is the age.
    attempts = failed["attempts"]
    assert attempts >= 1
    receiver.status = 200
    api = WebhookDb(WebhookDbSettings(pg_dsn=ledger_dsn))
    try:
        assert await api.fetchval("replay_failed", endpoint_id, 0) == 1
        await settle(sender, pool)
        [delivered] = await deliveries(pool)
        assert (delivered["status"], delivered["attempts"]) == ("delivered", attempts + 1)
        # Replaying one delivery sends it again, same webhook-id, whatever its status.
        replayed = await api.fetchrow("replay_delivery", endpoint_id, delivered["delivery_id"])
        assert replayed["status"] == "pending"
        await settle(sender, pool)
    finally:
        await api.close()
    # Every failed attempt, then the two replays: one notification, one webhook-id throughout.
    assert receiver.ids() == [failed["message_id"]] * (attempts + 2)
    assert {verify(r, secret)["type"] for r in receiver.requests()} == {wh.ORDER_CONFIRMED}


async def test_deliveries_are_watched_per_endpoint_in_the_metrics(
    real_store: Store, pool: asyncpg.Pool, receiver: Receiver
) -> None:
    """A dead merchant endpoint shows: its pending deliveries, the attempts they took and the
    age of the oldest, beside a healthy endpoint's delivered ones (the series the alert rules
    of docs/deploy.md read)."""
    from prometheus_client import CollectorRegistry

    from persistence.metrics import WebhookMetrics

    dead, _ = await add_endpoint(pool, "http://127.0.0.1:9/gone")  # nothing listens there
    alive, _ = await add_endpoint(pool, receiver.url)
    sale = await open_sale(real_store, 2)
    await bought(sale, 1)
    await mirror(real_store, pool, sale.event_id)
    registry = CollectorRegistry()
    sender = WebhookSender(pool, QUICK, metrics=WebhookMetrics(registry))
    for _ in range(3):  # the live endpoint's delivery lands; the dead one's is retried
        await sender.run_once()
        await asyncio.sleep(0.06)
    await sender.show_figures()

    def value(name: str, **labels: str) -> float:
        got = registry.get_sample_value(name, labels)
        assert got is not None, (name, labels)
        return got

    assert value("onsale_webhook_deliveries", endpoint=alive, status="delivered") == 1
    assert value("onsale_webhook_deliveries", endpoint=dead, status="pending") == 1
    assert value("onsale_webhook_attempts", endpoint=dead) >= 2
    assert value("onsale_webhook_oldest_pending_seconds", endpoint=dead) > 0
    assert value("onsale_webhook_oldest_pending_seconds", endpoint=alive) == 0
    assert value("onsale_webhook_endpoint_enabled", endpoint=dead) == 1


async def test_a_disabled_endpoint_gets_nothing_new_and_types_filter(
    real_store: Store, pool: asyncpg.Pool, ledger_dsn: str, receiver: Receiver
) -> None:
    everything, _ = await add_endpoint(pool, receiver.url)
    refunds_only, _ = await add_endpoint(pool, receiver.url, (wh.ORDER_REFUNDED,))
    sale = await open_sale(real_store, 4)
    await bought(sale, 1)
    await mirror(real_store, pool, sale.event_id)
    api = WebhookDb(WebhookDbSettings(pg_dsn=ledger_dsn))
    try:
        assert (await api.fetchrow("set_enabled", everything, False))["enabled"] is False
    finally:
        await api.close()
    await bought(sale, 2)
    await reversal(sale, "c1", "REFUND")
    await mirror(real_store, pool, sale.event_id)
    sender = WebhookSender(pool, QUICK)
    for _ in range(10):
        await sender.run_once()
    sent = {(d["endpoint_id"], d["event_type"]): d["status"] for d in await deliveries(pool)}
    # Before it was disabled: written, but it waits (nothing is sent to a disabled endpoint).
    assert sent == {
        (everything, wh.ORDER_CONFIRMED): "pending",
        (refunds_only, wh.ORDER_REFUNDED): "delivered",
    }
    assert [r.payload["type"] for r in receiver.requests()] == [wh.ORDER_REFUNDED]


async def test_a_merchant_slower_than_the_timeout_is_tried_again(
    real_store: Store, pool: asyncpg.Pool, receiver: Receiver
) -> None:
    await add_endpoint(pool, receiver.url)
    receiver.delay_s = 1.0
    sale = await open_sale(real_store, 1)
    await bought(sale, 1)
    await mirror(real_store, pool, sale.event_id)
    sender = WebhookSender(pool, dataclasses.replace(QUICK, timeout_ms=300))
    assert sender.lease_ms == 600  # the timeout, and as much again
    await sender.run_once()
    [late] = await deliveries(pool)
    assert (late["status"], late["attempts"], late["last_status"]) == ("pending", 1, None)
    assert "Timeout" in late["last_error"]
    assert len(receiver.requests()) == 1  # it did arrive: the merchant dedupes the next one


async def test_the_delivery_log_keeps_done_deliveries_for_its_retention_only(
    real_store: Store, pool: asyncpg.Pool, receiver: Receiver
) -> None:
    """Delivered and failed deliveries older than the retention are pruned; pending ones, and
    recent ones, stay; a decision replayed after its delivery was pruned goes out again with
    the same webhook-id (receivers deduplicate by it)."""
    await add_endpoint(pool, receiver.url)
    sale = await open_sale(real_store, 3)
    for n in (1, 2, 3):
        await bought(sale, n)
    await mirror(real_store, pool, sale.event_id)
    sender = WebhookSender(pool, dataclasses.replace(QUICK, log_retention_ms=3_600_000))
    await sender.run_once()
    rows = sorted(await deliveries(pool), key=lambda d: d["delivery_id"])
    assert [d["status"] for d in rows] == ["delivered"] * 3
    first_message = rows[0]["message_id"]
    async with pool.acquire() as conn:  # one delivered long ago, one failed long ago, one pending
        await conn.execute(
            "update webhook_deliveries set delivered_at = now() - interval '2 hours' "
            "where delivery_id = $1", rows[0]["delivery_id"],
        )  # fmt: skip
        await conn.execute(
            "update webhook_deliveries set status = 'failed', delivered_at = null, "
            "last_attempt_at = now() - interval '2 hours' where delivery_id = $1",
            rows[1]["delivery_id"],
        )
        await conn.execute(
            "update webhook_deliveries set status = 'pending', delivered_at = null, "
            "created_at = now() - interval '2 hours', next_attempt_at = now() + interval '1 day' "
            "where delivery_id = $1", rows[2]["delivery_id"],
        )  # fmt: skip
    assert await sender.prune() == 2
    assert [d["delivery_id"] for d in await deliveries(pool)] == [rows[2]["delivery_id"]]
    assert sender.stats.pruned == 2
    # The writer mirrors the event again from the start: the pruned delivery is made again,
    # under the same webhook-id.
    async with pool.acquire() as conn:
        await conn.execute("delete from decisions where event_id = $1", sale.event_id)
    await real_store.client.xgroup_setid(
        keys.event_key(sale.event_id, "outbox", real_store.prefix), LEDGER_GROUP, "0"
    )
    await mirror(real_store, pool, sale.event_id, name="again")
    again = {d["message_id"] for d in await deliveries(pool)}
    assert first_message in again
