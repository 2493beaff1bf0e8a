"""Logs and the worker's series, without a server: JSON lines with the request id, secrets
scrubbed, request ids echoed or minted, the buffered access log (written at the app's
shutdown too), the loops' counters and the backlog read from Redis replies."""

import asyncio
import io
import logging
import os
import threading
from collections.abc import Iterator
from types import SimpleNamespace

import httpx
import orjson
import pytest
from prometheus_client import generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from api.context import endpoint
from api.logs import CHUNK_BYTES, AccessLog, request_id_from
from api.metrics import Metrics
from engine.config import logs
from engine.model.errors import SoldOut
from engine.workers.metrics import Backlog, Loops, WorkerMetrics, backlog_of
from persistence.metrics import LedgerMetrics

SECRET = "adm-Hx4kP9sQe2vN7wB1cT6yM3rJ8uF5gL0"
SIGNATURE = "5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """Every line the `onsale.test` logger writes, through the JSON formatter."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logs.JsonFormatter())
    log = logging.getLogger("onsale.test")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    yield out
    log.removeHandler(handler)


def lines(out: io.StringIO) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in out.getvalue().splitlines()]


def test_a_line_is_one_json_object_with_the_request_id_and_fields(captured: io.StringIO) -> None:
    log = logging.getLogger("onsale.test")
    token = logs.REQUEST_ID.set("req-1")
    try:
        log.info("claimed %s", "h1", extra={"fields": {"event": "e1", "n": 3}})
    finally:
        logs.REQUEST_ID.reset(token)
    log.warning("outside a request")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    first, second, third = lines(captured)
    assert first["msg"] == "claimed h1" and first["request_id"] == "req-1"
    assert (first["event"], first["n"], first["level"], first["logger"]) == (
        "e1", 3, "info", "onsale.test",
    )  # fmt: skip
    assert str(first["ts"]).endswith("Z") and "request_id" not in second
    assert "ValueError: boom" in str(third["exc"])


def test_planted_secrets_never_reach_a_line(captured: io.StringIO) -> None:
    logs.remember_secrets(
        {
            "ONSALE_ADMIN_TOKEN": SECRET,
            "ONSALE_PG_DSN": "postgresql://u:pg-Secret-Pw-81@h/db",
            "ONSALE_KEY_PREFIX": "onsale:v1",  # not a secret: left alone
        }
    )
    log = logging.getLogger("onsale.test")
    planted = [
        f"admin token {SECRET} in a message",
        "Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbm4ifQ.c2lnbmF0dXJl",
        "dsn postgresql://u:pg-Secret-Pw-81@h/db failed",
        "redis://:another-pw-2@r:6379/0 unreachable",
        "stripe sk_live_51Habcdefghijklmnop and whsec_Zr4tP8wLZr4tP8wL",
        "signature t=1700000000,v1=" + SIGNATURE,
        'body {"token": "tok-abcdefgh12345", "password":"hunter2-long"}',
    ]
    for text in planted:
        log.warning(text)
    log.error("in fields", extra={"fields": {"url": "https://user:pa55word-x@example.com/x"}})
    text = captured.getvalue()
    for secret in (
        SECRET,
        "pg-Secret-Pw-81",
        "another-pw-2",
        "eyJhbGciOiJSUzI1NiJ9",
        "sk_live_51Habcdefghijklmnop",
        "whsec_Zr4tP8wLZr4tP8wL",
        SIGNATURE,
        "tok-abcdefgh12345",
        "hunter2-long",
        "pa55word-x",
    ):
        assert secret not in text, secret
    assert len(lines(captured)) == len(planted) + 1  # still one JSON object a line
    assert "onsale:v1" in logs.scrub("prefix onsale:v1")


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        (b"req-7f3a.b2:c9==", True),
        (b"0f" * 32, True),
        (b"x" * 65, False),
        (b"has space", False),
        (b'quote"', False),
        (b"\xc3\xa9t\xc3\xa9", False),
        (b"", False),
    ],
)
def test_a_sane_request_id_is_kept_any_other_replaced(sent: bytes, kept: bool) -> None:
    got = request_id_from([(b"x-request-id", sent)])
    assert (got == sent.decode(errors="replace")) is kept
    if not kept:
        assert len(got) == 32 and int(got, 16) >= 0
    assert request_id_from([]) != request_id_from([])


