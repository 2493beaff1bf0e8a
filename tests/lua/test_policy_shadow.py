"""Shadow rollout of deadline policies (ADR 0020), on fakeredis and real Redis with the test
clock: a candidate in shadow records what it would have decided beside every deadline decision
and changes no outcome; promote switches the decisions made after it; rollback switches back and
never rewrites a recorded decision; every change takes the next version number."""

import pytest

from engine.model import errors
from engine.model.records import OutboxRecord
from engine.model.replies import PolicyCode
from engine.model.states import HoldState, LatePolicy
from engine.store import Store
from engine.store.policies import DeadlinePolicy, Policies
from tests.conftest import Sale, open_sale
from tests.helpers import callback

T0 = 1_900_000_000_000
TTL = 480_000
Q = 300_000
G = 60_000  # the grace of the grace candidate
E = T0 + TTL  # the deadline of a hold claimed at T0
QUARANTINE, RELEASE, GRACE = "quarantine", "release_refund", f"grace:{G}"
# Fields that differ between two runs of one scenario on two events for reasons other than its
# outcome: the event, its decision numbers, and the shadow's own fields.
NOT_OUTCOME = {"event", "seq", "shadow_policy", "shadow_version", "shadow_outcome"}


def parse(name: str) -> DeadlinePolicy:
    return DeadlinePolicy.parse(name)


async def sale_enforcing(store: Store, enforced: str, n_seats: int = 3) -> Sale:
    """An open event enforcing `enforced` (a grace is promoted after the create, as in use)."""
    policy = parse(enforced)
    sale = await open_sale(
        store, n_seats, hold_ttl_ms=TTL, quarantine_ms=Q, policy=policy.late, now_ms=T0
    )
    if policy.grace_ms:
        assert (await Policies(store).shadow(sale.event_id, policy)).changed
        assert (await Policies(store).promote(sale.event_id)).state.enforced == enforced
    return sale


async def charged(store: Store, enforced: str, shadow: str | None) -> Sale:
    """Hold h1 (deadline E) with charge c1 in flight, `shadow` running beside `enforced`."""
    sale = await sale_enforcing(store, enforced)
    if shadow is not None:
        assert (await Policies(store).shadow(sale.event_id, parse(shadow))).changed
    await store.claim(sale.event_id, "alice", "h1")
    await store.start_charge(sale.event_id, "h1", "alice", "c1", 9900)
    return sale


async def decisions(sale: Sale) -> list[dict[str, str]]:
    """The outbox of the sale's holds and charges, less what is not their outcome."""
    return [
        {k: v for k, v in r.items() if k not in NOT_OUTCOME}
        for r in await sale.store.read.outbox(sale.event_id)
        if r["kind"] != "policy"
    ]


async def shadowed(sale: Sale) -> list[tuple[str, str]]:
    """(real `to`, shadow's `to`) of every record the shadow classified, in order."""
    return [
        (r["to"], r["shadow_outcome"])
        for r in await sale.store.read.outbox(sale.event_id)
        if r["shadow_outcome"]
    ]


async def outcome(sale: Sale) -> tuple[object, ...]:
    h = await sale.store.read.hold(sale.event_id, "h1")
    c = await sale.store.read.charge(sale.event_id, "c1")
    free = await sale.store.read.free_seats(sale.event_id)
    return (h.state, h.winner, c.state, c.refund_only, c.reason, sorted(free))


# The sweeper reaches h1 at E + offset: (enforced, shadow, offset, the real `to`, the shadow's).
DEADLINE_CASES = [
    (QUARANTINE, RELEASE, 0, "QUARANTINED", "EXPIRED"),  # the known disagreement
    (QUARANTINE, GRACE, 1, "QUARANTINED", "GRACE"),
    (QUARANTINE, GRACE, G, "QUARANTINED", "EXPIRED"),
    (RELEASE, QUARANTINE, 0, "EXPIRED", "QUARANTINED"),
    (RELEASE, GRACE, G - 1, "EXPIRED", "GRACE"),
    (RELEASE, GRACE, G, "EXPIRED", "EXPIRED"),  # past the grace the two agree
    (GRACE, QUARANTINE, 0, "GRACE", "QUARANTINED"),
    (GRACE, RELEASE, G, "EXPIRED", "EXPIRED"),
]


@pytest.mark.parametrize(("enforced", "shadow", "offset", "real", "would"), DEADLINE_CASES)
async def test_a_shadow_records_its_deadline_decision_and_changes_no_outcome(
    store: Store, enforced: str, shadow: str, offset: int, real: str, would: str
) -> None:
    plain = await charged(store, enforced, None)
    beside = await charged(store, enforced, shadow)
    for sale in (plain, beside):
        await sale.at(E + offset)
        await store.sweep(sale.event_id)
    assert await shadowed(beside) == [(real, would)]
    assert await shadowed(plain) == []
    assert await decisions(beside) == await decisions(plain)
    assert await outcome(beside) == await outcome(plain)
    record = next(r for r in await store.read.outbox(beside.event_id) if r["shadow_outcome"])
    assert (record["policy"], record["shadow_policy"]) == (enforced, shadow)
    assert OutboxRecord.from_fields(record).shadow_agrees == (real == would)
    await beside.audit_ok()


