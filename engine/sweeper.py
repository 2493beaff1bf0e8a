"""The sweeper: runs expire-if-still-held (hold_expire) and the quarantine hard timeout
(hold_quarantine_timeout) over every event, in bounded batches, continuously.

It decides nothing itself: each step is a script that reads the server clock and applies the
deadline rule, so a sweeper that runs late, twice, or concurrently with another sweeper (or with
a callback) changes nothing that the rule has not already decided."""

import asyncio
import logging
from dataclasses import dataclass

from engine.loops import each_event, run_passes
from engine.store import Store

log = logging.getLogger("onsale.sweeper")


@dataclass
class SweepStats:
    passes: int = 0
    expired: int = 0
    quarantined: int = 0
    freed: int = 0
    errors: int = 0


class Sweeper:
    def __init__(
        self,
        store: Store,
        *,
        interval_ms: int = 200,
        batch_max: int = 50,
        rounds_max: int = 50,
    ) -> None:
        assert interval_ms > 0 and batch_max > 0 and rounds_max > 0
        self.store = store
        self.interval_s = interval_ms / 1000
        self.batch_max = batch_max
        self.rounds_max = rounds_max
        self.stats = SweepStats()

    async def sweep_event(self, event_id: str) -> bool:
        """Sweep one event; True if work was left over (more than rounds_max batches due)."""
        for _ in range(self.rounds_max):
            r = await self.store.sweep(event_id, self.batch_max)
            self.stats.expired += r.expired
            self.stats.quarantined += r.other
            if r.remaining_due == 0:
                break
        else:
            return True
        for _ in range(self.rounds_max):
            q = await self.store.sweep_quarantine(event_id, self.batch_max)
            self.stats.expired += q.expired
            self.stats.freed += q.other
            if q.remaining_due == 0:
                return False
        return True

    async def run_once(self) -> bool:
        """One pass over every event. True if some event still had due work."""
        return await each_event(await self.store.read.event_ids(), self.sweep_event, self.stats)

    async def run(self, stop: asyncio.Event) -> SweepStats:
        """Sweep until `stop` is set; Redis outages are retried with backoff."""
        await run_passes(
            "sweep", self.run_once, stop, self.stats, interval_s=self.interval_s, log=log
        )
        return self.stats
