"""The whole stack as separate processes on spare ports: provider simulator, API, worker.
Each test module gets its own key prefix; everything is stopped and deleted afterwards."""

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import redis

from tests.conftest import REDIS_URL
from tests.fault.conftest import spare_port

ADMIN = "admin-test-token"
WEBHOOK_SECRET = "whsec-test"


@dataclass
class Stack:
    api: str
    sim: str
    prefix: str

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.api, timeout=10)

    def admin_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {ADMIN}"}

    def login(self, name: str) -> dict[str, str]:
        with self.client() as c:
            r = c.post("/v1/login", json={"login": name})
            r.raise_for_status()
            return {"Authorization": f"Bearer {r.json()['token']}"}

    def sim_config(self, **changes: Any) -> None:
        httpx.put(f"{self.sim}/v1/config", json=changes, timeout=5).raise_for_status()

    def ledger(self) -> dict[str, Any]:
        data: dict[str, Any] = httpx.get(f"{self.sim}/v1/ledger", timeout=5).json()
        return data

    def new_event(self, n_seats: int = 5, **options: Any) -> str:
        event_id = f"e2e-{uuid.uuid4().hex[:8]}"
        body = {
            "event_id": event_id,
            "price_minor": 4500,
            "opens_at_ms": 0,
            "seats": [{"seat_id": f"s{i}", "rank": i, "section": "A"} for i in range(n_seats)],
            **options,
        }
        with self.client() as c:
            r = c.post("/v1/admin/events", json=body, headers=self.admin_headers())
            assert r.status_code == 201, r.text
        return event_id


def _wait_healthy(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url} exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/healthz", timeout=0.5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not become healthy")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    api_port, sim_port = spare_port(), spare_port()
    prefix = f"onsale:test:{uuid.uuid4().hex[:12]}"
    env = {
        **os.environ,
        "ONSALE_REDIS_URL": REDIS_URL,
        "ONSALE_KEY_PREFIX": prefix,
        "ONSALE_TOKEN_SECRET": "token-secret-test",
        "ONSALE_ADMIN_TOKEN": ADMIN,
        "ONSALE_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "ONSALE_PROVIDER_URL": f"http://127.0.0.1:{sim_port}",
        "ONSALE_PROVIDER_TIMEOUT_MS": "1000",
        "ONSALE_SWEEP_INTERVAL_MS": "50",
        "ONSALE_REFUND_INTERVAL_MS": "100",
        "ONSALE_RECONCILE_INTERVAL_MS": "300",
        "ONSALE_RECONCILE_STALE_MS": "1500",
    }
    logs = tmp_path_factory.mktemp("stack")
    cmd = [sys.executable, "-m", "engine.cli"]
    procs = []

    def start(name: str, *args: str) -> subprocess.Popen[bytes]:
        out = open(logs / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen([*cmd, *args], env=env, stdout=out, stderr=subprocess.STDOUT)
        procs.append((proc, out))
        return proc

    sim = start(
        "sim",
        "provider-sim",
        "--port",
        str(sim_port),
        "--webhook-url",
        f"http://127.0.0.1:{api_port}/v1/provider/callbacks",
        "--duplicate-rate",
        "0.5",
    )
    api = start("api", "serve", "--port", str(api_port))
    start("worker", "worker")
    try:
        _wait_healthy(f"http://127.0.0.1:{sim_port}", sim)
        _wait_healthy(f"http://127.0.0.1:{api_port}", api)
        yield Stack(f"http://127.0.0.1:{api_port}", f"http://127.0.0.1:{sim_port}", prefix)
    finally:
        for proc, _out in procs:
            proc.terminate()
        for proc, out in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
            out.close()
        client = redis.Redis.from_url(REDIS_URL)
        for key in client.scan_iter(match=f"{prefix}:*"):
            client.delete(key)
        client.delete(f"{prefix}:events")
        client.close()
