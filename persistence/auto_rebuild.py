"""Recovery without an operator: the ledger writer's look finds an event lost (Redis restarted
empty), fenced (Redis went back in time) or half built (a rebuild that died), and a ledger
process rebuilds it from the ledger with the same rules as `onsale rebuild --force`, then the
event sells again. Two ledger processes never rebuild one event at once: `rebuild` holds the
event's PostgreSQL advisory lock, and a process that cannot take it leaves the event to the one
that has it. A rebuild refused (decisions still on their way to the ledger, say) is tried again
at the next look; every decision it makes goes through the outbox like any other."""

import asyncio
import logging
import time
from dataclasses import dataclass

import asyncpg

from engine.store import Store
from persistence.rebuild import NotNeeded, RebuildRefused, RebuildRunning, rebuild

log = logging.getLogger("onsale.auto_rebuild")


@dataclass
class AutoRebuildStats:
    rebuilt: int = 0
    refused: int = 0
    failed: int = 0
    last_s: float = 0.0  # how long the last rebuild took


class AutoRebuilder:
    def __init__(self, store: Store, pool: asyncpg.Pool, *, enabled: bool = True) -> None:
        self.store, self.pool, self.enabled = store, pool, enabled
        self.stats = AutoRebuildStats()
        self._running: dict[str, asyncio.Task[bool]] = {}

    def start(self, event_ids: list[str]) -> None:
        """Start a rebuild of each event the look found needing one (in the background: the
        writer goes on with the other events), unless one of this process's runs already."""
        if not self.enabled:
            return
        for event_id in event_ids:
            running = self._running.get(event_id)
            if running is None or running.done():
                self._running[event_id] = asyncio.create_task(
                    self.rebuild_one(event_id), name=f"rebuild {event_id}"
                )

    async def wait(self) -> None:
        """Every rebuild started so far, finished (a stop, a test)."""
        await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def rebuild_one(self, event_id: str) -> bool:
        began = time.monotonic()
        try:
            async with self.pool.acquire() as conn:
                report = await rebuild(self.store, conn, event_id, force=True, if_needed=True)
        except (RebuildRunning, NotNeeded):
            return False  # another process rebuilds it, or has just done so
        except RebuildRefused as exc:
            self.stats.refused += 1
            log.warning("automatic rebuild of %s refused (tried again later): %s", event_id, exc)
            return False
        except Exception:
            self.stats.failed += 1
            log.exception("automatic rebuild of %s failed (tried again later)", event_id)
            return False
        took = time.monotonic() - began
        self.stats.rebuilt += 1
        self.stats.last_s = took
        log.warning(
            "event %s rebuilt from the ledger in %.2f s: %d seats, %d sold, %d superseded",
            event_id,
            took,
            report.seats,
            report.sold,
            len(report.superseded),
        )
        return True
