"""Listings page through 100k holds stably while claims and releases run (ADR 0025): every hold
that existed from the first page to the last is listed exactly once, and no hold twice."""

import asyncio
import time
from collections import Counter

import pytest

from engine.model.event_config import EventConfig
from engine.store import Store
from engine.views.listings import Listings
from tests.conftest import seats

pytestmark = [pytest.mark.redis, pytest.mark.slow]

HOLDS = 100_000
EXTRA_SEATS = 5_000
PAGE = 50


async def fill(store: Store, event_id: str, n: int) -> list[str]:
    """`n` holds, one per login, claimed in pipelined batches."""
    ids = [f"h{i:06d}" for i in range(n)]
    for start in range(0, n, 2_000):
        batch = ids[start : start + 2_000]
        await asyncio.gather(*(store.claim(event_id, f"u{h}", h) for h in batch))
    return ids


async def churn(store: Store, event_id: str, holds: int, stop: asyncio.Event) -> int:
    """Claims new holds and releases them (and some of the first ones) until told to stop."""
    n = 0
    while not stop.is_set():
        hold_id = f"x{n:06d}"
        await store.claim(event_id, f"c{n}", hold_id)
        if n % 2:
            await store.release(event_id, hold_id, f"c{n}")
        first = f"h{n * 7 % holds:06d}"
        await store.release(event_id, first, f"u{first}")
        n += 1
    return n


# 16,300 holds: the claims grow the hash past 16,384 entries while it is paged, so Redis
# rehashes it into a table twice the size mid-listing.
@pytest.mark.parametrize("holds", [HOLDS, 16_300])
async def test_paging_100k_holds_during_claims_lists_each_once(
    real_store: Store, holds: int
) -> None:
    store = real_store  # no per-login limits: one login per hold
    event_id = "paging"
    await store.create_event(
        event_id,
        seats(holds + EXTRA_SEATS),
        EventConfig(hold_ttl_ms=3_600_000, quarantine_ms=60_000),
    )
    await store.open_sale(event_id)
    started = time.monotonic()
    initial = set(await fill(store, event_id, holds))
    fill_s = time.monotonic() - started
    stop = asyncio.Event()
    claimer = asyncio.create_task(churn(store, event_id, holds, stop))
    listings = Listings(store.read)
    seen: Counter[str] = Counter()
    cursor: str | None = None
    pages = 0
    while True:
        page = await listings.holds(event_id, cursor, PAGE)
        assert len(page.items) <= PAGE
        seen.update(h.hold_id for h in page.items)
        pages += 1
        await asyncio.sleep(0)  # the claimer runs between pages
        if page.cursor is None:
            break
        cursor = page.cursor
    stop.set()
    churned = await claimer
    assert churned > 100, "the claims did not run while the listing paged"
    assert holds > 20_000 or holds + churned > 16_384, "the hash did not grow past a rehash"
    assert initial <= set(seen), f"missed {len(initial - set(seen))} holds"
    repeated = {h: n for h, n in seen.items() if n > 1}
    assert not repeated, f"listed more than once: {list(repeated)[:5]}"
    assert pages >= holds // PAGE
    print(f"fill {fill_s:.1f}s, {pages} pages, {churned} claims during paging")
    report = await store.read.audit(event_id)
    assert report.ok, report.violations[:5]