async def test_the_request_id_is_echoed_in_the_header_the_body_and_the_access_line(
    captured: io.StringIO,
) -> None:
    @endpoint("sold")
    async def sold(request: Request) -> Response:
        logging.getLogger("onsale.test").info("inside")
        raise SoldOut("e1")

    @endpoint("fine")
    async def fine(request: Request) -> Response:
        return Response(b"{}", media_type="application/json")

    read, write = os.pipe()
    app = Starlette(routes=[Route("/sold", sold), Route("/fine", fine)])
    app.state.ctx = SimpleNamespace(metrics=Metrics(), access=AccessLog(write))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        r = await c.get("/sold?token=never-logged", headers={"X-Request-Id": "abc-1"})
        minted = await c.get("/sold", headers={"X-Request-Id": "no good"})
        ok = await c.get("/fine")
    app.state.ctx.access.flush()
    os.close(write)
    with os.fdopen(read, "rb") as f:
        written = [orjson.loads(line) for line in f.read().splitlines()]
    assert r.headers["x-request-id"] == "abc-1" == r.json()["error"]["request_id"]
    assert r.headers.get_list("x-request-id") == ["abc-1"]  # once
    assert minted.headers["x-request-id"] == minted.json()["error"]["request_id"] != "no good"
    assert len(ok.headers["x-request-id"]) == 32
    first = written[0]
    assert (first["request_id"], first["path"], first["status"]) == ("abc-1", "/sold", 409)
    assert first["logger"] == "onsale.access" and first["pid"] == os.getpid()
    assert [w["status"] for w in written] == [409, 409, 200]
    assert "never-logged" not in str(written)
    assert lines(captured)[0]["request_id"] == "abc-1"  # the handler's own line carries it


