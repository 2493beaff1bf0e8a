"""SIGTERM while `onsale worker` and `onsale ledger` are busy: each ends the step in hand and
exits 0, and nothing is left half done (every overdue hold of the sweep pass in hand is
expired; every ledger batch taken from an outbox is committed and acknowledged, none left
pending); `onsale serve` writes every access line it still buffers. The commands run as
child processes against the shared Redis under a private prefix and a private database; only
they are stopped."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from engine.model import keys
from engine.model.event_config import EventConfig
from engine.model.ledger_progress import LEDGER_GROUP
from engine.store import Store
from loadtest.devstack.stack import spare_port
from persistence.migrate import migrate
from tests.conftest import REDIS_URL, new_prefix, seats
from tests.pg import private_database

pytestmark = [pytest.mark.redis, pytest.mark.slow]

EVENTS, HOLDS = 4, 300


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    """A store with the production scripts (the server's clock), under a private prefix."""
    client = aioredis.from_url(REDIS_URL, decode_responses=True, max_connections=64)
    s = Store(client, prefix=new_prefix(), timeout_s=10)
    await s.scripts.load_all()
    yield s
    async for key in client.scan_iter(match=f"{s.prefix}:*", count=1000):
        await client.delete(key)
    await client.aclose()


async def claimed_events(store: Store, *, hold_ttl_ms: int) -> list[str]:
    """EVENTS open events with HOLDS holds each."""
    event_ids = [f"ev-{uuid.uuid4().hex[:8]}" for _ in range(EVENTS)]
    for event_id in event_ids:
        await store.create_event(
            event_id, seats(HOLDS), EventConfig(hold_ttl_ms=hold_ttl_ms, quarantine_ms=60_000)
        )
        await store.open_sale(event_id)
        for first in range(0, HOLDS, 100):
            await asyncio.gather(
                *(store.claim(event_id, f"u{i}", f"h{i}") for i in range(first, first + 100))
            )
    return event_ids


def start(command: str, store: Store, log: Path, **env: str) -> subprocess.Popen[bytes]:
    full = {
        **os.environ,
        "ONSALE_REDIS_URL": REDIS_URL,
        "ONSALE_KEY_PREFIX": store.prefix,
        "ONSALE_PROVIDER_URL": "http://127.0.0.1:9",  # nobody: no charge is ever made here
        "ONSALE_WORKER_METRICS_PORT": str(spare_port()),
        "ONSALE_LEDGER_METRICS_PORT": str(spare_port()),
        **env,
    }
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "onsale.cli", command],
            env=full,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


async def wait_for(check: Callable[[], Awaitable[bool]], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"not within {timeout_s} s")


