"""Operating the stack (ADR 0027), end to end over HTTP with its processes: `onsale serve` with
two worker processes, `onsale worker` and `onsale ledger`.

- Request ids: the caller's X-Request-Id is echoed when sane, a new one is minted otherwise,
  and the same id is in the error body and on the access line of the request.
- Logs: every line of every process is a JSON object; the access log is on; planted secrets
  (configured tokens and secrets, a database password, credentials and signatures sent in
  requests) appear in no line of any process.
- Metrics: whichever API worker answers a scrape, it counts every worker's requests, and has
  the process series of each live worker; the worker and the ledger writer export their loops,
  their backlog and their process series."""

import re
import subprocess
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis

from engine.model.signing import HEADER as SIGNATURE_HEADER
from loadtest.devstack.stack import LocalStack, spare_port
from persistence import database
from tests.conftest import REDIS_URL
from tests.pg import PG_DSN

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]

PLANTED = {
    "admin token": "adm-PLANTED-Hx4kP9sQe2vN7wB1cT6yM3rJ8u",
    "metrics token": "met-PLANTED-Vb7Nq2Wz5Lk8Jd1Xr4Ty9Gc6Hs",
    "token secret": "tok-PLANTED-Zq8fT3mWc1xLp6vRb9nKy4hGd7",
    "webhook secret": "whk-PLANTED-Mf5Rt8Kp2Qz7Xc4Vn1Bj6Hd9Ls",
    "database password": "pgpass-PLANTED-4Tq9Wm2Zx7",
    "forged bearer": "forged-PLANTED-Qw3Er5Ty7Ui9Op1As",
    "forged signature": "0123456789abcdefPLANTED",
}
SANE_ID = "req-7f3a.b2:c9=="
JSON_LINE = re.compile(rb"^\{.*\}$")


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    import asyncio

    prefix = f"onsale:test:{uuid.uuid4().hex[:12]}"
    name = f"onsale_test_{uuid.uuid4().hex[:10]}"
    dsn = asyncio.run(database.create_database(PG_DSN, name))
    with_password = dsn.replace("postgres@", f"postgres:{PLANTED['database password']}@", 1)
    stack = LocalStack(
        redis_url=REDIS_URL,
        key_prefix=prefix,
        log_dir=tmp_path_factory.mktemp("ops"),
        api_workers=2,
        admin_token=PLANTED["admin token"],
        token_secret=PLANTED["token secret"],
        webhook_secret=PLANTED["webhook secret"],
        ledger_dsn=with_password,
        extra_env={
            "ONSALE_METRICS_TOKEN": PLANTED["metrics token"],
            "ONSALE_WORKER_METRICS_PORT": str(spare_port()),
            "ONSALE_SWEEP_INTERVAL_MS": "50",
        },
    )
    try:
        try:
            stack.start()
        except subprocess.CalledProcessError as exc:  # `onsale migrate`: say why
            raise AssertionError(exc.stderr.decode(errors="replace")[-3000:]) from exc
        yield stack
    finally:
        stack.stop()
        asyncio.run(database.drop_database(PG_DSN, name))
        client = redis.Redis.from_url(REDIS_URL)
        for key in client.scan_iter(match=f"{prefix}:*"):
            client.delete(key)
        client.close()


def scrape(url: str, token: str = "") -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    r = httpx.get(url, headers=headers, timeout=10)
    assert r.status_code == 200, r.text
    return r.text


def samples(text: str, name: str) -> dict[str, float]:
    """Label text -> value of the series `name`."""
    found = {}
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            labels, _, value = line[len(name) :].rpartition(" ")
            found[labels] = float(value)
    return found


def test_request_ids_are_echoed_minted_and_in_error_bodies(local: LocalStack) -> None:
    r = httpx.get(f"{local.api_url}/healthz", headers={"X-Request-Id": SANE_ID})
    assert r.headers["x-request-id"] == SANE_ID
    for insane in ("has spaces in it", "x" * 65, 'quote"d', ""):
        r = httpx.get(f"{local.api_url}/healthz", headers={"X-Request-Id": insane})
        assert re.fullmatch(r"[0-9a-f]{32}", r.headers["x-request-id"]), insane
    r = httpx.get(f"{local.api_url}/v1/events/no-such-event", headers={"X-Request-Id": "e-404"})
    assert r.status_code == 404
    assert r.json()["error"]["request_id"] == "e-404" == r.headers["x-request-id"]
    r = httpx.post(f"{local.api_url}/v1/events/x/holds", content=b"{}")  # no credential
    assert r.status_code == 401
    assert r.json()["error"]["request_id"] == r.headers["x-request-id"]
    r = httpx.get(f"{local.api_url}/no/such/path", headers={"X-Request-Id": "r-404"})  # router
    assert (r.status_code, r.headers["x-request-id"]) == (404, "r-404")
    assert r.json()["error"]["request_id"] == "r-404"


