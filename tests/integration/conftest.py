"""The whole stack as separate processes on spare ports: provider simulator, API, worker.
Each test module gets its own key prefix; everything is stopped and deleted afterwards. The
provider is the simulator's own protocol (the `stack` fixture here) or Stripe's API, which the
simulator speaks too (`running_stack(..., provider="stripe")`, ADR 0023)."""

import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import orjson
import pytest
import redis

from loadtest.devstack.buyer import Answer, BuyerApi, Call, bearer
from loadtest.devstack.stack import LocalStack
from tests.conftest import API_TEST_ENV, REDIS_URL
from tests.provider_wire import signed_headers

if TYPE_CHECKING:
    import asyncpg

    from engine.store import Store
    from persistence.writer import LedgerWriter

ADMIN = API_TEST_ENV["ONSALE_ADMIN_TOKEN"]
WEBHOOK_SECRET = "whsec-e2e-Qm7Rt2Vx9Kc4Np1Lw8Hd3Js6Bf0Gz5"
# Worker loops quick enough that a scenario settles within seconds.
STACK_ENV = {
    "ONSALE_PROVIDER_TIMEOUT_MS": "1000",
    "ONSALE_SWEEP_INTERVAL_MS": "50",
    "ONSALE_REFUND_INTERVAL_MS": "100",
    "ONSALE_RECONCILE_INTERVAL_MS": "300",
    "ONSALE_RECONCILE_STALE_MS": "1500",
    # These stacks' tests lose Redis and rebuild by hand, as an operator would: the ledger
    # process must not race them (tests/fault/test_auto_rebuild.py runs it on).
    "ONSALE_AUTO_REBUILD": "0",
}


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

    @property
    def provider(self) -> str:
        return self.local.provider

    @property
    def callback_secret(self) -> str:
        """The secret the provider signs its callbacks with, and the API verifies them with."""
        local = self.local
        return local.stripe_webhook_secret if self.provider == "stripe" else local.webhook_secret

    def record(self, charge_id: str) -> dict[str, Any]:
        """The simulator's own record of the latest attempt under our key (either wire)."""
        r = httpx.get(f"{self.sim}/v1/test/keys/{charge_id}", timeout=5)
        assert r.status_code == 200, r.text
        data: dict[str, Any] = r.json()
        return data

    def post_callback(
        self, message: dict[str, Any], *, secret: str = "", at: int = 0, provider: str = ""
    ) -> httpx.Response:
        """A provider message to the API, signed as `provider` (the stack's) signs it, with
        `secret` (the right one) at time `at` (now)."""
        body = orjson.dumps(message)
        headers = signed_headers(
            provider or self.provider, secret or self.callback_secret, body, at
        )
        url = f"{self.api}/v1/provider/callbacks"
        return httpx.post(url, content=body, headers=headers, timeout=5)


@contextlib.contextmanager
def running_stack(
    log_dir: Path,
    provider: str = "simulator",
    env: dict[str, str] | None = None,
    *,
    ledger: bool = False,
    duplicates: bool = True,
) -> Iterator[Stack]:
    """The stack on `provider` (simulator | stripe), with `env` over the tests' settings, a
    ledger of its own (`ledger`: a private database, migrated by the stack, dropped after), and
    (`duplicates`) every callback delivered twice or more half of the time; stopped, and its
    keys deleted, on leaving."""
    from persistence import database
    from tests.pg import PG_DSN

    prefix = f"onsale:test:{uuid.uuid4().hex[:12]}"
    name = f"onsale_test_{uuid.uuid4().hex[:10]}"
    dsn = run_apart(database.create_database(PG_DSN, name)) if ledger else ""
    local = LocalStack(
        redis_url=REDIS_URL,
        key_prefix=prefix,
        log_dir=log_dir,
        admin_token=ADMIN,
        webhook_secret=WEBHOOK_SECRET,
        provider=provider,
        sim_args=("--duplicate-rate", "0.5") if duplicates else (),
        extra_env={**STACK_ENV, **(env or {})},
        ledger_dsn=dsn,
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
        if ledger:
            run_apart(database.drop_database(PG_DSN, name))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("stack")) as s:
        yield s


# -- a buyer's steps over HTTP, shared by the scenarios ---------------------------------------


def eventually(check: Callable[[], Any], timeout_s: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError(f"not reached within {timeout_s}s (last: {last!r})")


def hold_state(stack: Stack, buyer: BuyerApi, hold_id: str) -> dict[str, Any]:
    answer = stack.send(buyer.hold(hold_id))
    assert answer.status == 200, answer
    return answer.body


def claim(
    stack: Stack, buyer: BuyerApi, seat_id: str | None = None, party: int = 1
) -> dict[str, Any]:
    answer = stack.send(buyer.claim(seat_id=seat_id, party=party))
    assert answer.status == 201, answer
    return answer.body


def pay(stack: Stack, buyer: BuyerApi, hold_id: str) -> dict[str, Any]:
    answer = stack.send(buyer.pay(hold_id))
    assert answer.status == 202, answer
    return answer.body


@dataclass
class StackLedger:
    """A private ledger database beside the stack, and the store and writer to reach it."""

    store: "Store"
    pool: "asyncpg.Pool"
    writer: "LedgerWriter"
    dsn: str

    async def drain(self, event_id: str) -> None:
        """Every outbox record of the event written to the ledger."""
        while await self.writer.step(event_id):
            pass


@pytest.fixture
async def stack_ledger(stack: Stack) -> AsyncIterator[StackLedger]:
    import asyncpg
    import redis.asyncio as redis_asyncio

    from engine.store import Store
    from persistence.database import create_pool
    from persistence.migrate import migrate
    from persistence.writer import LedgerWriter
    from tests.pg import private_database

    async with private_database() as dsn:
        conn = await asyncpg.connect(dsn)
        await migrate(conn)
        await conn.close()
        pool = await create_pool(dsn, size_max=2, timeout_s=5)
        client = redis_asyncio.from_url(REDIS_URL, decode_responses=True)
        store = Store(client, prefix=stack.prefix)
        writer = LedgerWriter(client, pool, prefix=stack.prefix, consumer="test", batch_max=100)
        yield StackLedger(store, pool, writer, dsn)
        await client.aclose()
        await pool.close()


def run_apart(coro: Any) -> Any:
    """`asyncio.run(coro)` in a thread of its own: from a fixture that may run while another
    event loop runs in this thread (Playwright's sync API keeps one)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()
