"""Presale access codes (ADR 0049: lua/codes_add.lua, lua/hold_claim.lua, lua/_lib.lua), on
fakeredis and real Redis with the test clock: before T0 a claim needs a code of a window open
then; a code is spent by at most its uses (live holds and sales), per login too; a hold that
ends without a sale gives its use back; a sale keeps it; from T0 on no code is needed."""

import uuid

import pytest

from engine.model import errors
from engine.model.event_config import EventConfig
from engine.model.records import Marker, OutboxRecord, RecordKind
from engine.model.states import HoldState
from engine.store import Store
from engine.store.presales import Added, Presale
from tests.conftest import Sale, seats
from tests.helpers import callback

NOW = 1_900_000_000_000
T0 = NOW + 3_600_000  # general sale in an hour
FANS = Presale("fans", NOW - 60_000, T0)  # open now, until T0


async def presale_event(store: Store, n_seats: int = 10, hold_ttl_ms: int = 480_000) -> Sale:
    """An event open for T0 in an hour, its clock now, with the presale `fans` and its codes
    FAN1 (2 uses, 1 per login) and FAN2 (1 use)."""
    event_id = f"ev-{uuid.uuid4().hex[:8]}"
    await store.create_event(
        event_id, seats(n_seats), EventConfig(hold_ttl_ms=hold_ttl_ms, quarantine_ms=900_000)
    )
    sale = Sale(store, event_id)
    await sale.at(NOW)
    await store.open_sale(event_id, T0)
    common = {"per_login": 1, "expires_ms": T0, "batch_id": "b1"}
    assert await store.presales.add(event_id, FANS, ["FAN1"], uses=2, **common) == Added(1, 0)
    await store.presales.add(event_id, FANS, ["FAN2"], uses=1, **{**common, "batch_id": "b2"})
    return sale


async def test_before_t0_a_claim_needs_a_code_of_an_open_presale(store: Store) -> None:
    sale = await presale_event(store)
    ev = sale.event_id
    with pytest.raises(errors.AccessCodeRequired) as required:
        await store.claim(ev, "ann", "h1")
    assert required.value.details["closes_at_ms"] == T0
    with pytest.raises(errors.AccessCodeInvalid):
        await store.claim(ev, "ann", "h1", access_code="NOPE")
    claimed = await store.claim(ev, "ann", "h1", access_code="FAN1")
    assert (await store.read.hold(ev, claimed.hold_id)).state == HoldState.RESERVED
    await sale.at(FANS.opens_at_ms - 1)  # before the window: not open at all, code or not
    with pytest.raises(errors.SaleNotOpen):
        await store.claim(ev, "bob", "h2", access_code="FAN1")
    await sale.at(T0)  # general sale: no code needed, none spent
    await store.claim(ev, "bob", "h2")
    await store.claim(ev, "cat", "h3", access_code="FAN2")
    assert {c.code: c.used for c in await store.presales.codes(ev)} == {"FAN1": 1, "FAN2": 0}
    await sale.audit_ok()


async def test_a_code_is_spent_by_at_most_its_uses_and_per_login(store: Store) -> None:
    sale = await presale_event(store)
    ev = sale.event_id
    await store.claim(ev, "ann", "a1", access_code="FAN1")
    await store.start_charge(ev, "a1", "ann", "c1", 100)
    await callback(sale, "c1", "CAPTURED")  # ann bought with FAN1
    with pytest.raises(errors.AccessCodeLimit) as limit:  # FAN1: once per login
        await store.claim(ev, "ann", "a2", quantity=2, access_code="FAN1")
    assert limit.value.details["per_login"] == 1
    await store.claim(ev, "bob", "b1", access_code="FAN1")
    with pytest.raises(errors.AccessCodeUsedUp) as used_up:  # FAN1: two holds at most
        await store.claim(ev, "cat", "c1", access_code="FAN1")
    assert used_up.value.details["uses"] == 2
    assert (await store.claim(ev, "bob", "b1", access_code="FAN1")).replay  # a retry: no use
    assert {c.code: c.used for c in await store.presales.codes(ev)}["FAN1"] == 2
    await sale.audit_ok()


