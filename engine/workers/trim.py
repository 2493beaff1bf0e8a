"""The trimmer: drops ended holds that never had a charge from Redis once the ledger holds their
decision and the retention has passed (lua/hold_trim.lua, ADR 0018), over every event, in
bounded batches, on an interval. It is what keeps an event's memory bounded by its live state
plus the retention window, whatever a flood of claims left behind.

- The ledger floor is read from Redis (`Reads.ledger_progress`): every outbox entry below it is
  committed in the ledger, so a rebuild would find the trimmed hold there.
- An event whose outbox has no ledger group (no ledger writer has ever read it) is not trimmed:
  nothing of it is known to be in the ledger. A deployment that runs without a ledger on
  purpose can trim by the retention alone with `without_ledger` (ONSALE_TRIM_WITHOUT_LEDGER=1);
  its ended holds are then gone for good after the retention.
- Which events have holds to trim is the trim index (engine/model/keys.py), kept by the scripts
  that end a hold without a charge and by the trim script itself, as the due index is the
  sweeper's (ADR 0044, ADR 0051).
- Like the sweeper it decides nothing: the script reads the server clock and the hold's own
  record, so a trimmer that runs late, twice or concurrently with another trims nothing that the
  rule does not allow."""

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.model import keys
from engine.model.errors import EventNotFound
from engine.model.replies import TrimCode
from engine.store.loops import each_event, run_passes
from engine.workers.looks import Looks

if TYPE_CHECKING:
    from engine.store import Store

log = logging.getLogger("onsale.trim")

NO_LEDGER_FLOOR = "+"  # past every outbox id: trim by the retention alone (no ledger deployed)


@dataclass
class TrimStats:
    passes: int = 0
    trimmed: int = 0
    unledgered: int = 0  # event passes skipped: no ledger group on the outbox
    errors: int = 0


@dataclass(frozen=True, slots=True)
class TrimResult:
    trimmed: int
    more: bool  # another call now would trim further


class Trimmer:
    def __init__(
        self,
        store: "Store",
        *,
        retention_ms: int = 600_000,
        interval_ms: int = 5_000,
        batch_max: int = 500,
        rounds_max: int = 20,
        without_ledger: bool = False,
    ) -> None:
        assert retention_ms >= 0 and interval_ms > 0 and batch_max > 0 and rounds_max > 0
        self.store = store
        self.retention_ms = retention_ms
        self.interval_s = interval_ms / 1000
        self.batch_max = batch_max
        self.rounds_max = rounds_max
        self.without_ledger = without_ledger
        self.stats = TrimStats()
        self.looks = Looks(store, keys.TRIMS)

    async def ledger_floor(self, event_id: str) -> str | None:
        """The stream id below which the event's outbox is in the ledger; None when nothing
        may be trimmed (no ledger group, and trimming without a ledger was not chosen)."""
        progress = await self.store.read.ledger_progress(event_id)
        if progress.floor == (0, 0):  # no ledger group: the same test as the writer's trim
            return NO_LEDGER_FLOOR if self.without_ledger else None
        ms, seq = progress.floor
        return f"{ms}-{seq}"

    async def step(self, event_id: str, floor: str) -> TrimResult:
        """One script call: at most `batch_max` ended holds examined."""
        reply = await self.store.runner.run(
            "hold_trim", event_id, [self.retention_ms, floor, self.batch_max]
        )
        if reply[0] == TrimCode.NOT_FOUND:
            raise EventNotFound(event_id)
        return TrimResult(int(reply[1]), bool(int(reply[2])))

    async def trim_event(self, event_id: str) -> bool:
        """Trim one event; True if work was left over (more than rounds_max batches due)."""
        floor = await self.ledger_floor(event_id)
        if floor is None:
            self.stats.unledgered += 1
            return False
        for _ in range(self.rounds_max):
            r = await self.step(event_id, floor)
            self.stats.trimmed += r.trimmed
            if not r.more:
                return False
        return True

    async def run_once(self) -> bool:
        """One pass over the events with an ended hold old enough to go, from the trim index
        (engine/workers/looks.py: an idle event costs nothing). True if some event still had
        holds to trim."""
        old = await self.store.read.server_time_ms() - self.retention_ms
        look = await self.looks.events(old)
        return await each_event(look.events, self.trim_event, self.stats)

    async def run(self, stop: asyncio.Event) -> TrimStats:
        """Trim until `stop` is set; Redis outages are retried with backoff."""
        await run_passes(
            "trim", self.run_once, stop, self.stats, interval_s=self.interval_s, log=log
        )
        return self.stats