def test_a_scrape_counts_every_worker_process(local: LocalStack) -> None:
    count = 'onsale_http_request_seconds_count{route="readyz",status="200"}'

    def ready(_: int) -> int:
        return httpx.get(f"{local.api_url}/readyz", timeout=10).status_code

    first = _value(scrape(f"{local.api_url}/metrics", PLANTED["metrics token"]), count)
    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(ready, range(120))) == {200}
    for _ in range(6):  # each scrape may reach either worker: each sees every request
        text = scrape(f"{local.api_url}/metrics", PLANTED["metrics token"])
        assert _value(text, count) == first + 120
    assert len(samples(text, "process_resident_memory_bytes")) == 2, text  # one per pid
    assert samples(text, "onsale_api_workers") == {"": 2.0}
    assert samples(text, "onsale_sold_out_listening") == {"": 1.0}
    assert "onsale_pipeline_calls_total" in text


def _value(text: str, series: str) -> float:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_the_worker_and_the_ledger_export_their_loops_and_backlog(local: LocalStack) -> None:
    event_id = f"ops-{uuid.uuid4().hex[:8]}"
    local.create_event(event_id, 3)
    worker_port = local.extra_env["ONSALE_WORKER_METRICS_PORT"]
    worker = f"http://127.0.0.1:{worker_port}/metrics"
    ledger = f"http://127.0.0.1:{local.ledger_metrics_port}/metrics"
    deadline_text = ""
    for _ in range(100):
        deadline_text = scrape(worker)
        if f'event="{event_id}"' in deadline_text:
            break
        httpx.get(f"{local.api_url}/healthz")  # a pause that does something
    assert samples(deadline_text, "onsale_sweep_lag_seconds")[f'{{event="{event_id}"}}'] == 0
    assert samples(deadline_text, "onsale_refunds_due")[f'{{event="{event_id}"}}'] == 0
    assert samples(deadline_text, "onsale_worker_passes_total")['{loop="sweep"}'] > 0
    assert '{loop="reconcile"}' in samples(deadline_text, "onsale_worker_passes_total")
    assert samples(deadline_text, "process_cpu_seconds_total")
    text = scrape(ledger)
    assert "onsale_ledger_lag_entries" in text and "onsale_ledger_errors_total" in text
    assert samples(text, "process_resident_memory_bytes")


def test_every_log_line_is_json_with_no_secret_and_an_access_line_per_request(
    local: LocalStack,
) -> None:
    api = local.api_url
    forged = {"Authorization": f"Bearer {PLANTED['forged bearer']}", "X-Request-Id": "forged-1"}
    assert httpx.get(f"{api}/v1/admin/events/x/exceptions", headers=forged).status_code == 401
    login = httpx.post(f"{api}/v1/login", json={"login": "ann"}).json()["token"]
    httpx.get(f"{api}/v1/events/nope", headers={"Authorization": f"Bearer {login}"})
    body = b'{"id":"evt-1","type":"charge.captured"}'
    r = httpx.post(
        f"{api}/v1/provider/callbacks",
        content=body,
        headers={SIGNATURE_HEADER: f"t=1,v1={PLANTED['forged signature']}"},
    )
    assert r.status_code == 401
    local.stop()  # flushes every buffer; the module's last test
    planted = [*PLANTED.values(), login]
    access: list[dict[str, Any]] = []
    for name in ("api", "worker", "ledger"):
        raw = (local.log_dir / f"{name}.log").read_bytes()
        for value in planted:
            assert value.encode() not in raw, f"{name}.log holds a planted secret"
        for line in raw.splitlines():
            assert JSON_LINE.match(line), f"{name}.log: not JSON: {line[:200]!r}"
            entry = orjson.loads(line)
            assert {"ts", "level", "logger", "msg"} <= entry.keys(), entry
            if entry["logger"] == "onsale.access":
                access.append(entry)
    forged_line = next(a for a in access if a["request_id"] == "forged-1")
    assert (forged_line["status"], forged_line["method"]) == (401, "GET")
    assert any(a["request_id"] == SANE_ID for a in access)
    assert any(a["request_id"] == "r-404" and a["status"] == 404 for a in access)
    serving = _startup(local.log_dir / "api.log")
    assert serving["workers"] == 2 and serving["listen"] == local.api_url
    assert "ONSALE_ADMIN_TOKEN" in serving["secrets_set"]


def _startup(path: Path) -> dict[str, Any]:
    for line in path.read_bytes().splitlines():
        entry: dict[str, Any] = orjson.loads(line)
        if entry["logger"] == "onsale.serve":
            return entry
    raise AssertionError("no startup line")
