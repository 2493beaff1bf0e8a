"""The whole stack as separate processes on spare ports: provider simulator, API, worker.
Each test module gets its own key prefix; everything is stopped and deleted afterwards."""

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import redis

from loadtest.buyer import Answer, BuyerApi, Call, bearer
from loadtest.stack import LocalStack
from tests.conftest import API_TEST_ENV, REDIS_URL

ADMIN = API_TEST_ENV["ONSALE_ADMIN_TOKEN"]
WEBHOOK_SECRET = "whsec-e2e-Qm7Rt2Vx9Kc4Np1Lw8Hd3Js6Bf0Gz5"


@dataclass
class Stack:
    api: str
    sim: str
    prefix: str
    local: LocalStack

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.api, timeout=10)

    def admin_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {ADMIN}"}

    def send(self, call: Call) -> Answer:
        """A buyer's request, as the load tools send it (a connection of its own)."""
        with self.client() as c:
            r = c.request(call.method, call.path, json=call.json, headers=dict(call.headers))
        return Answer.of(r.status_code, r.content)

    def token(self, name: str) -> str:
        answer = self.send(BuyerApi.login(name))
        assert answer.status == 200, answer
        return str(answer.body["token"])

    def login(self, name: str) -> dict[str, str]:
        """The Authorization header of a new login (for requests no buyer would send)."""
        return bearer(self.token(name))

    def buyer(self, event_id: str, name: str) -> BuyerApi:
        """A new login of `name` (a tab of its own) on the event."""
        return BuyerApi(event_id, self.token(name))

    def sim_config(self, **changes: Any) -> None:
        httpx.put(f"{self.sim}/v1/config", json=changes, timeout=5).raise_for_status()

    def ledger(self) -> dict[str, Any]:
        data: dict[str, Any] = httpx.get(f"{self.sim}/v1/ledger", timeout=5).json()
        return data

    def new_event(self, n_seats: int = 5, **options: Any) -> str:
        event_id = f"e2e-{uuid.uuid4().hex[:8]}"
        seats = [{"seat_id": f"s{i}", "rank": i, "section": "A"} for i in range(n_seats)]
        self.local.create_event(event_id, seats, **{"price_minor": 4500, **options})
        return event_id


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prefix = f"onsale:test:{uuid.uuid4().hex[:12]}"
    local = LocalStack(
        redis_url=REDIS_URL,
        key_prefix=prefix,
        log_dir=tmp_path_factory.mktemp("stack"),
        admin_token=ADMIN,
        webhook_secret=WEBHOOK_SECRET,
        sim_args=("--duplicate-rate", "0.5"),
        extra_env={
            "ONSALE_PROVIDER_TIMEOUT_MS": "1000",
            "ONSALE_SWEEP_INTERVAL_MS": "50",
            "ONSALE_REFUND_INTERVAL_MS": "100",
            "ONSALE_RECONCILE_INTERVAL_MS": "300",
            "ONSALE_RECONCILE_STALE_MS": "1500",
        },
    )
    local.start()
    try:
        yield Stack(local.api_url, local.sim_url, prefix, local)
        assert local.alive(), f"a stack process died; logs in {local.log_dir}"
    finally:
        local.stop()
        client = redis.Redis.from_url(REDIS_URL)
        for key in client.scan_iter(match=f"{prefix}:*"):
            client.delete(key)
        client.close()
