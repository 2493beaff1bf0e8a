"""Parts of an order given back racing the provider (ADR 0043), on real Redis with real
concurrency: per order of four seats, two operators give back seats (one twice, with the same
key), while the provider's own full refund, and a dispute opened, land at the same moment.
Whatever the interleaving, the money adds up (what the provider captured is what the charges
still hold plus what parts and the provider gave back), no seat is sold without money, a key is
one part, and the audit holds."""

import asyncio
import random
from collections import Counter

import pytest

from engine.model import errors, keys
from engine.model.holds import ProviderReversal
from engine.model.states import ChargeState, HoldState
from engine.store import Store
from tests.conftest import open_sale
from tests.helpers import callback
from tests.race.test_callback_races import race_store

pytestmark = [pytest.mark.redis, pytest.mark.slow]
__all__ = ["race_store"]

PRICE = 4_500


async def test_parts_given_back_race_the_providers_own_refund_and_a_dispute(
    race_store: Store,
) -> None:
    trials = 150
    sale = await open_sale(race_store, 4 * trials)
    rng = random.Random(43)
    outcomes: Counter[str] = Counter()

    async def order(i: int) -> None:
        hold, charge = f"h{i}", f"c{i}"
        seats = [f"s{4 * i + k:05d}" for k in range(4)]
        await race_store.claim(sale.event_id, f"u{i}", hold, seats=seats)
        await race_store.start_charge(sale.event_id, hold, f"u{i}", charge, 4 * PRICE)
        assert (await callback(sale, charge, "CAPTURED")).decision == "CONFIRMED"

        async def give_back(key: str, seat: str) -> str:
            await asyncio.sleep(rng.random() / 1000)
            part = keys.part_id(charge, sale.event_id, hold, key)
            reply = await race_store.runner.run(
                "hold_refund", sale.event_id, [hold, part, seat, PRICE, "race"]
            )
            return str(reply[0])

        async def provider(kind: str) -> str:
            await asyncio.sleep(rng.random() / 1000)
            try:
                res = await race_store.apply_reversal(
                    sale.event_id,
                    ProviderReversal(
                        f"pev-{kind}-{i}",
                        charge,
                        f"att-{charge}",
                        kind,
                        4 * PRICE,
                        "EUR",
                        sale.event_id,
                    ),
                )
            except errors.EngineError as exc:
                return exc.code
            return res.decision

        moves = [give_back("a", seats[0]), give_back("a", seats[0]), give_back("b", seats[1])]
        moves.append(provider(rng.choice(["REFUND", "DISPUTE_OPENED"])))
        for code in await asyncio.gather(*moves):
            outcomes[code] += 1

    await asyncio.gather(*(order(i) for i in range(trials)))
    charges = await race_store.read.scan_charges(sale.event_id)
    holds = await race_store.read.holds(sale.event_id)
    for i in range(trials):
        winner = next(c for c in charges if c.charge_id == f"c{i}")
        parts = [c for c in charges if c.part_of == f"c{i}"]
        h = holds[f"h{i}"]
        # A key is one part ("a" twice is one), and the winner counts exactly its parts.
        assert (
            len(parts) <= 2 and winner.parted == sum(p.amount for p in parts) == len(parts) * PRICE
        )
        # Every seat is the order's or went back with a part: none lost, none twice.
        assert len(h.seat_ids) + len(parts) == 4 or h.state == HoldState.REVOKED
        held = winner.holds_money + sum(p.holds_money for p in parts)
        if winner.state == ChargeState.CAPTURED:  # the order stands with what it kept
            assert h.state == HoldState.CONFIRMED
            assert winner.holds_money == len(h.seat_ids) * PRICE
        elif winner.state == ChargeState.PROVIDER_REFUNDED:  # the provider gave back it all
            assert h.state == HoldState.EXCEPTION
            assert held == 0 and all(p.state == ChargeState.REFUNDED for p in parts)
        else:  # disputed: the order waits for a person; its parts still go back
            assert (winner.state, h.state) == (ChargeState.DISPUTED, HoldState.EXCEPTION)
            assert held == sum(p.amount for p in parts if p.state == ChargeState.REFUNDING)
    assert outcomes["PART"] >= trials  # every order gave something back in some interleavings
    report = await race_store.read.audit(sale.event_id)
    assert report.ok, report.violations
