"""What a seat costs: the event's `price_minor`, or the price of the seat's level when the event
was created with a table of price levels (its seat map's `price_level`, ADR 0038).

Each priced seat's amount is kept in the event's `prices` hash (an EXTRA_KEYS entry under the
event's hash tag: seat_id -> price_minor), written while the event is a DRAFT, before its seats,
and never changed; a seat without an entry pays the event's price. No script reads it: the
charge start adds the hold's seats' prices (one HMGET, off the claim's hot path) and passes the
amount to `charge_start.lua`, which fixes it on the charge as for a single-price event; the
ledger keeps each seat's price (`seats.price_minor`) and a rebuild writes the hash again."""

from collections.abc import Iterable, Sequence
from typing import Any

from engine.holds import SeatSpec
from engine.runner import Runner

PRICES_KEY = "prices"  # engine/keys.py EXTRA_KEYS
WRITE_CHUNK = 1_000  # seats one HSET writes


async def save_prices(runner: Runner, event_id: str, seats: Iterable[SeatSpec]) -> int:
    """Write the prices of the seats that have one (their level's); returns how many."""
    priced = [(s.seat_id, s.price_minor) for s in seats if s.price_minor is not None]
    key = runner.key(event_id, PRICES_KEY)
    for i in range(0, len(priced), WRITE_CHUNK):
        mapping: dict[Any, Any] = dict(priced[i : i + WRITE_CHUNK])
        await runner.timed(runner.client.hset(key, mapping=mapping))
    return len(priced)


async def seat_prices(runner: Runner, event_id: str, seat_ids: Sequence[str]) -> list[int]:
    """Each seat's price, in the order given: its own, else the event's."""
    if not seat_ids:
        return []
    async with runner.client.pipeline(transaction=True) as pipe:  # one slot, one snapshot
        pipe.hget(runner.key(event_id, "event"), "price_minor")
        pipe.hmget(runner.key(event_id, PRICES_KEY), list(seat_ids))
        default, own = await runner.timed(pipe.execute())
    return [int(p) if p is not None else int(default or 0) for p in own]
