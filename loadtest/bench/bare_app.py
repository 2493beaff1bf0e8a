"""The naive ceiling of a Python HTTP + redis-py stack, for side-by-side comparison with the
real claim endpoint: `GET /trivial` returns a constant JSON body; `POST /bare-claim` parses the
JSON body and runs one EVALSHA of a minimal claim (pop the best free seat, record its owner).
Same server configuration as `onsale serve` (uvicorn, uvloop, httptools, orjson).

    uvicorn --factory loadtest.bench.bare_app:create_app --port 8200   (ONSALE_REDIS_URL,
    BARE_PREFIX)
"""

import contextlib
import os
import uuid
from collections.abc import AsyncIterator

import orjson
import redis.asyncio as aioredis
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

MINIMAL_CLAIM = """
local seat = redis.call('ZPOPMIN', KEYS[1])
if #seat == 0 then return {'SOLD_OUT'} end
redis.call('HSET', KEYS[2], seat[1], ARGV[1])
return {'OK', seat[1]}
"""

TRIVIAL = orjson.dumps({"ok": True})


def create_app() -> Starlette:
    url = os.environ.get("ONSALE_REDIS_URL", "redis://127.0.0.1:6379/0")
    prefix = os.environ.get("BARE_PREFIX", "onsale:bench:bare")
    keys = [f"{prefix}:{{bare}}:free", f"{prefix}:{{bare}}:owners"]
    state: dict[str, object] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        client = aioredis.from_url(url, decode_responses=True, max_connections=64)
        state["script"] = client.register_script(MINIMAL_CLAIM)
        yield
        await client.aclose()

    async def trivial(request: Request) -> Response:
        return Response(TRIVIAL, media_type="application/json")

    async def bare_claim(request: Request) -> Response:
        orjson.loads(await request.body() or b"{}")
        reply = await state["script"](keys=keys, args=[uuid.uuid4().hex])  # type: ignore[operator]
        return Response(
            orjson.dumps({"result": reply[0]}),
            status_code=201 if reply[0] == "OK" else 409,
            media_type="application/json",
        )

    return Starlette(
        routes=[
            Route("/trivial", trivial, methods=["GET"]),
            Route("/bare-claim", bare_claim, methods=["POST"]),
            # The claim's own path: the same wrk script (a token per request) drives both, so
            # the load generator's work and the request's bytes are the same on each side.
            Route("/v1/events/{event_id}/holds", bare_claim, methods=["POST"]),
        ],
        lifespan=lifespan,
    )
