"""The bare app's claim that runs the engine's own claim script (loadtest/bench/bare_app.py):
the reference that tells how far the script alone keeps a claim from the bare claim. It must
claim for real, through the engine's function on the engine's event, a new login each time."""

import httpx
import pytest
import redis.asyncio as aioredis

from engine.model.event_config import EventConfig
from engine.store import Store
from loadtest.bench import bare_app
from loadtest.devstack.scratch import api_env
from tests.conftest import REDIS_URL, _drop_prefix, new_prefix, seats

pytestmark = pytest.mark.redis


async def test_the_engine_script_claim_takes_the_engines_seats(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = aioredis.from_url(REDIS_URL, decode_responses=True)
    store = Store(client, prefix=new_prefix())  # the production library, as the API loads it
    try:
        await store.scripts.load_all()
        await store.create_event("ev", seats(3), EventConfig(hold_ttl_ms=60_000))
        await store.open_sale("ev")
        # An API's environment with its per-login limits on, as the claim benchmark runs it.
        for name, value in api_env(
            REDIS_URL, limits=True, ONSALE_KEY_PREFIX=store.prefix,
            BARE_PREFIX=f"{store.prefix}:bare", BARE_ENGINE_EVENT="ev",
        ).items():  # fmt: skip
            monkeypatch.setenv(name, value)
        app = bare_app.create_app()
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://b") as http,
        ):
            answers = [(await http.post("/bare-engine-claim", json={})) for _ in range(4)]
        assert [a.status_code for a in answers] == [201, 201, 201, 409]
        assert answers[-1].json() == {"error": {"code": "sold_out"}}
        # Each claim was the engine's: a hold of a login of its own, the seat owned by it.
        logins = await client.hgetall(store.key("ev", "logins"))
        assert len(logins) == 3 and len(set(logins.values())) == 3
        owners = await client.hgetall(store.key("ev", "owners"))
        assert sorted(owners.values()) == sorted(f"H:{hold}" for hold in logins.values())
        assert await client.zcard(store.key("ev", "free")) == 0
    finally:
        await _drop_prefix(client, store.prefix)
        await client.aclose()