async def test_the_worker_ends_its_sweep_pass_on_sigterm_and_exits_0(
    store: Store, tmp_path: Path
) -> None:
    event_ids = await claimed_events(store, hold_ttl_ms=1_000)
    await asyncio.sleep(1.2)  # every hold overdue before the worker starts

    async def expired() -> int:
        return sum([HOLDS - (await store.read.availability(e)).held for e in event_ids])

    # One hold per script call, and no cap on the calls per event: one pass is long.
    worker = start(
        "worker",
        store,
        tmp_path / "worker.log",
        ONSALE_SWEEP_BATCH_MAX="1",
        ONSALE_SWEEP_ROUNDS_MAX="100000",
    )
    try:
        await wait_for(lambda: _between(expired, 1, EVENTS * HOLDS // 2), 30)
        worker.send_signal(signal.SIGTERM)
        at_signal = await expired()
        code = worker.wait(30)
    finally:
        if worker.poll() is None:
            worker.kill()
    log = (tmp_path / "worker.log").read_text()
    assert at_signal < EVENTS * HOLDS, "the signal came after the pass: nothing to show"
    assert await expired() == EVENTS * HOLDS, "the pass in hand was not finished"
    assert code == 0, log
    assert "stopping after the step in hand" in log


async def pending(store: Store, stream: str) -> int:
    """Entries the ledger group took and has not acknowledged (0 without a group)."""
    try:
        return int((await store.client.xpending(stream, LEDGER_GROUP))["pending"])
    except ResponseError as exc:
        assert "NOGROUP" in str(exc)
        return 0


async def _between(count: Callable[[], Awaitable[int]], low: int, high: int) -> bool:
    return low <= await count() <= high


async def test_the_ledger_commits_the_batch_in_hand_on_sigterm_and_exits_0(
    store: Store, tmp_path: Path
) -> None:
    event_ids = await claimed_events(store, hold_ttl_ms=1_000)
    await asyncio.sleep(1.2)
    for event_id in event_ids:  # one outbox entry per hold, its expiry
        while (await store.sweep(event_id, 200)).remaining_due:
            pass
        assert (await store.read.availability(event_id)).held == 0
    async with private_database() as dsn:
        conn = await asyncpg.connect(dsn)
        await migrate(conn)

        async def in_ledger() -> int:
            return int(await conn.fetchval("select count(*) from decisions"))

        ledger = start(
            "ledger",
            store,
            tmp_path / "ledger.log",
            ONSALE_PG_DSN=dsn,
            ONSALE_LEDGER_BATCH_MAX="5",
            ONSALE_MERCHANT_WEBHOOKS="0",
        )
        try:
            await wait_for(lambda: _between(in_ledger, 1, EVENTS * HOLDS // 2), 60)
            ledger.send_signal(signal.SIGTERM)
            code = ledger.wait(30)
        finally:
            if ledger.poll() is None:
                ledger.kill()
        log = (tmp_path / "ledger.log").read_text()
        written = await in_ledger()
        assert 0 < written < EVENTS * HOLDS, "the signal came after the work: nothing to show"
        for event_id in event_ids:
            stream = keys.event_key(event_id, "outbox", store.prefix)
            assert await pending(store, stream) == 0, f"{event_id}: a batch taken, not committed"
            progress = await store.read.ledger_progress(event_id)
            count = await conn.fetchval(
                "select count(*) from decisions where event_id = $1", event_id
            )
            # Everything the writer took is in the ledger; the rest waits in Redis, untaken.
            assert count + progress.behind == HOLDS
        await conn.close()
        assert code == 0, log


async def test_a_ledger_writer_started_while_postgresql_is_down_waits_for_it(
    store: Store, tmp_path: Path
) -> None:
    """Started with nothing listening where PostgreSQL should be (down, or still recovering),
    the writer waits for it, saying so, instead of exiting 1; SIGTERM still stops it with 0."""
    port = spare_port()
    down = f"postgresql://postgres@127.0.0.1:{port}/nowhere"
    proc = start("ledger", store, tmp_path / "ledger.log", ONSALE_PG_DSN=down)
    try:
        await asyncio.sleep(3.0)
        assert proc.poll() is None, (tmp_path / "ledger.log").read_text()[-2000:]
        assert "not reachable at start" in (tmp_path / "ledger.log").read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 15) == 0


def test_the_api_writes_every_access_line_before_it_exits_on_sigterm(tmp_path: Path) -> None:
    """uvicorn's workers end by raising again the SIGTERM they caught, so no atexit hook runs:
    the access lines still buffered (up to `api.logs.FLUSH_S`) are written by the app's own
    shutdown, whichever worker answered and however quickly the signal follows the answer."""
    import httpx

    from api.logs import FLUSH_S
    from loadtest.devstack.scratch import api_env
    from loadtest.devstack.stack import signal_group, wait_healthy

    port = spare_port()
    env = {**os.environ, **api_env(REDIS_URL, ONSALE_KEY_PREFIX=new_prefix())}
    log = tmp_path / "api.log"
    with open(log, "wb") as out:
        api = subprocess.Popen(
            [sys.executable, "-m", "onsale.cli", "serve", "--port", str(port), "--workers", "2"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, api, 60)
        ids = [f"last-{i}" for i in range(20)]
        with httpx.Client() as client:
            for request_id in ids:
                client.get(f"{url}/healthz", headers={"X-Request-Id": request_id})
        answered = time.monotonic()
        signal_group(api, signal.SIGTERM)
        signalled_after = time.monotonic() - answered
        api.wait(30)
    finally:
        signal_group(api, signal.SIGKILL)
        api.wait(5)
    written = {
        entry["request_id"]
        for line in log.read_bytes().splitlines()
        if line.startswith(b"{") and (entry := json.loads(line)).get("logger") == "onsale.access"
    }
    assert signalled_after < FLUSH_S, "the last line was flushed before the signal: nothing shown"
    assert set(ids) <= written, sorted(set(ids) - written)
