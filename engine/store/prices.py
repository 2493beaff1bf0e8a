"""What a seat costs: the event's `price_minor`, or the price of the seat's level when the event
was created with a table of price levels (its seat map's `price_level`, ADR 0038).

Each priced seat's amount is kept in the event's `prices` hash (an EXTRA_KEYS entry under the
event's hash tag: seat_id -> price_minor), written while the event is a DRAFT, before its seats,
and never changed; a seat without an entry pays the event's price. No script reads it: the
charge start adds the hold's seats' prices (one HMGET, off the claim's hot path) and passes the
amount to `charge_start.lua`, which fixes it on the charge as for a single-price event; the
ledger keeps each seat's price (`seats.price_minor`) and a rebuild writes the hash again.

A claim's answer names each seat's price too. Prices never change once the event is on sale, so
each process keeps an event's table in memory (`PriceBook`): one small read the first time it
answers a claim of the event (whether it prices its seats at all), one HGETALL of a table up to
BOOK_SEATS_MAX seats, and nothing on every later claim; a larger table is read per claim, its
seats only."""

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.model.holds import SeatSpec
from engine.store.runner import Runner

PRICES_KEY = "prices"  # engine/model/keys.py EXTRA_KEYS
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


BOOK_SEATS_MAX = 20_000  # priced seats an event's table may have to be kept whole in memory
BOOK_EVENTS_MAX = 256  # events whose tables a process keeps
BOOK_TTL_S = 60.0  # then read again: an event dropped and made anew may price otherwise


@dataclass(frozen=True, slots=True)
class _Table:
    default: int  # the event's price_minor
    own: dict[str, int] | None  # every priced seat's; None: too many to keep, read per claim
    read_at: float


class PriceBook:
    """Each event's seat prices, in this process's memory (see the module's note)."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self._tables: dict[str, _Table] = {}

    async def prices(self, event_id: str, seat_ids: Sequence[str]) -> list[int]:
        """Each seat's price, in the order given."""
        table = self._tables.get(event_id)
        if table is None or time.monotonic() - table.read_at > BOOK_TTL_S:
            table = await self._read(event_id)
        if table.own is None:
            return await seat_prices(self.runner, event_id, seat_ids)
        own = table.own
        return [own.get(s, table.default) for s in seat_ids]

    async def _read(self, event_id: str) -> _Table:
        event, priced = self.runner.key(event_id, "event"), self.runner.key(event_id, PRICES_KEY)
        async with self.runner.client.pipeline(transaction=True) as pipe:
            pipe.hget(event, "price_minor")
            pipe.hlen(priced)
            default, n = await self.runner.timed(pipe.execute())
        own: dict[str, int] | None = None
        if n <= BOOK_SEATS_MAX:
            raw = await self.runner.timed(self.runner.client.hgetall(priced)) if n else {}
            own = {seat: int(price) for seat, price in raw.items()}
        if len(self._tables) >= BOOK_EVENTS_MAX:
            self._tables.clear()
        table = self._tables[event_id] = _Table(int(default or 0), own, time.monotonic())
        return table
