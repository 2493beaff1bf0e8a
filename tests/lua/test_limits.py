"""Per-login limits inside the deciding scripts (lua/_lib.lua take_token, hold_claim's cap), on
fakeredis and real Redis, with the test clock: a login's claims and charge starts are rate
limited by a token bucket, and a login holds and buys at most the cap of seats per event."""

import pytest

from engine.model import errors
from engine.model.holds import LoginLimits
from engine.model.states import HoldState
from engine.store import Store
from tests.conftest import Sale, open_sale
from tests.helpers import callback, reversal

T0 = 1_900_000_000_000


def limited(store: Store, limits: LoginLimits) -> Store:
    """The same Redis, scripts and prefix, with per-login limits (as the API builds it)."""
    return Store(
        store.client,
        scripts=store.scripts,
        prefix=store.prefix,
        autopipeline=False,
        limits=limits,
    )


async def test_a_login_flooding_claims_is_refused_then_refilled(store: Store) -> None:
    s = limited(store, LoginLimits(claims_per_s=2, claims_burst=3))
    sale = await open_sale(s, 10, now_ms=T0)
    for n in range(3):  # the burst: each claim replaces the login's previous hold
        claimed = await s.claim(sale.event_id, "flood", f"h{n}")
        assert claimed.replaced == (f"h{n - 1}" if n else "")
    with pytest.raises(errors.RateLimited) as refused:
        await s.claim(sale.event_id, "flood", "h3")
    assert refused.value.details["retry_after_ms"] == 500  # 2 a second: half a second away
    assert "h3" not in await s.read.holds(sale.event_id)
    # Nothing else changed: the live hold is still h2, another login is not affected.
    assert (await s.read.hold(sale.event_id, "h2")).state == HoldState.RESERVED
    await s.claim(sale.event_id, "other", "o1")
    await sale.at(T0 + 499)
    with pytest.raises(errors.RateLimited):
        await s.claim(sale.event_id, "flood", "h3")
    await sale.at(T0 + 500)
    assert (await s.claim(sale.event_id, "flood", "h3")).replaced == "h2"
    await sale.audit_ok()


async def test_refusals_and_replays_spend_tokens_too(store: Store) -> None:
    s = limited(store, LoginLimits(claims_per_s=1, claims_burst=2))
    sale = await open_sale(s, 1, now_ms=T0)
    await s.claim(sale.event_id, "winner", "w1")
    for _ in range(2):  # sold out, from Redis: still two claims of this login
        with pytest.raises(errors.SoldOut):
            await s.claim(sale.event_id, "loser", "l1")
    with pytest.raises(errors.RateLimited):
        await s.claim(sale.event_id, "loser", "l1")
    assert (await s.claim(sale.event_id, "winner", "w1")).replay  # one token left for a retry
    with pytest.raises(errors.RateLimited):
        await s.claim(sale.event_id, "winner", "w1")


async def test_charge_starts_are_limited_per_login(store: Store) -> None:
    s = limited(store, LoginLimits(charges_per_s=1, charges_burst=2))
    sale = await open_sale(s, 2, now_ms=T0)
    await s.claim(sale.event_id, "alice", "h1")
    await s.start_charge(sale.event_id, "h1", "alice", "c1", 100)
    with pytest.raises(errors.ChargeInFlight):
        await s.start_charge(sale.event_id, "h1", "alice", "c2", 100)
    with pytest.raises(errors.RateLimited) as refused:
        await s.start_charge(sale.event_id, "h1", "alice", "c2", 100)
    assert refused.value.details["retry_after_ms"] == 1000
    assert [c.charge_id for c in await s.read.charges(sale.event_id, ["c1", "c2"])] == ["c1"]


async def buy(s: Store, sale: Sale, login: str, hold_id: str) -> None:
    await s.claim(sale.event_id, login, hold_id)
    await s.start_charge(sale.event_id, hold_id, login, f"c-{hold_id}", 100)
    result = await callback(sale, f"c-{hold_id}", "CAPTURED")
    assert result.hold_state == HoldState.CONFIRMED


async def test_a_login_buys_at_most_the_cap_and_a_revoked_seat_gives_one_back(
    store: Store,
) -> None:
    s = limited(store, LoginLimits(cap=2))
    sale = await open_sale(s, 5, now_ms=T0)
    await buy(s, sale, "fan", "h1")
    await s.claim(sale.event_id, "fan", "h2")  # bought 1 + this one: at the cap
    await s.claim(sale.event_id, "fan", "h3")  # a second tab replaces it: still at the cap
    await s.start_charge(sale.event_id, "h3", "fan", "c-h3", 100)
    assert (await callback(sale, "c-h3", "CAPTURED")).hold_state == HoldState.CONFIRMED
    with pytest.raises(errors.LimitExceeded) as refused:
        await s.claim(sale.event_id, "fan", "h4")
    assert refused.value.details["cap"] == 2
    assert (await s.claim(sale.event_id, "fan", "h3")).replay  # a retry is still answered
    await s.claim(sale.event_id, "someone-else", "x1")
    # The provider refunds one sale; the operator revokes it: the seat and one unit come back.
    await reversal(sale, "c-h1", "REFUND")
    await s.revoke_hold(sale.event_id, "h1", "ops")
    assert (await s.read.hold(sale.event_id, "h1")).state == HoldState.REVOKED
    assert (await s.claim(sale.event_id, "fan", "h4")).replaced == ""
    await sale.audit_ok()


async def test_no_limits_means_none(store: Store) -> None:
    sale = await open_sale(store, 3, now_ms=T0)
    for n in range(50):
        await store.claim(sale.event_id, "tireless", f"h{n}")
    assert (await store.read.hold(sale.event_id, "h49")).state == HoldState.RESERVED


async def test_an_idempotency_window_finds_retries_and_never_reuses_a_hold_id(
    store: Store,
) -> None:
    """With a window (the API passes the trim retention), a claim's hold id is its key plus the
    window number: a retry within the window after the claim's finds it; later the same key is
    a new hold under a new id, so an id the ledger holds is never given to another hold."""
    s = Store(
        store.client,
        scripts=store.scripts,
        prefix=store.prefix,
        autopipeline=False,
        idempotency_window_ms=1_000,
    )
    sale = await open_sale(s, 5, now_ms=T0)
    first = await s.claim(sale.event_id, "alice", "k")
    assert first.hold_id == f"k:{T0 // 1000}" and not first.replay
    for later in (1, 999, 1_000, 1_999):  # this window and the next
        await sale.at(T0 + later)
        again = await s.claim(sale.event_id, "alice", "k")
        assert (again.hold_id, again.replay) == (first.hold_id, True), later
    await sale.at(T0 + 2_000)
    fresh = await s.claim(sale.event_id, "alice", "k")
    assert (fresh.hold_id, fresh.replay, fresh.replaced) == (
        f"k:{T0 // 1000 + 2}",
        False,
        first.hold_id,
    )
    with pytest.raises(errors.IdempotencyKeyReused):  # the API derives keys per login
        await s.claim(sale.event_id, "bob", "k")
    await sale.audit_ok()
