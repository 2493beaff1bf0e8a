"""Noticing a Redis that lost an event or went back in time (ADR 0017), from the one place that
sees both Redis and the ledger: the ledger writer.

- **Lost**: the ledger has an event this Redis does not (it restarted empty). The event is
  listed in `<prefix>:lost`, so that reads and claims answer 503 "recovering" instead of "not
  found" until `onsale rebuild` puts it back.
- **Gone back in time**: the event's decision number in Redis (`seq`, counted by every outbox
  record) is below the last one the ledger holds: Redis restarted from an older snapshot, or
  failed over to a replica that had not received the last writes. The event is fenced
  (`event_fence`): nothing is decided for it until it is rebuilt, so a seat the ledger shows
  as sold is never sold again. A new decision numbered with a number the ledger already holds
  is refused by the ledger's unique index and fences the event the same way (the writer).
- Either way, and for a rebuild that died half way, `onsale ledger` rebuilds the event from the
  ledger by itself (persistence/auto_rebuild.py, ONSALE_AUTO_REBUILD).
- **Replaced**: a batch the writer read from an outbox that a rebuild has since replaced (Redis
  lost it) is never written: the rebuild numbered the event's decisions after the ledger's
  last without that batch's, whose decisions were lost with that Redis (`from_the_outbox_now`).
- Only the events this deployment mirrored (the ledger names its Redis key prefix): another
  deployment's ledger process writing into the same database leaves them alone (ADR 0037)."""

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import redis.asyncio as aioredis

from engine.model.replies import FenceCode
from engine.store import Store
from persistence.auto_rebuild import AutoRebuilder
from persistence.queries import Q
from persistence.rebuild import rebuild_lock_key

log = logging.getLogger("onsale.fencing")


@dataclass
class FenceReport:
    lost: list[str] = field(default_factory=list)
    fenced: list[str] = field(default_factory=list)  # fenced by this look
    still_fenced: list[str] = field(default_factory=list)  # fenced before, not rebuilt yet
    half_built: list[str] = field(default_factory=list)  # a rebuild runs, or died

    def to_rebuild(self) -> list[str]:
        return list(dict.fromkeys([*self.lost, *self.fenced, *self.still_fenced, *self.half_built]))


class Fencer:
    def __init__(
        self,
        store: Store,
        pool: asyncpg.Pool,
        *,
        interval_s: float = 1.0,
        auto_rebuild: bool = False,
    ) -> None:
        self.store, self.pool, self.interval_s = store, pool, interval_s
        self._last_check = 0.0
        # What a look finds lost, fenced or half built is rebuilt in the background, when asked.
        self.rebuilder = AutoRebuilder(store, pool, enabled=auto_rebuild)

    async def check_due(self) -> FenceReport | None:
        """`check`, at most once per `interval_s`; then the rebuilds it calls for, started."""
        if time.monotonic() - self._last_check < self.interval_s:
            return None
        self._last_check = time.monotonic()
        report = await self.check()
        self.rebuilder.start(report.to_rebuild())
        return report

    async def check(self) -> FenceReport:
        report = FenceReport()
        in_redis = set(await self.store.read.event_ids())
        async with self.pool.acquire() as conn:
            owned = await conn.fetch(Q["ledger_events"], self.store.prefix)
            for event_id in [r[0] for r in owned]:
                status, seq, rebuilding = await self._state(event_id)
                if rebuilding == "1":
                    report.half_built.append(event_id)
                    continue
                if status == "fenced":
                    report.still_fenced.append(event_id)
                    continue
                if status is None and event_id not in in_redis:
                    await self._lost(event_id)
                    report.lost.append(event_id)
                    continue
                last = int(await conn.fetchval(Q["event_last_seq"], event_id))
                if status is not None and int(seq or 0) < last:
                    reason = f"redis decision number {seq or 0} < ledger {last}"
                    if await self.fence(event_id, reason, last) == FenceCode.FENCED:
                        report.fenced.append(event_id)
        return report

    async def _state(self, event_id: str) -> tuple[str | None, str | None, str | None]:
        status, seq, rebuilding = await self.store.read.event_fields(
            event_id, "status", "seq", "rebuilding"
        )
        return status, seq, rebuilding

    async def _lost(self, event_id: str) -> None:
        log.error("event %s: the ledger has it, Redis does not; rebuild it", event_id)
        await self.store.restore.mark_lost(event_id)

    async def fence(self, event_id: str, reason: str, ledger_seq: int | None = None) -> FenceCode:
        code = await self.store.fence(event_id, reason, ledger_seq)
        if code == FenceCode.FENCED:
            log.error("event %s fenced: %s; rebuild it from the ledger", event_id, reason)
        return code


class OutboxReplaced(RuntimeError):
    """The batch was read from an outbox that is no longer the event's (Redis lost it and the
    event was, or is being, rebuilt): its decisions were lost with that Redis."""


async def from_the_outbox_now(
    conn: asyncpg.Connection,
    redis: "aioredis.Redis",
    stream: str,
    event_id: str,
    entries: list[tuple[str, Any]],
) -> None:
    """Inside the batch's transaction: raise OutboxReplaced unless the batch is still in the
    event's outbox and no rebuild of the event runs. The rebuild's lock, taken shared until the
    commit, keeps a rebuild from starting (and reading the ledger's last decision number) before
    the batch is in; a rebuild that ran since the read replaced the stream, whose new entries
    all come after the batch's (an unacknowledged entry is never trimmed, so the batch's last
    entry is there exactly when its outbox is)."""
    key = rebuild_lock_key(event_id)
    if not await conn.fetchval("select pg_try_advisory_xact_lock_shared(hashtext($1))", key):
        raise OutboxReplaced(f"a rebuild of {event_id} is running")
    last = entries[-1][0]
    if not await redis.xrange(stream, last, last):
        raise OutboxReplaced(f"the outbox of {event_id} was replaced since the batch was read")
