"""event_seats_add, table by table, on fakeredis and on real Redis: a chunk is added whole or not
at all, ranks are finite, and a large seat map goes in chunks the script accepts."""

from typing import Any

import pytest
from redis.exceptions import ResponseError

from engine.model import errors
from engine.model.event_config import EventConfig
from engine.model.holds import SeatSpec
from engine.store import Store, prices
from engine.store import transitions as store_module
from engine.views.sections import SectionsInterleaved, section_availability

SEATS_ADD = "event_seats_add"


async def draft(store: Store, event_id: str = "ev") -> str:
    await store.create_event(
        event_id, [SeatSpec("s0", 0.0)], EventConfig(hold_ttl_ms=60_000, quarantine_ms=60_000)
    )
    return event_id


async def add(store: Store, event_id: str, *triples: tuple[str, Any, str]) -> list[Any]:
    args = [value for triple in triples for value in triple]
    return await store.scripts.call(SEATS_ADD, store.keys(event_id), args)


async def seats_total(store: Store, event_id: str) -> int:
    return (await store.read.availability(event_id)).seats_total


async def test_a_chunk_is_added_whole_with_exact_ranks_and_sections(store: Store) -> None:
    event_id = await draft(store)
    reply = await add(store, event_id, ("lo", -1e9, ""), ("hi", 1e9, "B"), ("mid", 0.25, "A"))
    assert reply == ["ADDED", 3]
    scores = await store.client.zrange(store.key(event_id, "seats"), 0, -1, withscores=True)
    assert scores == [("lo", -1e9), ("s0", 0.0), ("mid", 0.25), ("hi", 1e9)]
    assert await store.client.hgetall(store.key(event_id, "sections")) == {"hi": "B", "mid": "A"}
    assert await store.read.free_seats(event_id) == ["lo", "s0", "mid", "hi"]
    a = await store.read.availability(event_id)
    assert (a.seats_total, a.free) == (4, 4)


@pytest.mark.parametrize(
    ("triples", "reply"),
    [
        ((("a", 1, ""), ("b", 2, ""), ("a", 3, "")), ["DUPLICATE_SEAT", "a"]),  # within the chunk
        ((("a", 1, ""), ("s0", 2, "")), ["DUPLICATE_SEAT", "s0"]),  # added by an earlier chunk
    ],
)
async def test_a_chunk_with_a_duplicate_adds_nothing(
    store: Store, triples: tuple[tuple[str, Any, str], ...], reply: list[Any]
) -> None:
    event_id = await draft(store)
    assert await add(store, event_id, *triples) == reply
    assert await seats_total(store, event_id) == 1
    assert await store.client.zcard(store.key(event_id, "seats")) == 1


@pytest.mark.parametrize("rank", ["inf", "-inf", "nan", "x", ""])
async def test_a_rank_that_is_not_a_finite_number_is_a_bug_and_adds_nothing(
    store: Store, rank: str
) -> None:
    event_id = await draft(store)
    with pytest.raises(ResponseError, match="BAD_ARGS rank of b"):
        await add(store, event_id, ("a", 1, ""), ("b", rank, ""))
    assert await seats_total(store, event_id) == 1


@pytest.mark.parametrize(("n", "added"), [(1000, True), (1001, False)])
async def test_a_chunk_takes_at_most_1000_seats(store: Store, n: int, added: bool) -> None:
    event_id = await draft(store)
    triples = [(f"t{i}", i, "") for i in range(n)]
    if added:
        assert await add(store, event_id, *triples) == ["ADDED", n]
    else:
        with pytest.raises(ResponseError, match="BAD_ARGS"):
            await add(store, event_id, *triples)
    assert await seats_total(store, event_id) == (1 + n if added else 1)


async def test_seats_go_only_to_a_draft_of_an_event_that_exists(store: Store) -> None:
    assert await add(store, "nope", ("a", 1, "")) == ["NOT_FOUND"]
    event_id = await draft(store)
    await store.open_sale(event_id)
    assert await add(store, event_id, ("a", 1, "")) == ["NOT_DRAFT"]


async def test_a_large_seat_map_goes_in_chunks_the_script_accepts(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes: list[int] = []
    call = store.scripts.call

    async def counting(name: str, keys: list[str], args: list[Any]) -> list[Any]:
        if name == SEATS_ADD:
            sizes.append(len(args) // 3)
        return await call(name, keys, args)

    monkeypatch.setattr(store.scripts, "call", counting)
    store.runner.pipeline = None  # every script call through `scripts.call`, to be counted
    n = 2 * store_module.SEATS_CHUNK_MAX + 1
    seats = [SeatSpec(f"s{i}", float(i)) for i in range(n)]
    assert (
        await store.create_event(
            "big", seats, EventConfig(hold_ttl_ms=60_000, quarantine_ms=60_000)
        )
        == n
    )
    chunk = store_module.SEATS_CHUNK_MAX
    assert sizes == [chunk, chunk, 1] and chunk <= 1000
    assert await seats_total(store, "big") == n


async def test_free_seats_per_section_are_counted_without_a_scan(store: Store) -> None:
    seats = [SeatSpec(f"A{i}", i, "A") for i in range(1, 6)]
    seats += [SeatSpec(f"B{i}", 10 + i, "B") for i in range(1, 4)]
    await store.create_event("sec", seats, EventConfig(hold_ttl_ms=60_000, quarantine_ms=60_000))
    await store.open_sale("sec")
    await store.claim("sec", "fam", "f1", quantity=3)  # A1-A3
    await store.claim("sec", "one", "o1", "B2")
    counts = await section_availability(store.read, "sec")
    assert [(c.section, c.seats, c.free) for c in counts] == [("A", 5, 2), ("B", 3, 2)]
    await store.release("sec", "f1", "fam")
    assert [c.free for c in await section_availability(store.read, "sec")] == [5, 2]


async def test_interleaved_sections_are_refused_not_miscounted(store: Store) -> None:
    seats = [SeatSpec("A1", 1, "A"), SeatSpec("B1", 2, "B"), SeatSpec("A2", 3, "A")]
    await store.create_event("mixed", seats, EventConfig(hold_ttl_ms=60_000, quarantine_ms=60_000))
    await store.open_sale("mixed")
    with pytest.raises(SectionsInterleaved):
        await section_availability(store.read, "mixed")
    with pytest.raises(errors.EventNotFound):
        await section_availability(store.read, "nope")


@pytest.mark.parametrize("book_max", [100, 1])
async def test_a_process_keeps_an_events_prices_and_answers_claims_from_them(
    store: Store, monkeypatch: pytest.MonkeyPatch, book_max: int
) -> None:
    """engine/store/prices.py PriceBook: a table up to BOOK_SEATS_MAX seats is read once and kept; a
    larger one is read per claim, its seats only; both answer the same prices."""
    monkeypatch.setattr(prices, "BOOK_SEATS_MAX", book_max)
    event_id = "priced"
    spec = [SeatSpec("a", 0, "A", 9_000), SeatSpec("b", 1, "A", 4_500), SeatSpec("c", 2, "A")]
    await store.create_event(
        event_id, spec, EventConfig(hold_ttl_ms=60_000, quarantine_ms=60_000), price_minor=1_000
    )
    book = prices.PriceBook(store.runner)
    assert await book.prices(event_id, ["c", "a", "b"]) == [1_000, 9_000, 4_500]
    kept = book._tables[event_id].own
    assert kept == ({"a": 9_000, "b": 4_500} if book_max >= 2 else None)
    assert await book.prices(event_id, ["b"]) == [4_500]