# A capture reaches c1 at E + offset, nobody having touched h1 since its charge started: the
# deadline decision then the capture's, each with the shadow's view of it.
CAPTURE_CASES = [
    (QUARANTINE, RELEASE, -1, []),  # in time: no deadline decision to classify
    (QUARANTINE, RELEASE, 1, [("QUARANTINED", "EXPIRED"), ("CAPTURED", "REFUNDING")]),
    (QUARANTINE, GRACE, Q - 1, [("QUARANTINED", "EXPIRED"), ("CAPTURED", "REFUNDING")]),
    (RELEASE, QUARANTINE, 1, [("EXPIRED", "QUARANTINED"), ("REFUNDING", "CAPTURED")]),
    (RELEASE, GRACE, G, [("EXPIRED", "EXPIRED"), ("REFUNDING", "REFUNDING")]),
    (GRACE, RELEASE, 1_000, [("GRACE", "EXPIRED"), ("CAPTURED", "REFUNDING")]),
    (GRACE, QUARANTINE, G, [("EXPIRED", "QUARANTINED"), ("REFUNDING", "CAPTURED")]),
]


@pytest.mark.parametrize(("enforced", "shadow", "offset", "pairs"), CAPTURE_CASES)
async def test_a_shadow_classifies_a_late_capture_and_changes_no_outcome(
    store: Store, enforced: str, shadow: str, offset: int, pairs: list[tuple[str, str]]
) -> None:
    plain = await charged(store, enforced, None)
    beside = await charged(store, enforced, shadow)
    for sale in (plain, beside):
        await sale.at(E + offset)
        await callback(sale, "c1", "CAPTURED")
    assert await shadowed(beside) == pairs
    assert await decisions(beside) == await decisions(plain)
    assert await outcome(beside) == await outcome(plain)
    await beside.audit_ok()


async def test_a_capture_lost_for_another_reason_loses_under_any_candidate(store: Store) -> None:
    sale = await charged(store, QUARANTINE, GRACE)
    await store.release(sale.event_id, "h1", "alice")  # given up while its charge was in flight
    await sale.at(E + 1)
    await callback(sale, "c1", "CAPTURED")
    assert await shadowed(sale) == [("REFUNDING", "REFUNDING")]


async def test_an_idle_hold_expires_under_every_policy(store: Store) -> None:
    sale = await sale_enforcing(store, QUARANTINE)
    await Policies(store).shadow(sale.event_id, parse(GRACE))
    await store.claim(sale.event_id, "bob", "h2")
    await sale.at(E)
    await store.sweep(sale.event_id)
    assert await shadowed(sale) == [("EXPIRED", "EXPIRED")]


async def test_a_grace_keeps_the_hold_live_once_then_releases_and_refunds(store: Store) -> None:
    sale = await charged(store, GRACE, None)
    await sale.at(E)
    await store.sweep(sale.event_id)
    await sale.at(E + G - 1)
    assert (await store.sweep(sale.event_id)).examined == 0  # the sweeper comes back at E + G
    h = await store.read.hold(sale.event_id, "h1")
    assert h.state == HoldState.RESERVED
    assert "s00000" not in await store.read.free_seats(sale.event_id)
    graces = [r for r in await store.read.outbox(sale.event_id) if r["to"] == "GRACE"]
    assert [r["decision_id"] for r in graces] == [f"hold:h1:GRACE:{E + G}"]
    await sale.audit_ok()
    await sale.at(E + G)
    assert (await store.sweep(sale.event_id)).expired == 1
    c = await store.read.charge(sale.event_id, "c1")
    assert (c.refund_only, c.reason) == (True, "deadline_grace_ended")
    assert "s00000" in await store.read.free_seats(sale.event_id)
    await sale.audit_ok()


