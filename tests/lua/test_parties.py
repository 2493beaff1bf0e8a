"""A party: several seats in one hold (one charge, one deadline), on fakeredis and real Redis.
Specific seats are all or nothing; "n best" takes the best block of adjacent seats (consecutive
ranks in one section) when one is free, else the n best single seats; the whole party moves
together through every transition, and the per-login cap counts seats."""

import pytest

from engine.gate.claims import GatedClaims
from engine.gate.soldout import SoldOutMemory
from engine.model import errors
from engine.model.event_config import EventConfig
from engine.model.holds import LoginLimits, SeatSpec
from engine.model.states import HoldState
from engine.store import Store
from tests.conftest import Sale
from tests.helpers import callback, wait_until

T0 = 1_900_000_000_000


async def venue(store: Store, rows: dict[str, list[float]], *, now_ms: int = T0) -> Sale:
    """Seats named <section><rank>, e.g. A1, A2, B10."""
    event_id = f"party-{len(rows)}-{sum(map(len, rows.values()))}"
    seats = [SeatSpec(f"{sec}{int(r)}", r, sec) for sec, ranks in rows.items() for r in ranks]
    await store.create_event(
        event_id, seats, EventConfig(hold_ttl_ms=480_000, quarantine_ms=900_000)
    )
    sale = Sale(store, event_id)
    await sale.at(now_ms)
    await store.open_sale(event_id)
    return sale


async def test_specific_seats_are_all_or_nothing(store: Store) -> None:
    sale = await venue(store, {"A": [1, 2, 3, 4]})
    await store.claim(sale.event_id, "other", "o1", "A3")
    with pytest.raises(errors.SeatTaken):
        await store.claim(sale.event_id, "fam", "f1", seats=["A1", "A2", "A3"])
    with pytest.raises(errors.UnknownSeat):
        await store.claim(sale.event_id, "fam", "f1", seats=["A1", "Z9"])
    assert (await store.read.availability(sale.event_id)).free == 3  # nothing taken
    party = await store.claim(sale.event_id, "fam", "f1", seats=["A1", "A2", "A4"])
    assert party.seat_ids == ("A1", "A2", "A4")
    a = await store.read.availability(sale.event_id)
    assert (a.free, a.held) == (0, 4)
    await sale.audit_ok()


async def test_n_best_takes_the_best_adjacent_block_else_the_best_seats(store: Store) -> None:
    # A1, A2 free but A3 taken: the best block of 3 is B10-B12, not A1, A2, A4.
    sale = await venue(store, {"A": [1, 2, 3, 4], "B": [10, 11, 12, 13]})
    await store.claim(sale.event_id, "other", "o1", "A3")
    party = await store.claim(sale.event_id, "fam", "f1", quantity=3)
    assert party.seat_ids == ("B10", "B11", "B12")
    # Free now: A1, A2, A4, B13. No three consecutive ranks in one section: the fallback takes
    # the three best single seats.
    party2 = await store.claim(sale.event_id, "fam2", "f2", quantity=3)
    assert party2.seat_ids == ("A1", "A2", "A4")
    await sale.audit_ok()


async def test_a_block_never_spans_two_sections(store: Store) -> None:
    sale = await venue(store, {"A": [1, 2], "B": [3, 4, 5]})
    party = await store.claim(sale.event_id, "fam", "f1", quantity=3)
    assert party.seat_ids == ("B3", "B4", "B5")  # A2-B3 have consecutive ranks, not one row
    await sale.audit_ok()


async def test_a_party_larger_than_what_is_free_is_refused_and_leaves_no_trace(
    store: Store,
) -> None:
    sale = await venue(store, {"A": [1, 2, 3]})
    await store.claim(sale.event_id, "solo", "s1", quantity=2)
    outbox = len(await store.read.outbox(sale.event_id))
    # Not SOLD_OUT: a seat is free, and API processes remember SOLD_OUT for every claim.
    with pytest.raises(errors.NotEnoughSeats) as short:
        await store.claim(sale.event_id, "fam", "f1", quantity=2)
    assert short.value.public_details() == {"available": 1}
    assert len(await store.read.outbox(sale.event_id)) == outbox
    assert (await store.read.availability(sale.event_id)).free == 1
    # The first login may grow its own party: its two seats come back into the count.
    bigger = await store.claim(sale.event_id, "solo", "s2", quantity=3)
    assert (bigger.replaced, len(bigger.seat_ids)) == ("s1", 3)
    await sale.audit_ok()


async def test_a_refused_party_leaves_single_seats_claimable_with_the_memory_on(
    store: Store,
) -> None:
    """The sold-out memory is entered only from SOLD_OUT: a party refused for want of seats
    must not make this process refuse single-seat claims while seats are free."""
    memory = SoldOutMemory(store.client, store.prefix, ttl_s=30.0)
    claims = GatedClaims(store, memory)
    await memory.start()
    try:
        await wait_until(lambda: memory.listening)
        sale = await venue(store, {"A": [1, 2, 3]})
        await claims.claim(sale.event_id, "solo", "s1", quantity=2)
        with pytest.raises(errors.NotEnoughSeats):
            await claims.claim(sale.event_id, "fam", "f1", quantity=4)
        single = await claims.claim(sale.event_id, "one", "o1")
        assert single.seat_ids == ("A3",)
        with pytest.raises(errors.SoldOut):  # now it is sold out, and remembered
            await claims.claim(sale.event_id, "two", "t1")
        await wait_until(lambda: memory.refuses(sale.event_id, "t2"))
    finally:
        await memory.stop()


