"""Delivery order is not meaning (spec invariant 10, ADR 0036): for each true history of one
charge at the provider (captured; failed; captured then refunded; captured, disputed, won or
lost), every permutation of its messages, each delivered one to three times, ends in the state
and the money of the in-order delivery, on fakeredis and on real Redis. A refund or dispute that
arrives first is answered (NOTED), never an outage, and never lets the capture sell a seat
whose money left."""

import itertools
import random
from dataclasses import dataclass

import pytest

from engine.model.states import ChargeState, HoldState, ReversalPolicy
from engine.store import Store
from tests.conftest import Sale, open_sale
from tests.helpers import callback, reversal

T0 = 1_900_000_000_000
HISTORIES = [("S",), ("F",), ("S", "R"), ("S", "DO", "DW"), ("S", "DO", "DL")]
REVERSAL_OF = {"R": "REFUND", "DO": "DISPUTE_OPENED", "DW": "DISPUTE_WON", "DL": "DISPUTE_LOST"}
COPIES_PATTERNS = 2  # random duplicate patterns per permutation


@dataclass(frozen=True)
class End:
    charge: ChargeState
    holds_money: int
    hold: HoldState
    hold_reason: str
    free_seats: int
    refunds_due: tuple[str, ...]


async def deliver(sale: Sale, message: str) -> str:
    pev = f"pe-{message}"
    if message == "S":
        return (await callback(sale, "c1", "CAPTURED", event_id=pev)).decision
    if message == "F":
        return (await callback(sale, "c1", "FAILED", event_id=pev)).decision
    return (await reversal(sale, "c1", REVERSAL_OF[message], event_id=pev)).decision


async def run(store: Store, sequence: list[str], policy: ReversalPolicy, given_up: bool) -> End:
    sale = await open_sale(store, 2, now_ms=T0, reversal_policy=policy)
    await store.claim(sale.event_id, "alice", "h1")
    await store.start_charge(sale.event_id, "h1", "alice", "c1", 100)
    if given_up:  # the buyer gave the hold up before its money arrived: the capture cannot win
        await store.release(sale.event_id, "h1", "alice")
    for message in sequence:
        decision = await deliver(sale, message)
        assert decision not in ("RETRY_LATER", "MISMATCH"), (sequence, message, decision)
    c = await store.read.charge(sale.event_id, "c1")
    h = await store.read.hold(sale.event_id, "h1")
    await sale.audit_ok()
    return End(
        c.state,
        c.holds_money,
        h.state,
        h.reason,
        len(await store.read.free_seats(sale.event_id)),
        tuple(await store.read.due_refunds(sale.event_id, T0 + 10**9)),
    )


def with_copies(order: tuple[str, ...], rng: random.Random) -> list[str]:
    """The messages in `order` (their first copies), each delivered 1-3 times: a later copy
    lands anywhere after its first."""
    sequence = list(order)
    for message in order:
        for _ in range(rng.randint(0, 2)):
            first = sequence.index(message)
            sequence.insert(rng.randint(first + 1, len(sequence)), message)
    return sequence


@pytest.mark.parametrize(
    "store", ["fake", pytest.param("real", marks=pytest.mark.redis)], indirect=True
)
@pytest.mark.parametrize("policy", [ReversalPolicy.MANUAL, ReversalPolicy.REVOKE])
@pytest.mark.parametrize("given_up", [False, True], ids=["live", "given_up"])
@pytest.mark.parametrize("history", HISTORIES, ids=["-".join(h) for h in HISTORIES])
async def test_every_delivery_order_ends_as_the_in_order_one(
    store: Store, history: tuple[str, ...], policy: ReversalPolicy, given_up: bool
) -> None:
    in_order = await run(store, list(history), policy, given_up)
    rng = random.Random(f"{history}{policy}{given_up}")
    for order in itertools.permutations(history):
        for _ in range(COPIES_PATTERNS):
            sequence = with_copies(order, rng)
            assert await run(store, sequence, policy, given_up) == in_order, sequence


@pytest.mark.parametrize("store", ["fake"], indirect=True)
async def test_no_order_of_a_refunded_capture_confirms_a_seat_with_money(store: Store) -> None:
    """The defect this guards: the refund first, then the capture, sold the seat silently."""
    for policy in ReversalPolicy:
        end = await run(store, ["R", "S"], policy, given_up=False)
        assert end.holds_money == 0 and end.charge == ChargeState.PROVIDER_REFUNDED
        assert end.hold in (HoldState.EXCEPTION, HoldState.REVOKED)
        assert end.hold_reason == "money_refunded_at_provider"
