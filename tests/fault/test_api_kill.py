"""kill -9 of the API during a burst with payments. Clients retry what did not answer with the
same Idempotency-Key; the provider retries callbacks that were cut. Afterwards: every buyer got
exactly one seat and paid once in effect, no seat twice, every capture a winner or refunded."""

import asyncio
import socket
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
import redis.asyncio as redis_asyncio
from itsdangerous import URLSafeTimedSerializer

from engine.store import Store
from loadtest.devstack.stack import LocalStack
from tests.conftest import REDIS_URL

pytestmark = [pytest.mark.redis, pytest.mark.slow]

CUT: list[str] = []  # requests that got no answer (connection cut or refused) and were retried


async def call(
    http: aiohttp.ClientSession, method: str, path: str, headers: dict[str, str]
) -> tuple[int, dict[str, Any]]:
    """Retry until an answer arrives: a cut connection is not an answer."""
    for attempt in range(100):
        try:
            async with http.request(method, path, json={}, headers=headers) as r:
                return r.status, await r.json()
        except (aiohttp.ClientError, TimeoutError):
            CUT.append(f"{method} {path}")
            await asyncio.sleep(min(1.0, 0.05 * 2**attempt))
    raise AssertionError(f"{method} {path}: no answer")


async def buyer(
    http: aiohttp.ClientSession, signer: URLSafeTimedSerializer, event_id: str, n: int
) -> str:
    auth = {"Authorization": f"Bearer {signer.dumps({'l': f'fan{n}'})}"}
    status, hold = await call(
        http, "POST", f"/v1/events/{event_id}/holds", {**auth, "Idempotency-Key": f"hold-{n}"}
    )
    assert status in (200, 201), hold
    path = f"/v1/events/{event_id}/holds/{hold['hold_id']}"
    status, body = await call(
        http, "POST", f"{path}/charges", {**auth, "Idempotency-Key": f"charge-{n}"}
    )
    assert status == 202, body
    for _ in range(300):
        status, state = await call(http, "GET", path, auth)
        if state["state"] != "RESERVED":
            return str(state["state"])
        await asyncio.sleep(0.1)
    return "RESERVED"


async def test_api_kill_9_mid_burst(tmp_path: Path) -> None:
    prefix = f"onsale:test:{uuid.uuid4().hex[:12]}"
    stack = LocalStack(
        redis_url=REDIS_URL,
        key_prefix=prefix,
        log_dir=tmp_path,
        sim_args=("--decline-rate", "0", "--fail-rate", "0", "--duplicate-rate", "0.5"),
        extra_env={
            "ONSALE_REFUND_INTERVAL_MS": "100",
            "ONSALE_RECONCILE_INTERVAL_MS": "300",
            "ONSALE_RECONCILE_STALE_MS": "3000",
        },
    )
    await asyncio.to_thread(stack.start)
    client = redis_asyncio.from_url(REDIS_URL, decode_responses=True)
    try:
        signer = URLSafeTimedSerializer(stack.token_secret, salt="onsale-login")
        async with aiohttp.ClientSession(base_url=stack.api_url) as http:
            await asyncio.to_thread(stack.create_event, "ev", 60, hold_ttl_ms=120_000)
            buyers = asyncio.gather(*(buyer(http, signer, "ev", n) for n in range(50)))
            await asyncio.sleep(0.3)
            await asyncio.to_thread(stack.kill_api)
            await asyncio.sleep(0.5)
            await asyncio.to_thread(stack.start_api)
            outcomes = await buyers
        assert CUT, "the kill landed after the burst: the test proves nothing"
        assert outcomes == ["CONFIRMED"] * 50
        store = Store(client, prefix=prefix)
        report = await store.read.audit("ev")
        assert report.ok, report.violations
        assert (await store.read.availability("ev")).sold == 50
        assert stack.alive()
    finally:
        await asyncio.to_thread(stack.stop)
        async for key in client.scan_iter(match=f"{prefix}:*"):
            await client.delete(key)
        await client.aclose()


def test_killing_an_api_with_workers_kills_them_all_and_frees_its_port(tmp_path: Path) -> None:
    """`onsale serve --workers 2` is a master and two workers: a kill of the API (a benchmark's
    phase change, a chaos fault) reaches all three, the port is free when it returns, and the
    next start is the only server answering (its workers were orphans answering the next
    phase before)."""
    prefix = f"onsale:test:{uuid.uuid4().hex[:12]}"
    stack = LocalStack(redis_url=REDIS_URL, key_prefix=prefix, log_dir=tmp_path, api_workers=2)
    stack.start()
    try:
        first = stack.pid("api")
        workers = children_of(first)
        assert len(workers) >= 2, workers  # the workers (and a resource tracker, maybe)
        stack.kill_api()
        assert [p for p in [first, *workers] if alive(p)] == [], [
            (p, (Path("/proc") / str(p) / "stat").read_text()[:80]) for p in workers if alive(p)
        ]
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", stack.api_port)) != 0  # nobody answers now
        stack.start_api()
        assert stack.pid("api") != first
        assert httpx.get(f"{stack.api_url}/healthz", timeout=5).status_code == 200
    finally:
        stack.stop()


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