async def test_the_access_log_writes_whole_lines_in_chunks_a_pipe_keeps_whole() -> None:
    read, write = os.pipe()
    chunks: list[bytes] = []

    def drain() -> None:
        with os.fdopen(read, "rb", buffering=0) as f:
            while chunk := f.read(65536):
                chunks.append(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    writes: list[bytes] = []

    class Recorded(AccessLog):
        def _write(self, data: bytes) -> None:
            writes.append(data)
            super()._write(data)

    access = Recorded(write)
    scope = {"method": "GET", "path": "/p" * 40, "client": ("10.0.0.1", 5)}
    for i in range(200):  # about 50 KiB
        access.write(f"id-{i}", scope, 200, 0.001)
    assert access.lines, "the last lines wait for the timer"
    await asyncio.sleep(0.3)  # FLUSH_S
    assert not access.lines
    os.close(write)
    reader.join(10)
    parsed = [orjson.loads(line) for chunk in chunks for line in chunk.splitlines()]
    assert [p["request_id"] for p in parsed] == [f"id-{i}" for i in range(200)]
    assert len(writes) > 10  # a write per few KiB, not a write per line
    assert all(len(data) <= CHUNK_BYTES for data in writes)  # PIPE_BUF: never interleaved
    assert all(data.endswith(b"\n") for data in writes)  # whole lines only


def test_the_loops_count_passes_and_failures_and_export_them() -> None:
    loops = Loops()

    async def step() -> bool:
        return True

    once = loops.counted("sweep", step)
    assert asyncio.run(once()) is True
    loops.failed("sweep")()

    class Stats:
        expired, quarantined, freed = 4, 1, 0

    metrics = WorkerMetrics(loops, {"sweep": Stats()})
    metrics.record({"e1": Backlog(2.5, 3, 1)})
    text = generate_latest(metrics.registry).decode()
    assert 'onsale_worker_passes_total{loop="sweep"} 1.0' in text
    assert 'onsale_worker_errors_total{loop="sweep"} 1.0' in text
    assert 'onsale_sweep_holds_total{result="expired"} 4.0' in text
    assert 'onsale_sweep_lag_seconds{event="e1"} 2.5' in text
    assert 'onsale_refunds_retrying{event="e1"} 1.0' in text
    assert "process_cpu_seconds_total" in text
    metrics.record({})  # the event is gone: so are its series
    assert 'event="e1"' not in generate_latest(metrics.registry).decode()


def test_the_sweep_lag_is_the_most_overdue_deadline_or_quarantine() -> None:
    now = 10_000
    assert backlog_of(now, [[], [], 0, 0]) == Backlog(0.0, 0, 0)
    assert backlog_of(now, [[("h1", 11_000.0)], [], 0, 0]).sweep_lag_s == 0.0  # not due yet
    lagging = backlog_of(now, [[("h1", 9_000.0)], [("h2", 6_500.0)], 2, 5])
    assert lagging == Backlog(3.5, 2, 5)


async def test_the_ledger_lag_series_follow_the_events() -> None:
    m = LedgerMetrics()

    async def lag(event_id: str) -> tuple[int, float]:
        return (7, 1.5) if event_id == "e1" else (0, 0.0)

    await m.read_lag(["e1", "e2"], lag)
    text = generate_latest(m.registry).decode()
    assert 'onsale_ledger_lag_entries{event="e1"} 7.0' in text
    await m.read_lag(["e2"], lag)
    text = generate_latest(m.registry).decode()
    assert 'event="e1"' not in text and 'onsale_ledger_lag_entries{event="e2"} 0.0' in text
    assert "onsale_ledger_lag_read_timestamp_seconds" in text


def test_every_exported_outcome_is_a_counter_of_its_loops_stats() -> None:
    """A result a worker's series shows is a field its loop's stats record counts: a renamed
    counter fails here, not at a scrape."""
    from dataclasses import fields

    from engine.workers.metrics import OUTCOMES
    from engine.workers.reconcile import ReconcileStats
    from engine.workers.refunds import RefundStats
    from engine.workers.sweeper import SweepStats
    from engine.workers.trim import TrimStats

    stats = {"sweep": SweepStats, "trim": TrimStats, "refunds": RefundStats,
             "reconcile": ReconcileStats}  # fmt: skip
    assert [loop for loop, *_ in OUTCOMES] == list(stats)
    for loop, _series, _help, counters in OUTCOMES:
        assert set(counters) <= {f.name for f in fields(stats[loop])}, loop


async def test_the_app_s_shutdown_writes_the_access_lines_it_still_buffers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A uvicorn worker ends by raising again the SIGTERM it caught: no exit hook runs, and no
    timer after the shutdown. Lines still in the buffer are written by the app's shutdown
    (here no timer flushes: FLUSH_S is a minute; Redis is nowhere, as at a boot without it)."""
    from api.app import create_app
    from api.settings import ApiSettings
    from loadtest.devstack.scratch import api_env

    monkeypatch.setattr("api.logs.FLUSH_S", 60.0)
    read, write = os.pipe()
    os.set_blocking(read, False)
    app = create_app(ApiSettings.from_env(api_env("redis://127.0.0.1:9/0")))
    try:
        async with app.router.lifespan_context(app):
            app.state.ctx.access = AccessLog(write, json=True)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
                await http.get("/healthz", headers={"X-Request-Id": "still-buffered"})
            with pytest.raises(BlockingIOError):
                os.read(read, 65536)  # nothing written yet: the line waits in the buffer
        line = orjson.loads(os.read(read, 65536))
    finally:
        os.close(read)
        os.close(write)
    assert (line["request_id"], line["path"]) == ("still-buffered", "/healthz")
