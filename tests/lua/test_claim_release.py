"""hold_claim and hold_release, table by table, on fakeredis and on real Redis."""

import orjson
import pytest

from engine.model import errors
from engine.model.event_config import EventConfig
from engine.model.states import ChargeState, HoldState
from engine.store import Store
from tests.conftest import Sale, open_sale, seats
from tests.helpers import callback, terminal_records

T0 = 1_900_000_000_000


async def test_best_available_takes_seats_by_rank_then_sold_out(store: Store) -> None:
    sale = await open_sale(store, 3, now_ms=T0)
    got = [(await store.claim(sale.event_id, f"u{i}", f"h{i}")).listing for i in range(3)]
    assert got == ["s00000", "s00001", "s00002"]
    with pytest.raises(errors.SoldOut):
        await store.claim(sale.event_id, "u9", "h9")
    avail = await store.read.availability(sale.event_id)
    assert (avail.free, avail.held, avail.sold) == (0, 3, 0)
    await sale.audit_ok()


async def test_a_misspelt_claim_argument_is_an_error_not_the_best_seat(store: Store) -> None:
    """What a claim asks for is one declaration (engine/model/stock_lines.py Goods): a keyword it
    lacks is refused before anything is asked of Redis, never read as "no seats named"."""
    sale = await open_sale(store, 2, now_ms=T0)
    with pytest.raises(TypeError, match="seat"):
        await store.claim(sale.event_id, "alice", "h1", seat="s00001")  # type: ignore[call-arg]
    assert (await store.read.availability(sale.event_id)).free == 2


async def test_specific_seat_free_taken_unknown(store: Store) -> None:
    sale = await open_sale(store, 3, now_ms=T0)
    c = await store.claim(sale.event_id, "alice", "h1", "s00002")
    assert (c.listing, c.expires_ms, c.replay) == ("s00002", T0 + 480_000, False)
    with pytest.raises(errors.SeatTaken):
        await store.claim(sale.event_id, "bob", "h2", "s00002")
    with pytest.raises(errors.UnknownSeat):
        await store.claim(sale.event_id, "bob", "h3", "nope")
    # Best available skips the taken seat.
    assert (await store.claim(sale.event_id, "bob", "h4")).listing == "s00000"
    await sale.audit_ok()


async def test_claim_before_t0_is_refused(store: Store) -> None:
    await store.create_event(
        "t0", seats(2), EventConfig(hold_ttl_ms=480_000, quarantine_ms=900_000)
    )
    sale = Sale(store, "t0")
    await sale.at(T0)
    await store.open_sale(sale.event_id, T0 + 1000)
    with pytest.raises(errors.SaleNotOpen):
        await store.claim(sale.event_id, "alice", "h1")
    await sale.at(T0 + 1000)
    assert (await store.claim(sale.event_id, "alice", "h1")).listing == "s00000"


async def test_unknown_event(store: Store) -> None:
    with pytest.raises(errors.EventNotFound):
        await store.claim("no-such-event", "alice", "h1")


async def test_claim_replay_returns_first_outcome(store: Store) -> None:
    sale = await open_sale(store, 3, now_ms=T0)
    first = await store.claim(sale.event_id, "alice", "h1")
    again = await store.claim(sale.event_id, "alice", "h1")
    assert (again.listing, again.expires_ms, again.replay) == (
        first.listing,
        first.expires_ms,
        True,
    )
    assert (await store.read.availability(sale.event_id)).held == 1
    with pytest.raises(errors.IdempotencyKeyReused):
        await store.claim(sale.event_id, "mallory", "h1")


async def test_new_claim_releases_previous_hold_of_same_login(store: Store) -> None:
    sale = await open_sale(store, 3, now_ms=T0)
    a = await store.claim(sale.event_id, "alice", "hA", "s00000")
    b = await store.claim(sale.event_id, "alice", "hB", "s00001")
    assert (await store.read.hold(sale.event_id, a.hold_id)).state == HoldState.RELEASED
    assert (await store.read.hold(sale.event_id, b.hold_id)).state == HoldState.RESERVED
    assert "s00000" in await store.read.free_seats(sale.event_id)
    assert len(await terminal_records(sale, "hold", "hA")) == 1
    # Re-claiming one's own seat specifically works (released and taken in one step).
    c = await store.claim(sale.event_id, "alice", "hC", "s00001")
    assert c.listing == "s00001"
    await sale.audit_ok()


async def test_failed_new_claim_keeps_previous_hold(store: Store) -> None:
    sale = await open_sale(store, 2, now_ms=T0)
    await store.claim(sale.event_id, "bob", "hX", "s00001")
    await store.claim(sale.event_id, "alice", "hA", "s00000")
    with pytest.raises(errors.SeatTaken):
        await store.claim(sale.event_id, "alice", "hB", "s00001")
    assert (await store.read.hold(sale.event_id, "hA")).state == HoldState.RESERVED
    await sale.audit_ok()


async def test_sold_out_claim_keeps_the_logins_hold_and_announces_no_restock(
    store: Store,
) -> None:
    sale = await open_sale(store, 2, now_ms=T0)
    await store.claim(sale.event_id, "alice", "hA")
    await store.claim(sale.event_id, "bob", "hB")
    restocks = (await store.client.hget(store.keys(sale.event_id)[0], "restocks")) or "0"
    await sale.at(T0 + 60_000)
    with pytest.raises(errors.SoldOut):  # not a fresh hold on the same seat
        await store.claim(sale.event_id, "alice", "hA2")
    a = await store.read.hold(sale.event_id, "hA")
    assert (a.state, a.expires_ms) == (HoldState.RESERVED, T0 + 480_000)
    assert await store.client.hget(store.keys(sale.event_id)[0], "restocks") == restocks
    assert not await terminal_records(sale, "hold", "hA")
    await sale.audit_ok()


