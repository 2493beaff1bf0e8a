"""kill -9 of the webhook sender (the `onsale ledger` process, which runs it beside the writer)
while deliveries are in flight: the merchant had received them but the sender never recorded
the answers. Restarted, it sends them again once their lease passes: every notification reaches
the merchant, the interrupted ones twice under the same webhook-id, none lost (ADR 0024)."""

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import IO, Any

import asyncpg
import pytest

from api.webhooks_db import SQL
from engine.model import webhooks as wh
from engine.store import Store
from loadtest.devstack.stack import spare_port
from persistence.database import create_pool
from persistence.migrate import migrate
from tests.conftest import REDIS_URL, Sale, open_sale
from tests.helpers import callback
from tests.pg import private_database
from tests.receiver import Receiver, verify

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]

SALES = 24


@pytest.fixture
async def ledger_dsn() -> AsyncIterator[str]:
    async with private_database() as dsn:
        conn = await asyncpg.connect(dsn)
        await migrate(conn)
        await conn.close()
        yield dsn


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver().up()
    r.delay_s = 1.0  # a slow merchant: every attempt is in flight for a second
    yield r
    r.down()


@pytest.fixture
def log(tmp_path: Path) -> Iterator[IO[bytes]]:
    """The ledger processes' output, for a failure to show."""
    with open(tmp_path / "ledger.log", "ab") as out:
        yield out


async def start_ledger(store: Store, dsn: str, log: IO[bytes]) -> asyncio.subprocess.Process:
    env = {
        **os.environ,
        "ONSALE_REDIS_URL": REDIS_URL,
        "ONSALE_KEY_PREFIX": store.prefix,
        "ONSALE_PG_DSN": dsn,
        "ONSALE_LEDGER_METRICS_PORT": str(spare_port()),
        "ONSALE_LEDGER_CLAIM_IDLE_MS": "200",
        "ONSALE_MERCHANT_WEBHOOKS": "1",
        "ONSALE_MERCHANT_WEBHOOK_TIMEOUT_MS": "1500",  # leased 3 s: due again 3 s after a claim
        "ONSALE_MERCHANT_WEBHOOK_BATCH_MAX": "8",
        "ONSALE_MERCHANT_WEBHOOK_INTERVAL_MS": "20",
        "ONSALE_MERCHANT_WEBHOOK_BACKOFF_MS": "100",
    }
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "onsale.cli", "ledger", env=env, stdout=log, stderr=log
    )


async def statuses(pool: asyncpg.Pool) -> dict[str, Any]:
    async with pool.acquire() as conn:
        rows = await conn.fetch("select message_id, status, attempts from webhook_deliveries")
    return {r["message_id"]: (r["status"], r["attempts"]) for r in rows}


async def test_a_sender_killed_mid_delivery_loses_nothing(
    real_store: Store, ledger_dsn: str, receiver: Receiver, log: IO[bytes]
) -> None:
    pool = await create_pool(ledger_dsn, size_max=2, timeout_s=5)
    secret = wh.new_secret()
    async with pool.acquire() as conn:
        await conn.fetchrow(
            SQL["create_endpoint"], "ep_kill", receiver.url, "", list(wh.EVENT_TYPES), secret, 9
        )
    sale = await open_sale(real_store, SALES)
    for n in range(SALES):
        await buy(sale, n)
    proc = await start_ledger(real_store, ledger_dsn, log)
    try:
        # Kill it while attempts are in flight: received by the merchant, not yet answered.
        for _ in range(600):
            if receiver.received and receiver.answered < len(receiver.received):
                break
            await asyncio.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        seen_at_kill = set(receiver.ids())
        before = await statuses(pool)
        in_flight = {m for m in seen_at_kill if before[m][0] == "pending"}
        assert in_flight, (seen_at_kill, before)  # the kill did land mid-delivery
        proc = await start_ledger(real_store, ledger_dsn, log)
        for _ in range(600):
            after = await statuses(pool)
            if len(after) == SALES and all(s == "delivered" for s, _n in after.values()):
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"not all delivered: {after}; log {log.name}")
    finally:
        if proc.returncode is None:
            proc.terminate()
            await proc.wait()
        await pool.close()
    ids = receiver.ids()
    assert set(ids) == set(after)  # every notification reached the merchant
    assert all(ids.count(m) >= 2 for m in in_flight)  # the interrupted ones, again
    assert all(after[m][1] >= 2 for m in in_flight)  # the lost attempt counted too
    for r in receiver.requests():
        assert verify(r, secret)["type"] == wh.ORDER_CONFIRMED


async def buy(sale: Sale, n: int) -> None:
    await sale.store.claim(sale.event_id, f"u{n}", f"h{n}")
    await sale.store.start_charge(sale.event_id, f"h{n}", f"u{n}", f"c{n}", 4500)
    await callback(sale, f"c{n}", "CAPTURED", attempt=f"att-{sale.event_id}-{n}")