async def test_an_event_caps_the_party_size(store: Store) -> None:
    await store.create_event(
        "small-parties",
        [SeatSpec(f"A{i}", i, "A") for i in range(1, 9)],
        EventConfig(hold_ttl_ms=480_000, quarantine_ms=900_000, max_party=3),
    )
    await Sale(store, "small-parties").at(T0)
    await store.open_sale("small-parties")
    with pytest.raises(errors.PartyTooLarge) as big:
        await store.claim("small-parties", "fam", "f1", quantity=4)
    assert big.value.public_details() == {"max_party": 3}
    with pytest.raises(errors.PartyTooLarge):
        await store.claim("small-parties", "fam", "f1", seats=["A1", "A2", "A3", "A4"])
    assert len((await store.claim("small-parties", "fam", "f1", quantity=3)).seat_ids) == 3


async def test_a_party_moves_as_one_through_expiry_and_confirmation(store: Store) -> None:
    sale = await venue(store, {"A": [1, 2, 3, 4, 5, 6]})
    expiring = await store.claim(sale.event_id, "late", "h1", quantity=2)
    paying = await store.claim(sale.event_id, "fam", "h2", quantity=4)
    await store.start_charge(sale.event_id, "h2", "fam", "c2", 4 * 100)
    assert (await callback(sale, "c2", "CAPTURED")).hold_state == HoldState.CONFIRMED
    await sale.at(T0 + 480_000)
    assert (await store.sweep(sale.event_id)).expired == 1
    a = await store.read.availability(sale.event_id)
    assert (a.free, a.held, a.sold) == (2, 0, 4)
    assert set(await store.read.free_seats(sale.event_id)) == set(expiring.seat_ids)
    assert (await store.read.hold(sale.event_id, "h2")).seat_ids == paying.seat_ids
    await sale.audit_ok()


async def test_a_party_back_on_sale_is_one_restock_and_its_seats_keep_their_ranks(
    store: Store,
) -> None:
    """Every seat of a party moves in one step: released on a sold-out event, its seats come
    back with their own ranks, the event counts one restock (0 -> 3 free), not one per seat,
    and the block hints are forgotten (the block is found again)."""
    sale = await venue(store, {"A": [1, 2, 3], "B": [7, 8]})
    party = await store.claim(sale.event_id, "fam", "h1", quantity=3)
    await store.claim(sale.event_id, "duo", "h2", quantity=2)
    event_key = store.keys(sale.event_id)[0]
    restocks = int(await store.client.hget(event_key, "restocks") or 0)
    assert await store.release(sale.event_id, "h1", "fam") == HoldState.RELEASED
    assert int(await store.client.hget(event_key, "restocks") or 0) == restocks + 1
    free = await store.client.zrange(store.keys(sale.event_id)[2], 0, -1, withscores=True)
    assert free == [("A1", 1.0), ("A2", 2.0), ("A3", 3.0)]
    again = await store.claim(sale.event_id, "fam2", "h3", quantity=3)
    assert again.seat_ids == party.seat_ids
    await sale.audit_ok()


async def test_no_hold_owns_more_than_a_thousand_seats_whatever_the_event_allows(
    store: Store,
) -> None:
    """An event without max_party still refuses a party over 1,000 seats (a hold's seats go
    into one command, and Lua unpacks at most about 8,000 values): refused before anything is
    written, specific seats or n best."""
    sale = await venue(store, {"A": [float(r) for r in range(1, 1102)]})
    with pytest.raises(errors.PartyTooLarge) as refused:
        await store.claim(sale.event_id, "big", "b1", quantity=1001)
    assert refused.value.public_details() == {"max_party": 1000}
    with pytest.raises(errors.PartyTooLarge):
        await store.claim(sale.event_id, "big", "b2", seats=[f"A{r}" for r in range(1, 1002)])
    assert (await store.read.availability(sale.event_id)).free == 1101
    party = await store.claim(sale.event_id, "big", "b3", quantity=1000)
    assert len(party.seat_ids) == 1000
    assert await store.release(sale.event_id, "b3", "big") == HoldState.RELEASED
    assert (await store.read.availability(sale.event_id)).free == 1101
    await sale.audit_ok()


async def test_a_party_in_flight_at_its_deadline_is_quarantined_whole(store: Store) -> None:
    sale = await venue(store, {"A": [1, 2, 3]})
    await store.claim(sale.event_id, "fam", "h1", quantity=3)
    await store.start_charge(sale.event_id, "h1", "fam", "c1", 300)
    await sale.at(T0 + 480_000)
    await store.sweep(sale.event_id)
    a = await store.read.availability(sale.event_id)
    assert (a.blocked, a.held, a.free) == (3, 0, 0)
    late = await callback(sale, "c1", "CAPTURED")  # within the quarantine: it wins
    assert late.hold_state == HoldState.CONFIRMED
    assert (await store.read.availability(sale.event_id)).sold == 3
    await sale.audit_ok()


