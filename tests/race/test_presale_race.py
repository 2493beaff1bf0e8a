"""Presale access codes under real concurrency (ADR 0049), on real Redis and on a Redis Cluster
with the production scripts (the server clock): 1,000 claims at once on a code with 10 uses
spend it exactly 10 times; the holds that go give their uses back, and exactly that many more
get in; logins with several tabs never spend a code beyond their own limit."""

import asyncio
import random
import uuid
from collections import Counter

import pytest

from engine.model import errors
from engine.model.event_config import EventConfig
from engine.store import Store
from engine.store.presales import Presale
from tests.conftest import seats
from tests.race.test_races import race_store

__all__ = ["race_store"]  # the fixture: on one server and on a cluster
pytestmark = [pytest.mark.redis, pytest.mark.slow]


async def presale(store: Store, n_seats: int) -> tuple[str, Presale]:
    """An event whose T0 is an hour away, in a presale open now."""
    event_id = f"ev-{uuid.uuid4().hex[:8]}"
    await store.create_event(
        event_id, seats(n_seats), EventConfig(hold_ttl_ms=480_000, quarantine_ms=900_000)
    )
    now = await store.read.server_time_ms()
    await store.open_sale(event_id, now + 3_600_000)
    return event_id, Presale("fans", now - 1_000, now + 3_600_000)


async def attempt(store: Store, event_id: str, login: str, hold_id: str, code: str) -> str:
    try:
        await store.claim(event_id, login, hold_id, access_code=code)
    except (errors.AccessCodeUsedUp, errors.AccessCodeLimit, errors.SoldOut) as exc:
        return exc.code
    return "ok"


async def test_1000_claims_on_a_code_with_10_uses_spend_it_10_times(race_store: Store) -> None:
    store = race_store
    event_id, window = await presale(store, 2_000)
    await store.presales.add(
        event_id, window, ["RACE10"], uses=10, per_login=0, expires_ms=window.closes_at_ms,
        batch_id="b1",
    )  # fmt: skip
    results = await asyncio.gather(
        *(attempt(store, event_id, f"u{i}", f"h{i}", "RACE10") for i in range(1_000))
    )
    assert Counter(results) == {"ok": 10, "access_code_used_up": 990}
    winners = [f"u{i}" for i, r in enumerate(results) if r == "ok"]
    assert {c.code: c.used for c in await store.presales.codes(event_id)} == {"RACE10": 10}
    # Three of them give their holds up: exactly three of a second wave get in.
    for login in winners[:3]:
        await store.release(event_id, f"h{login[1:]}", login)
    again = await asyncio.gather(
        *(attempt(store, event_id, f"v{i}", f"g{i}", "RACE10") for i in range(500))
    )
    assert Counter(again) == {"ok": 3, "access_code_used_up": 497}
    assert {c.code: c.used for c in await store.presales.codes(event_id)} == {"RACE10": 10}
    assert (await store.read.audit(event_id)).ok


async def test_tabs_of_one_login_never_spend_a_code_beyond_its_per_login_limit(
    race_store: Store,
) -> None:
    """200 logins with 1-4 tabs each claim at once with codes of 2 uses a login; every login's
    tabs replace one another, so each login holds one live hold and spends one use at most."""
    store = race_store
    event_id, window = await presale(store, 1_000)
    await store.presales.add(
        event_id, window, ["TABS"], uses=1_000, per_login=2, expires_ms=window.closes_at_ms,
        batch_id="b1",
    )  # fmt: skip
    rng = random.Random(5)
    tabs = [(f"u{i}", t) for i in range(200) for t in range(rng.randint(1, 4))]
    rng.shuffle(tabs)
    results = await asyncio.gather(
        *(attempt(store, event_id, login, f"h-{login}-{t}", "TABS") for login, t in tabs)
    )
    assert set(results) == {"ok"}
    used = await store.client.hget(store.key(event_id, "codes"), "u:TABS")
    assert int(used) == 200  # one live hold per login: its tabs traded, never stacked
    assert (await store.read.audit(event_id)).ok
