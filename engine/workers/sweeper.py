"""The sweeper: runs expire-if-still-held (hold_expire) and the quarantine hard timeout
(hold_quarantine_timeout) over every event with something due, in bounded batches,
continuously.

It decides nothing itself: each step is a script that reads the server clock and applies the
deadline rule, so a sweeper that runs late, twice, or concurrently with another sweeper (or with
a callback) changes nothing that the rule has not already decided.

Which events have something due is the due index (engine/model/keys.py index_key): the scripts that
set a deadline or a quarantine end keep each event's earliest there, and a sweep sets it right
again, so a pass reads one zset, not every event. Every FULL_LOOK_S a pass looks at every event
instead (two pipelined reads each), for whatever the index would have missed."""

import asyncio
import logging
import time
from dataclasses import dataclass

from engine.model import keys
from engine.store import Store
from engine.store.loops import each_event, run_passes
from engine.store.reads import timed

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
        self.full_look_at = float("-inf")  # monotonic time of the last look at every event

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
        """One pass over the events with a deadline or a quarantine end due now, read from the
        due index (one read however many events, one per slot on a cluster); every
        FULL_LOOK_S, and always with the tests' clocks, by looking at every event instead (what
        an index that lost an entry, or events from before the index, still need). True if some
        event still had due work."""
        now = time.monotonic()
        if self.store.scripts.test_clock or now - self.full_look_at >= FULL_LOOK_S:
            self.full_look_at = now
            due = await due_events(self.store, await self.store.read.event_ids())
        else:
            due = await indexed_due(self.store)
        return await each_event(due, self.sweep_event, self.stats)

    async def run(self, stop: asyncio.Event) -> SweepStats:
        """Sweep until `stop` is set; Redis outages are retried with backoff."""
        await run_passes(
            "sweep", self.run_once, stop, self.stats, interval_s=self.interval_s, log=log
        )
        return self.stats


PROBE_CHUNK = 1_000  # events looked at in one pipelined round trip
FULL_LOOK_S = 10.0  # the look at every event, beside the index, this often
DUE_READ_MAX = 10_000  # events one read of the index returns (the rest: the next pass)


async def indexed_due(store: Store) -> list[str]:
    """The events whose score in the due index (engine/model/keys.py) has come, by the
    server's clock."""
    now = await store.read.server_time_ms()
    return await store.read.indexed(keys.DUE, now, DUE_READ_MAX)


async def due_events(store: Store, event_ids: list[str]) -> list[str]:
    """The events whose earliest deadline (RESERVED holds) or quarantine end (QUARANTINED holds,
    released holds' blocked seats) has come, by the clock the scripts decide with: the server's,
    or an event's test clock. Two O(log n) reads per event, pipelined; the scripts still apply
    the deadline rule themselves, so an event looked at early only waits for the next pass."""
    now = await store.read.server_time_ms()
    test_clock = store.scripts.test_clock
    due: list[str] = []
    for start in range(0, len(event_ids), PROBE_CHUNK):
        chunk = event_ids[start : start + PROBE_CHUNK]
        async with store.client.pipeline(transaction=False) as pipe:
            for event_id in chunk:
                event_key, deadlines, quarantines = (store.keys(event_id)[i] for i in (0, 7, 8))
                pipe.zrange(deadlines, 0, 0, withscores=True)
                pipe.zrange(quarantines, 0, 0, withscores=True)
                if test_clock:
                    pipe.hget(event_key, "test_now_ms")
            replies = await timed(pipe.execute(), store.timeout_s)
        width = 3 if test_clock else 2
        for i, event_id in enumerate(chunk):
            first, ends = replies[i * width], replies[i * width + 1]
            clock = int(replies[i * width + 2] or now) if test_clock else now
            if any(entries and entries[0][1] <= clock for entries in (first, ends)):
                due.append(event_id)
    return due