async def test_a_hold_that_ends_without_a_sale_gives_its_use_back_a_sale_keeps_it(
    store: Store,
) -> None:
    sale = await presale_event(store, hold_ttl_ms=60_000)
    ev = sale.event_id
    await store.claim(ev, "ann", "a1", access_code="FAN1")
    await store.claim(ev, "bob", "b1", access_code="FAN1")
    await store.release(ev, "a1", "ann")  # released: its use is back
    await store.claim(ev, "cat", "c1", access_code="FAN1")
    await sale.at(NOW + 60_000)  # both live holds expire
    await store.sweep(ev)
    assert {c.code: c.used for c in await store.presales.codes(ev)}["FAN1"] == 0
    claimed = await store.claim(ev, "dan", "d1", access_code="FAN1")
    await store.start_charge(ev, claimed.hold_id, "dan", "c1", 100)
    await callback(sale, "c1", "CAPTURED")
    assert (await store.read.hold(ev, claimed.hold_id)).state == HoldState.CONFIRMED
    await store.claim(ev, "eve", "e1", access_code="FAN1")
    with pytest.raises(errors.AccessCodeUsedUp):  # the sale keeps its use
        await store.claim(ev, "fay", "f1", access_code="FAN1")
    await sale.audit_ok()


async def test_a_login_trading_its_hold_keeps_its_code(store: Store) -> None:
    """A new claim replaces the login's previous hold in the same step: the previous hold's
    use of the code comes back as the new one takes it, even at the code's last use."""
    sale = await presale_event(store)
    ev = sale.event_id
    await store.claim(ev, "ann", "a1", access_code="FAN2")  # FAN2's one use
    claimed = await store.claim(ev, "ann", "a2", quantity=2, access_code="FAN2")
    assert claimed.replaced == "a1"
    assert {c.code: c.used for c in await store.presales.codes(ev)}["FAN2"] == 1
    with pytest.raises(errors.AccessCodeUsedUp):
        await store.claim(ev, "bob", "b1", access_code="FAN2")


async def test_a_sold_out_presale_claim_spends_nothing(store: Store) -> None:
    sale = await presale_event(store, n_seats=1)
    ev = sale.event_id
    await store.claim(ev, "ann", "a1", access_code="FAN1")
    with pytest.raises(errors.SoldOut):
        await store.claim(ev, "bob", "b1", access_code="FAN2")
    assert {c.code: c.used for c in await store.presales.codes(ev)}["FAN2"] == 0


async def test_codes_are_added_all_or_none_and_never_redefined(store: Store) -> None:
    sale = await presale_event(store)
    ev = sale.event_id
    terms = {"uses": 2, "per_login": 1, "expires_ms": T0}
    again = await store.presales.add(ev, FANS, ["FAN1", "FAN3"], batch_id="b3", **terms)
    assert again == Added(1, 1)  # FAN1 was there with the same terms
    with pytest.raises(errors.AccessCodeExists):  # FAN2 has other terms: nothing written
        await store.presales.add(ev, FANS, ["FAN4", "FAN2"], batch_id="b4", **terms)
    with pytest.raises(errors.PresaleMismatch):
        moved = Presale("fans", FANS.opens_at_ms, T0 - 1)
        await store.presales.add(ev, moved, ["FAN5"], batch_id="b5", **terms)
    codes = {c.code for c in await store.presales.codes(ev)}
    assert codes == {"FAN1", "FAN2", "FAN3"}
    assert await store.presales.windows(ev) == [FANS]


async def test_each_batch_is_one_outbox_record_with_its_codes_and_terms(store: Store) -> None:
    sale = await presale_event(store)
    ev = sale.event_id
    await store.claim(ev, "ann", "a1", access_code="FAN1")
    await store.release(ev, "a1", "ann")
    entries = await store.client.xrange(store.key(ev, "outbox"))
    records = [OutboxRecord.from_fields(f) for _id, f in entries]
    batches = [r for r in records if r.kind == RecordKind.PRESALE]
    assert [(r.entity_id, r.to_state, r.codes) for r in batches] == [
        ("fans", Marker.CODES_ADDED, "FAN1"),
        ("fans", Marker.CODES_ADDED, "FAN2"),
    ]
    assert batches[0].presale == f"{FANS.opens_at_ms}|{T0}|2|1|{T0}"
    released = [r for r in records if r.kind == RecordKind.HOLD and r.terminal]
    assert [(r.entity_id, r.code) for r in released] == [("a1", "FAN1")]


async def test_a_code_past_its_expiry_is_not_for_now(store: Store) -> None:
    sale = await presale_event(store)
    ev = sale.event_id
    terms = {"uses": 5, "per_login": 0, "batch_id": "b9"}
    await store.presales.add(ev, FANS, ["SOON"], expires_ms=NOW + 1_000, **terms)
    await store.claim(ev, "ann", "a1", access_code="SOON")
    await sale.at(NOW + 1_000)
    with pytest.raises(errors.AccessCodeInvalid):
        await store.claim(ev, "bob", "b1", access_code="SOON")
