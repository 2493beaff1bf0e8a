"""The PostgreSQL baseline of the benchmarks (loadtest/pg_baseline/server.py) answers like the
engine's claim: same codes, same replays, no seat twice, and its sold-out shortcut still gives a
retried key its hold. In process, on a private database."""

import asyncio
import dataclasses
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from itsdangerous import URLSafeTimedSerializer

from engine.model import keys
from loadtest.pg_baseline import server as pg_baseline
from loadtest.pg_baseline.server import Baseline, BaselineSettings
from tests.pg import private_database

pytestmark = [pytest.mark.postgres]

EVENT = "ev-base"
SECRET = "baseline-test-secret"


@dataclass
class Running:
    dsn: str
    http: httpx.AsyncClient
    baseline: Baseline

    async def claim(
        self, login: str, key: str, seat_id: str | None = None, event_id: str = EVENT
    ) -> httpx.Response:
        token = URLSafeTimedSerializer(SECRET, salt="onsale-login").dumps({"l": login})
        return await self.http.post(
            f"/v1/events/{event_id}/holds",
            json={} if seat_id is None else {"seat_id": seat_id},
            headers={"Authorization": f"Bearer {token}", "Idempotency-Key": key},
        )


@asynccontextmanager
async def running(seats: int, **settings: Any) -> AsyncIterator[Running]:
    async with private_database() as dsn:
        await pg_baseline.setup(dsn, EVENT, seats)
        app = pg_baseline.create_app(
            BaselineSettings(pg_dsn=dsn, token_secret=SECRET, pg_pool_max=4, **settings)
        )
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://baseline", timeout=30
            ) as http,
        ):
            yield Running(dsn, http, app.state.baseline)


def code(r: httpx.Response) -> str:
    body: dict[str, Any] = r.json()
    assert set(body["error"]) == {"code", "message", "request_id"}, body
    return str(body["error"]["code"])


async def test_replay_returns_200_with_the_same_seat() -> None:
    async with running(5) as b:
        first = await b.claim("alice", "k1")
        assert first.status_code == 201, first.text
        body = first.json()
        assert body["hold_id"] == keys.hold_key(EVENT, "alice", "k1") and body["seat_id"] == "s0"
        assert body["state"] == "RESERVED" and body["expires_ms"] > time.time() * 1000
        again = await b.claim("alice", "k1")
        assert again.status_code == 200 and again.json() == body
        assert (await b.claim("alice", "k1", seat_id="s4")).json() == body  # the key decides
        assert (await b.claim("bob", "k2")).json()["seat_id"] == "s1"  # best rank next


async def test_the_same_key_from_another_login_is_another_hold() -> None:
    async with running(5) as b:
        assert (await b.claim("alice", "k1")).status_code == 201
        r = await b.claim("bob", "k1")  # as on the engine: keys are per login (ADR 0019)
        assert r.status_code == 201 and r.json()["hold_id"] == keys.hold_key(EVENT, "bob", "k1")
        assert await pg_baseline.audit(b.dsn, EVENT) == {
            "seats": 5,
            "held": 2,
            "distinct_seats_held": 2,
            "holds": 2,
            "holds_matching_seat": 2,
        }


async def test_specific_seats_and_refusals_use_the_api_codes() -> None:
    async with running(5) as b:
        r = await b.claim("alice", "k1", seat_id="s3")
        assert r.status_code == 201 and r.json()["seat_id"] == "s3"
        r = await b.claim("bob", "k2", seat_id="s3")
        assert r.status_code == 409 and code(r) == "seat_taken"
        r = await b.claim("bob", "k3", seat_id="s99")
        assert r.status_code == 404 and code(r) == "unknown_seat"
        r = await b.claim("bob", "k4", event_id="no-such-event")
        assert r.status_code == 404 and code(r) == "event_not_found"
        r = await b.http.post(f"/v1/events/{EVENT}/holds", json={})
        assert r.status_code == 401 and code(r) == "unauthorized"
        r = await b.claim("bob", "bad key!")
        assert r.status_code == 400 and code(r) == "invalid_request"
        assert (await b.http.get("/healthz")).json() == {"ok": True}


async def test_no_seat_twice_under_200_concurrent_claims() -> None:
    async with running(20) as b:
        replies = await asyncio.gather(*(b.claim(f"u{i}", f"k{i}") for i in range(200)))
        answers = Counter(str(r.status_code) if r.status_code < 300 else code(r) for r in replies)
        assert answers == {"201": 20, "sold_out": 180}
        seats = [r.json()["seat_id"] for r in replies if r.status_code == 201]
        assert sorted(seats) == sorted(f"s{i}" for i in range(20))
        audit = await pg_baseline.audit(b.dsn, EVENT)
        assert audit["held"] == audit["holds"] == audit["distinct_seats_held"] == 20
        assert audit["holds_matching_seat"] == 20


async def test_concurrent_attempts_with_one_key_make_one_hold() -> None:
    async with running(100) as b:
        replies = await asyncio.gather(*(b.claim("alice", "retried") for _ in range(30)))
        assert sorted(r.status_code for r in replies) == [200] * 29 + [201]
        assert len({r.json()["seat_id"] for r in replies}) == 1
        replies = await asyncio.gather(*(b.claim("bob", "mine", seat_id="s50") for _ in range(30)))
        assert sorted(r.status_code for r in replies) == [200] * 29 + [201]
        assert (await pg_baseline.audit(b.dsn, EVENT))["holds_matching_seat"] == 2


class NoPool:
    """Stands in for the pool once the flag is up: any claim reaching PostgreSQL fails."""

    def acquire(self) -> Any:
        raise AssertionError("the sold-out shortcut went to PostgreSQL")

    async def close(self) -> None:
        pass


async def test_sold_out_shortcut_still_replays_an_existing_key() -> None:
    async with running(3, sold_out_ttl_ms=60_000) as b:
        won = {k: (await b.claim("alice", k)).json() for k in ("k1", "k2", "k3")}
        r = await b.claim("bob", "late")
        assert r.status_code == 409 and code(r) == "sold_out"
        for _ in range(100):  # the flag goes up in the background
            if EVENT in b.baseline.flags:
                break
            await asyncio.sleep(0.02)
        assert set(b.baseline.flags[EVENT].holds) == {
            keys.hold_key(EVENT, "alice", k) for k in ("k1", "k2", "k3")
        }
        pool, b.baseline.pool = b.baseline.pool, NoPool()
        try:
            r = await b.claim("alice", "k2")
            assert r.status_code == 200 and r.json() == won["k2"]
            r = await b.claim("bob", "k2")  # bob's k2 is not alice's: a new claim, sold out
            assert r.status_code == 409 and code(r) == "sold_out"
            r = await b.claim("carol", "new")
            assert r.status_code == 409 and code(r) == "sold_out"
        finally:
            b.baseline.pool = pool
        # Once the flag lapses, PostgreSQL answers again, the same.
        flag = b.baseline.flags[EVENT]
        b.baseline.flags[EVENT] = dataclasses.replace(flag, until=0.0)
        r = await b.claim("alice", "k2")
        assert r.status_code == 200 and r.json() == won["k2"]