async def test_promote_switches_new_decisions_and_rollback_rewrites_nothing(store: Store) -> None:
    sale = await sale_enforcing(store, QUARANTINE)
    policies = Policies(store)
    for i, login in enumerate(("ann", "bob", "cy")):  # deadlines E, E + 1, E + 2
        await sale.at(T0 + i)
        await store.claim(sale.event_id, login, f"h{i}")
        await store.start_charge(sale.event_id, f"h{i}", login, f"c{i}", 100)
    shadowed_change = await policies.shadow(sale.event_id, parse(RELEASE))
    assert (shadowed_change.code, shadowed_change.state.shadow_version) == (PolicyCode.SHADOWED, 2)
    await sale.at(E)
    await store.sweep(sale.event_id)  # h0 quarantined; the shadow would have expired it
    before = await store.read.outbox_entries(sale.event_id)

    promoted = await policies.promote(sale.event_id)
    assert promoted.code == PolicyCode.PROMOTED
    assert (promoted.state.enforced, promoted.state.enforced_version) == (RELEASE, 3)
    assert (promoted.state.shadow, promoted.state.previous) == ("", QUARANTINE)
    await sale.at(E + 1)
    await store.sweep(sale.event_id)  # h1: released and refunded under the promoted policy
    rolled = await policies.rollback(sale.event_id)
    assert (rolled.code, rolled.state.enforced, rolled.state.enforced_version) == (
        PolicyCode.ROLLED_BACK,
        QUARANTINE,
        4,
    )
    await sale.at(E + 2)
    await store.sweep(sale.event_id)  # h2: quarantined again

    after = await store.read.outbox_entries(sale.event_id)
    assert after[: len(before)] == before  # nothing recorded was rewritten
    states = [(await store.read.hold(sale.event_id, f"h{i}")).state for i in range(3)]
    assert states == [HoldState.QUARANTINED, HoldState.EXPIRED, HoldState.QUARANTINED]
    by_hold = {
        r["hold"]: (r["to"], r["policy"], r["policy_version"], r["shadow_outcome"])
        for _sid, r in after
        if r["kind"] == "hold"
    }
    assert by_hold == {
        "h0": ("QUARANTINED", QUARANTINE, "1", "EXPIRED"),
        "h1": ("EXPIRED", RELEASE, "3", ""),
        "h2": ("QUARANTINED", QUARANTINE, "4", ""),
    }
    changes = [
        (r["id"], r["from"], r["to"], r["policy"], r["shadow_policy"])
        for _sid, r in after
        if r["kind"] == "policy"
    ]
    assert changes == [
        ("2", QUARANTINE, "SHADOW_SET", QUARANTINE, RELEASE),
        ("3", QUARANTINE, "POLICY_PROMOTED", RELEASE, ""),
        ("4", RELEASE, "POLICY_ROLLED_BACK", QUARANTINE, ""),
    ]
    await sale.audit_ok()


async def test_refused_changes_say_why_and_change_nothing(store: Store) -> None:
    sale = await sale_enforcing(store, QUARANTINE)
    policies = Policies(store)
    assert (await policies.promote(sale.event_id)).code == PolicyCode.NO_SHADOW
    assert (await policies.shadow(sale.event_id, None)).code == PolicyCode.NO_SHADOW
    assert (await policies.rollback(sale.event_id)).code == PolicyCode.NO_PREVIOUS
    same = await policies.shadow(sale.event_id, parse(QUARANTINE))
    assert same.code == PolicyCode.SAME_AS_ENFORCED
    assert (same.state.enforced, same.state.enforced_version, same.state.shadow) == (
        QUARANTINE,
        1,
        "",
    )
    assert not [r for r in await store.read.outbox(sale.event_id) if r["kind"] == "policy"]
    # Stopping a shadow is a change like any other: recorded, with the next version.
    await policies.shadow(sale.event_id, parse(GRACE))
    stopped = await policies.shadow(sale.event_id, None)
    assert (stopped.code, stopped.state.shadow, stopped.state.shadow_version) == (
        PolicyCode.SHADOWED,
        "",
        0,
    )
    assert (await policies.promote(sale.event_id)).code == PolicyCode.NO_SHADOW
    await policies.shadow(sale.event_id, parse(RELEASE))
    await policies.promote(sale.event_id)
    await policies.rollback(sale.event_id)
    assert (await policies.rollback(sale.event_id)).code == PolicyCode.NO_PREVIOUS
    versions = [r["id"] for r in await store.read.outbox(sale.event_id) if r["kind"] == "policy"]
    assert versions == ["2", "3", "4", "5", "6"]
    await store.fence(sale.event_id, "test")
    assert (await policies.shadow(sale.event_id, parse(GRACE))).code == PolicyCode.FENCED
    with pytest.raises(errors.EventNotFound):
        await policies.promote("no-such-event")


@pytest.mark.parametrize(
    ("name", "policy"),
    [
        ("quarantine", DeadlinePolicy(LatePolicy.QUARANTINE)),
        ("release_refund", DeadlinePolicy(LatePolicy.RELEASE_REFUND)),
        ("grace:1000", DeadlinePolicy(LatePolicy.RELEASE_REFUND, 1_000)),
        ("grace:600000", DeadlinePolicy(LatePolicy.RELEASE_REFUND, 600_000)),
    ],
)
def test_policy_names_round_trip(name: str, policy: DeadlinePolicy) -> None:
    assert DeadlinePolicy.parse(name) == policy
    assert policy.name == name


@pytest.mark.parametrize("name", ["grace:999", "grace:600001", "grace:0100", "grace:", "revoke"])
async def test_unknown_policies_are_refused_here_and_by_the_script(store: Store, name: str) -> None:
    with pytest.raises(ValueError, match="unknown deadline policy"):
        DeadlinePolicy.parse(name)
    sale = await sale_enforcing(store, QUARANTINE)
    with pytest.raises(Exception, match="BAD_ARGS unknown policy"):
        await store.runner.run("event_policy", sale.event_id, ["SHADOW", name])
