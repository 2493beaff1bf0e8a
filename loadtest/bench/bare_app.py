"""The naive ceiling of a Python HTTP + redis-py stack, for side-by-side comparison with the
real claim endpoint: `GET /trivial` (and `/healthz`) returns a constant JSON body; `POST
/bare-claim` (and the claim's own path) parses the JSON body and runs one EVALSHA of a minimal
claim (pop the best free seat, record its owner), answering 201 or, sold out, 409 with the
engine's error body. Same server configuration as `onsale serve` (uvicorn, uvloop, httptools,
orjson).

With `BARE_ENGINE_EVENT` set (and the API's environment), `POST /bare-engine-claim` runs the
engine's own claim script instead, one FCALL of `hold_claim` on that event with the keys and
limits an API process passes, a new login each: the bare app's Python around the engine's
script. Its distance to the bare claim is what the script alone costs; the engine's distance to
it, what the engine's Python costs (docs/benchmarks.md).

    uvicorn --factory loadtest.bench.bare_app:create_app --port 8200   (ONSALE_REDIS_URL,
    BARE_PREFIX, BARE_ENGINE_EVENT)

`served(...)` loads the seats and runs it with N workers for a tool's run (the claim rate's
reference, and the T0 burst's `--target bare`)."""

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any, NamedTuple

import orjson
import redis.asyncio as aioredis
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from loadtest.devstack.services import redis_url

MINIMAL_CLAIM = """
local seat = redis.call('ZPOPMIN', KEYS[1])
if #seat == 0 then return {'SOLD_OUT'} end
redis.call('HSET', KEYS[2], seat[1], ARGV[1])
return {'OK', seat[1]}
"""

TRIVIAL = orjson.dumps({"ok": True})
SOLD_OUT = orjson.dumps({"error": {"code": "sold_out"}})  # the engine's refusal, as it says it


def free_seats(seats: int) -> Iterator[dict[str, int]]:
    """The bare claim's `seats` free seats ("s<i>" ranked i), as ZADD mappings of at most
    10,000 each (one command per mapping)."""
    for start in range(0, seats, 10_000):
        yield {f"s{i}": i for i in range(start, min(seats, start + 10_000))}


def answer(reply: list[Any]) -> Response:
    """201 with the script's code, or 409 with the engine's sold-out body."""
    if reply[0] != "OK":
        return Response(SOLD_OUT, status_code=409, media_type="application/json")
    return Response(
        orjson.dumps({"result": reply[0]}), status_code=201, media_type="application/json"
    )


def keys_of(prefix: str) -> tuple[str, str]:
    """The free seats (a sorted set) and their owners (a hash), in one slot."""
    return f"{prefix}:{{bare}}:free", f"{prefix}:{{bare}}:owners"


def create_app() -> Starlette:
    url = redis_url()
    prefix = os.environ.get("BARE_PREFIX", "onsale:bench:bare")
    keys = list(keys_of(prefix))
    engine_event = os.environ.get("BARE_ENGINE_EVENT", "")
    state: dict[str, object] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # A burst of thousands waits for one of 64 connections (a plain pool would fail the
        # 65th request with "Too many connections"): what a competent naive app does.
        pool = aioredis.BlockingConnectionPool.from_url(
            url, decode_responses=True, max_connections=64, timeout=60
        )
        client = aioredis.Redis(connection_pool=pool)
        state["script"] = client.register_script(MINIMAL_CLAIM)
        if engine_event:
            state["engine"] = engine_claim(client, engine_event)
        yield
        await client.aclose()
        await pool.aclose()  # a pool handed to the client is not the client's to close

    async def trivial(request: Request) -> Response:
        return Response(TRIVIAL, media_type="application/json")

    async def bare_claim(request: Request) -> Response:
        orjson.loads(await request.body() or b"{}")
        reply = await state["script"](keys=keys, args=[uuid.uuid4().hex])  # type: ignore[operator]
        return answer(reply)

    async def bare_engine_claim(request: Request) -> Response:
        orjson.loads(await request.body() or b"{}")
        return answer(await state["engine"](uuid.uuid4().hex))  # type: ignore[operator]

    return Starlette(
        routes=[
            Route("/trivial", trivial, methods=["GET"]),
            Route("/healthz", trivial, methods=["GET"]),  # what the burst's clients open with
            Route("/bare-claim", bare_claim, methods=["POST"]),
            Route("/bare-engine-claim", bare_engine_claim, methods=["POST"]),
            # The claim's own path: the same wrk script (a token per request) drives both, so
            # the load generator's work and the request's bytes are the same on each side.
            Route("/v1/events/{event_id}/holds", bare_claim, methods=["POST"]),
        ],
        lifespan=lifespan,
    )


def engine_claim(client: aioredis.Redis, event_id: str) -> Callable[[str], Awaitable[Any]]:
    """The engine's claim of the best seat of `event_id`, one FCALL with the function, keys and
    limits an API process passes (api/app.py store_for, read from this process's environment),
    `hold` both the hold id and a new login's name."""
    from api.app import store_for
    from api.settings import ApiSettings

    store = store_for(ApiSettings.from_env(os.environ), client)
    function, keys, limits = (
        store.scripts.function("hold_claim"), store.runner.keys(event_id), store.claim_limits
    )  # fmt: skip

    def claim(hold: str) -> Awaitable[Any]:
        return client.fcall(function, len(keys), *keys, hold, hold, "", *limits, "")

    return claim


class Served(NamedTuple):
    url: str
    pid: int  # uvicorn's main process: its workers are under it


@contextlib.contextmanager
def served(
    redis_url: str, prefix: str, seats: int, workers: int, env: Mapping[str, str] | None = None
) -> Iterator[Served]:
    """The bare app on a spare port with `workers` uvicorn workers (`onsale serve`'s
    configuration), `seats` free seats loaded first, `env` added to its environment (an API's,
    and BARE_ENGINE_EVENT, for the engine-script claim); yields its URL and main pid. Stopped
    with its whole process group, and its port free, on the way out; its keys deleted."""
    import redis as redis_sync

    from loadtest.devstack.stack import signal_group, spare_port, wait_healthy, wait_port_free

    r = redis_sync.Redis.from_url(redis_url)
    free, owners = keys_of(prefix)
    for mapping in free_seats(seats):
        r.zadd(free, mapping)
    port = spare_port()
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "uvicorn", "--factory", "loadtest.bench.bare_app:create_app",
            "--port", str(port), "--workers", str(workers), "--loop", "uvloop", "--http",
            "httptools", "--log-level", "warning", "--no-access-log",
        ],
        env={**os.environ, **(env or {}), "ONSALE_REDIS_URL": redis_url, "BARE_PREFIX": prefix},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its workers are signalled with it (signal_group)
    )  # fmt: skip
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc, 10.0, path="/trivial")
        yield Served(f"http://127.0.0.1:{port}", proc.pid)
    finally:
        signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(10)
        finally:
            signal_group(proc, signal.SIGKILL)
            wait_port_free(port, 10.0)
        r.delete(free, owners)
        r.close()


def sold(redis_url: str, prefix: str) -> dict[str, int]:
    """What a run left: seats given (owners) and seats still free."""
    import redis as redis_sync

    free, owners = keys_of(prefix)
    with redis_sync.Redis.from_url(redis_url) as r:
        return {"held": int(r.hlen(owners)), "free": int(r.zcard(free))}
