"""Which events a worker visits (ADR 0051): those whose score in its index across events
(engine/model/keys.py INDEXES: the scripts keep them) has come, one read however many events;
and every FULL_LOOK_S, or always with the tests' per-event clocks (which the server's clock does
not know), every event instead, by its own zset: what an index would miss (work from before the
index, an entry lost). The sweeper's due index has the same two looks (workers/sweeper.py)."""

import time
from typing import TYPE_CHECKING

from engine.model import keys

if TYPE_CHECKING:
    from engine.store import Store

FULL_LOOK_S = 60.0
# Each index's entries come from this zset of the event's own.
OWN = {keys.TRIMS: "ended", keys.REFUNDS: "refunds", keys.WATCHES: "watch"}


class Looks:
    def __init__(self, store: "Store", kind: str, every_s: float = FULL_LOOK_S) -> None:
        assert kind in OWN, kind
        self.store, self.kind, self.every_s = store, kind, every_s
        self.full_look_at = -every_s  # the first pass looks at every event
        self.indexed = False  # the last `events` came from the index

    async def events(self, upto_ms: int) -> list[str]:
        """The events with work of this kind scored at most `upto_ms` (the server's clock)."""
        self.indexed = False
        if self.store.scripts.test_clock:
            return await self.store.read.event_ids()
        now = time.monotonic()
        if now - self.full_look_at >= self.every_s:
            self.full_look_at = now
            every = await self.store.read.event_ids()
            return await self.store.read.with_entries_upto(every, OWN[self.kind], upto_ms)
        self.indexed = True
        return await self.store.read.indexed(self.kind, upto_ms)