async def test_the_cap_counts_seats(store: Store) -> None:
    s = Store(store.client, scripts=store.scripts, prefix=store.prefix, limits=LoginLimits(cap=4))
    sale = await venue(s, {"A": [1, 2, 3, 4, 5, 6, 7, 8]})
    with pytest.raises(errors.LimitExceeded):
        await s.claim(sale.event_id, "fam", "h0", quantity=5)
    await s.claim(sale.event_id, "fam", "h1", quantity=3)
    await s.start_charge(sale.event_id, "h1", "fam", "c1", 300)
    await callback(sale, "c1", "CAPTURED")
    with pytest.raises(errors.LimitExceeded):  # 3 bought + 2 > 4
        await s.claim(sale.event_id, "fam", "h2", quantity=2)
    assert len((await s.claim(sale.event_id, "fam", "h3")).seat_ids) == 1  # 3 + 1 = 4
    await sale.audit_ok()


async def test_a_rebuild_restores_a_sold_party_whole_or_not_at_all(store: Store) -> None:
    seats = [SeatSpec(f"A{i}", i, "A") for i in (1, 2, 3)]
    await store.create_event(
        "rebuilt", seats, EventConfig(hold_ttl_ms=480_000, quarantine_ms=900_000)
    )
    restored = await store.restore.hold("rebuilt", "h1", "fam", "A1,A2", "c1", T0)
    assert restored == "RESTORED"
    a = await store.read.availability("rebuilt")
    assert (a.sold, a.free) == (2, 1)
    assert (await store.read.hold("rebuilt", "h1")).seat_ids == ("A1", "A2")
    clash = await store.restore.hold("rebuilt", "h2", "other", "A3,A2", "c2", T0)
    assert clash == "SEAT_NOT_FREE"
    assert (await store.read.availability("rebuilt")).free == 1  # A3 was not taken either
    twice = await store.restore.hold("rebuilt", "h3", "other", "A3,A3", "c3", T0)
    assert twice == "SEAT_NOT_FREE"  # a ledger row listing a seat twice takes nothing
    a = await store.read.availability("rebuilt")
    assert (a.sold, a.free) == (2, 1)


async def test_the_best_block_is_found_across_the_chunks_the_script_reads(store: Store) -> None:
    """The script reads free seats 2n at a time first (8 for a party of 4), then in doubling
    chunks: a block whose seats straddle two chunks (free positions 6-9 here) is still found,
    and is still the best one."""
    sale = await venue(store, {"A": [float(r) for r in range(1, 401)]})
    for r in range(2, 13, 2):  # take every even rank up to 12: A1, A3, ... A11 stay free
        await store.claim(sale.event_id, f"x{r}", f"x{r}", f"A{r}")
    # Free by rank: A1, A3, ..., A11 (6 seats, no two adjacent), then A13, A14, A15, ...
    party = await store.claim(sale.event_id, "fam", "f1", quantity=4)
    assert party.seat_ids == ("A13", "A14", "A15", "A16")
    # Past several chunks (8, 16, 32 seats): 41 more isolated seats before the next block.
    for r in range(18, 98, 2):
        await store.claim(sale.event_id, f"y{r}", f"y{r}", f"A{r}")
    party2 = await store.claim(sale.event_id, "fam2", "f2", quantity=4)
    assert party2.seat_ids == ("A97", "A98", "A99", "A100")  # A97 is free: odd
    await sale.audit_ok()


async def test_a_block_that_comes_back_is_found_again(store: Store) -> None:
    """Each search for n starts where the last one found its block (taking seats never makes a
    block); a seat back on sale forgets that, so a better block freed later is found first."""
    sale = await venue(store, {"A": [1, 2, 3], "B": [11, 12, 13, 14, 15, 16]})
    first = await store.claim(sale.event_id, "fam1", "f1", quantity=3)
    assert first.seat_ids == ("A1", "A2", "A3")
    second = await store.claim(sale.event_id, "fam2", "f2", quantity=3)
    assert second.seat_ids == ("B11", "B12", "B13")
    await store.release(sale.event_id, "f1", "fam1")  # the best block is back
    third = await store.claim(sale.event_id, "fam3", "f3", quantity=3)
    assert third.seat_ids == ("A1", "A2", "A3")
    fourth = await store.claim(sale.event_id, "fam4", "f4", quantity=3)
    assert fourth.seat_ids == ("B14", "B15", "B16")
    # No block of 3 left: the fallback (n best single seats) answers, and the next search for 3
    # is short-circuited until a seat comes back.
    await store.release(sale.event_id, "f2", "fam2")
    await store.claim(sale.event_id, "one", "o1", "B12")
    fifth = await store.claim(sale.event_id, "fam5", "f5", quantity=2)
    assert fifth.seat_ids == ("B11", "B13")  # no two adjacent free: the two best
    await sale.audit_ok()
