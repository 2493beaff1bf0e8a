"""Which events a worker visits (ADR 0051): those whose score in its index across events
(engine/model/keys.py INDEXES: the scripts keep them) has come, one read however many events;
and every FULL_LOOK_S, or always with the tests' per-event clocks (which the server's clock does
not know), every event instead, by its own zset: what an index would miss (work from before the
index, an entry lost). The sweeper's due index has the same two looks (workers/sweeper.py)."""

import time
from typing import TYPE_CHECKING, NamedTuple

from engine.model import keys

if TYPE_CHECKING:
    from engine.store import Store

FULL_LOOK_S = 60.0


class Look(NamedTuple):
    events: list[str]
    indexed: bool  # from the index: an event in it may have nothing to do (a score left early)
    checked: bool = False  # each has work of this kind up to the horizon (the look at every one)


class Looks:
    def __init__(self, store: "Store", kind: str, every_s: float = FULL_LOOK_S) -> None:
        assert kind in keys.FOLLOWS, kind
        self.store, self.kind, self.every_s = store, kind, every_s
        self.full_look_at = -every_s  # the first pass looks at every event

    async def events(self, upto_ms: int) -> Look:
        """The events with work of this kind scored at most `upto_ms` (the server's clock)."""
        if self.store.scripts.test_clock:
            return Look(await self.store.read.event_ids(), False)
        now = time.monotonic()
        if now - self.full_look_at >= self.every_s:
            self.full_look_at = now
            every = await self.store.read.event_ids()
            own = await self.store.read.with_entries_upto(every, keys.FOLLOWS[self.kind], upto_ms)
            return Look(own, False, checked=True)
        return Look(await self.store.read.indexed(self.kind, upto_ms), True)