async def test_new_claim_refused_while_charge_in_flight(store: Store) -> None:
    sale = await open_sale(store, 3, now_ms=T0)
    await store.claim(sale.event_id, "alice", "hA")
    await store.start_charge(sale.event_id, "hA", "alice", "cA", 5000)
    with pytest.raises(errors.ChargeInFlight):
        await store.claim(sale.event_id, "alice", "hB")
    assert (await store.read.hold(sale.event_id, "hA")).state == HoldState.RESERVED
    await sale.audit_ok()


async def test_release_without_charge_frees_seat_at_once(store: Store) -> None:
    sale = await open_sale(store, 2, now_ms=T0)
    await store.claim(sale.event_id, "alice", "hA", "s00000")
    with pytest.raises(errors.NotOwner):
        await store.release(sale.event_id, "hA", "mallory")
    assert await store.release(sale.event_id, "hA", "alice") == HoldState.RELEASED
    assert await store.release(sale.event_id, "hA", "alice") == HoldState.RELEASED  # replay
    assert (await store.read.availability(sale.event_id)).free == 2
    assert len(await terminal_records(sale, "hold", "hA")) == 1
    with pytest.raises(errors.HoldNotFound):
        await store.release(sale.event_id, "nope", "alice")
    await sale.audit_ok()


@pytest.mark.parametrize("resolution", ["DECLINED", "CAPTURED", "timeout"])
async def test_release_with_charge_in_flight_blocks_seat_until_resolved(
    store: Store, resolution: str
) -> None:
    sale = await open_sale(store, 1, quarantine_ms=60_000, now_ms=T0)
    await store.claim(sale.event_id, "alice", "hA")
    await store.start_charge(sale.event_id, "hA", "alice", "cA", 5000)
    assert await store.release(sale.event_id, "hA", "alice") == HoldState.RELEASED
    avail = await store.read.availability(sale.event_id)
    assert (avail.free, avail.blocked) == (0, 1)
    with pytest.raises(errors.SoldOut):  # never resold while A's money is in flight
        await store.claim(sale.event_id, "bob", "hB")
    if resolution == "timeout":
        await sale.at(T0 + 59_999)
        assert (await store.sweep_quarantine(sale.event_id)).examined == 0
        await sale.at(T0 + 60_000)
        assert (await store.sweep_quarantine(sale.event_id)).other == 1
        res = await callback(sale, "cA", "CAPTURED")
        assert res.decision == "REFUND"
    else:
        res = await callback(sale, "cA", resolution)
        assert res.decision == ("REFUND" if resolution == "CAPTURED" else "DECLINED")
    assert (await store.read.availability(sale.event_id)).free == 1
    assert (await store.claim(sale.event_id, "bob", "hB")).listing == "s00000"
    charge = await store.read.charge(sale.event_id, "cA")
    assert charge.refund_only
    assert charge.state in (ChargeState.REFUNDING, ChargeState.DECLINED)
    await sale.audit_ok()


async def test_a_fresh_hold_stores_only_what_the_claim_set_and_reads_back_whole(
    store: Store,
) -> None:
    """A claim encodes the six fields it sets; the empty ones (charge, winner, ...) are stored
    once set, and every reader (the scripts, `Hold.from_json`) reads a missing one as empty."""
    sale = await open_sale(store, 3, now_ms=T0)
    c = await store.claim(sale.event_id, "alice", "h1")
    raw = await store.client.hget(store.key(sale.event_id, "holds"), c.hold_id)
    assert set(orjson.loads(raw)) == {"id", "login", "state", "created_ms", "expires_ms", "seat"}
    h = await store.read.hold(sale.event_id, c.hold_id)
    assert h is not None
    assert (h.state, h.charge_in_flight, h.winner, h.charge_ids, h.until_ms, h.reason) == (
        HoldState.RESERVED,
        "",
        "",
        (),
        0,
        "",
    )
    # The scripts read the missing fields as empty: a release without a charge frees the seat.
    assert await store.release(sale.event_id, c.hold_id, "alice") == HoldState.RELEASED
    raw = await store.client.hget(store.key(sale.event_id, "holds"), c.hold_id)
    assert orjson.loads(raw)["reason"] != ""
    assert (await store.read.availability(sale.event_id)).free == 3
    await sale.audit_ok()


async def test_a_full_hold_record_stores_every_field_for_older_readers(store: Store) -> None:
    """ONSALE_HOLD_RECORD=full (a rolling upgrade from a version before ADR 0034): a new hold
    stores every field, the empty ones too, as the older scripts and `Hold.from_json` read it."""
    sale = await open_sale(store, 3, now_ms=T0)
    full = Store(store.client, scripts=store.scripts, prefix=store.prefix, hold_record="full")
    c = await full.claim(sale.event_id, "alice", "h1")
    raw = orjson.loads(await store.client.hget(store.key(sale.event_id, "holds"), c.hold_id))
    assert raw == {
        "id": c.hold_id, "login": "alice", "state": "RESERVED", "created_ms": T0,
        "expires_ms": T0 + 480_000, "seat": "s00000", "charge": "", "blocking": "", "winner": "",
        "until_ms": 0, "decided_ms": 0, "reason": "", "charges": "",
    }  # fmt: skip
    assert await store.release(sale.event_id, c.hold_id, "alice") == HoldState.RELEASED
    await sale.audit_ok()
