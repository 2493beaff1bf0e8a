"""The write-behind worker: each event's outbox stream -> the PostgreSQL ledger.

- Reads with a consumer group (`ledger`), in batches of at most `batch_max` entries: its own
  pending entries (after a failure, and once a second), those a dead consumer left pending
  (XAUTOCLAIM, once a second), then new ones. A full batch has the next one read, and its rows
  built, while PostgreSQL writes it; idle, it waits on the outboxes with a blocking read
  (persistence/ledger_group.py): a decision is read as it is made.
- Writes a batch in one transaction, a statement per table (persistence/ledger_apply.py, ADR
  0031): decisions inserted with ON CONFLICT DO NOTHING on their deterministic decision id (a
  replay writes nothing twice), holds and charges upserted only forward in stream order,
  refunds recorded, and each stock correction kept whole in stock_corrections (ADR 0022).
- Acknowledges (XACK) only after the commit (a crash before re-delivers, harmlessly). A row a
  constraint refuses is not dropped: the batch is replayed row by row, the refused row kept in
  ledger_alerts with the reason.
- Verified raw callbacks (the capped `raw_callbacks` stream) are copied the same way; a
  decision that notifies the merchant gets its webhook deliveries in the same transaction
  (persistence/notify.py); `run` runs the webhook sender beside the writer (ADR 0024).
- A batch read from an outbox a rebuild has replaced is not written (persistence/fencing.py).
- PostgreSQL down: the batch stays pending, the worker backs off (capped at a second,
  jittered) and catches up when it returns, its own pending batch first; Redis keeps the
  entries, and the lag is read from Redis on its own clock, so it stays true in the outage.
- Stopped (SIGTERM): the batch in hand (and one read ahead) is committed, then `run` returns.
- Each process reads as its own consumer; its first pass over an event removes the consumers
  idle an hour with nothing pending (stopped writers)."""

import asyncio
import logging
import math
import os
import time
from dataclasses import dataclass
from typing import Any

import asyncpg
import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

from engine.model import keys
from engine.model.ledger_progress import LEDGER_GROUP
from engine.store import Store
from engine.store.loops import repeat
from persistence.event_mirror import mirror_event
from persistence.fencing import Fencer, OutboxReplaced, from_the_outbox_now
from persistence.ledger_apply import Ahead, Batch, apply_records, batch_of, records_of
from persistence.ledger_apply import apply_raw_callbacks as mirror_raw
from persistence.ledger_group import (
    forget_idle_consumers,
    present,
    read_group,
    read_new,
    reclaim,
)
from persistence.metrics import LedgerMetrics
from persistence.queries import Q
from persistence.settings import SenderSettings
from persistence.webhook_sender import WebhookSender

log = logging.getLogger("onsale.ledger")

# The longest pause between two attempts during an outage: PostgreSQL's return is noticed within
# it (one connection attempt per second costs nothing; the entries wait in Redis meanwhile).
OUTAGE_PROBE_S = 1.0
RECLAIM_S = 1.0  # pending entries (a dead writer's, its own) are looked for this often at most


@dataclass
class WriterStats:
    batches: int = 0
    replaced: int = 0  # batches not written: read from an outbox a rebuild replaced
    entries: int = 0
    reclaimed: int = 0
    alerts: int = 0
    errors: int = 0
    raw_callbacks: int = 0


class LedgerWriter:
    def __init__(
        self,
        redis: "aioredis.Redis",
        pool: asyncpg.Pool,
        *,
        prefix: str,
        consumer: str,
        batch_max: int = 500,
        claim_idle_ms: int = 30_000,
        retention_ms: int | None = None,
        auto_rebuild: bool = False,
    ) -> None:
        assert batch_max > 0
        self.redis, self.pool, self.prefix = redis, pool, prefix
        self.retention_ms = retention_ms  # trims what the ledger holds; None: keep the stream
        self.consumer, self.batch_max, self.claim_idle_ms = consumer, batch_max, claim_idle_ms
        self.stats = WriterStats()
        self.store = Store(redis, prefix=prefix, timeout_s=30.0, autopipeline=False)
        self.reads = self.store.read
        self.fencer = Fencer(self.store, pool, auto_rebuild=auto_rebuild)  # off unless asked
        self._groups: set[str] = set()  # events whose group exists and config is mirrored
        self._ahead: dict[str, Ahead] = {}  # events' next batches, read ahead (pending)
        # Streams where this writer has no entries pending but those in hand (its own pending
        # read again after a failure, or once a second), and when it last looked at them.
        self._sure: set[str] = set()
        self._fenced: set[str] = set()  # events seen fenced by their last step
        self._looked_at: dict[str, float] = {}

    def _stream(self, event_id: str) -> str:
        return keys.event_key(event_id, "outbox", self.prefix)

    def _raw_stream(self, event_id: str) -> str:
        return keys.event_key(event_id, "raw_callbacks", self.prefix)

    async def prepare(self, event_id: str) -> None:
        """The event's consumer groups exist and its config is mirrored (once out of DRAFT)."""
        if event_id in self._groups:
            return
        for stream in (self._stream(event_id), self._raw_stream(event_id)):
            try:
                await self.redis.xgroup_create(stream, LEDGER_GROUP, id="0", mkstream=True)
            except ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
        if await mirror_event(self.redis, self.pool, self.prefix, event_id):
            self._groups.add(event_id)
            await forget_idle_consumers(self.redis, self._stream(event_id), self.consumer)

    async def step(self, event_id: str) -> int:
        """Move at most one batch of one event's outbox, and one of its raw callbacks, into
        the ledger; returns the entries handled (both streams). A full batch of new entries has
        the next read while it is written (`flush` writes those left at a stop)."""
        try:
            return await self._step(event_id)
        except BaseException:  # entries it read may be left pending: its next takes look
            self._sure.difference_update((self._stream(event_id), self._raw_stream(event_id)))
            raise

    async def _step(self, event_id: str) -> int:
        await self.prepare(event_id)
        stream = self._stream(event_id)
        if (await self.reads.event_fields(event_id, "status"))[0] == "fenced":
            # Its Redis went back in time: what it decides now is not mirrored, nor a batch
            # read before the fence was seen (left pending; a rebuild replaces the stream).
            self._ahead.pop(event_id, None)
            self._fenced.add(event_id)
            self._sure.discard(stream)
            return 0
        self._fenced.discard(event_id)
        ahead = self._ahead.pop(event_id, None)
        batch = ahead.batch if ahead else None
        entries, new = (ahead.entries, True) if ahead else await self._take(event_id, stream)
        if entries:
            reading = None
            if new and len(entries) >= self.batch_max:
                reading = asyncio.create_task(self._read_ahead(event_id, stream))
            try:
                await self._move(event_id, stream, entries, batch)
            except BaseException:
                if reading is not None:  # what it read stays pending: the next take reads it
                    reading.cancel()
                    await asyncio.gather(reading, return_exceptions=True)
                raise
            if reading is not None and (read := await reading).entries:
                self._ahead[event_id] = read
        raw_stream = self._raw_stream(event_id)
        raw, _new = await self._take(event_id, raw_stream)
        if raw:
            self.stats.raw_callbacks += await mirror_raw(self.pool, event_id, raw)
            await self.redis.xack(raw_stream, LEDGER_GROUP, *[entry_id for entry_id, _ in raw])
        return len(entries) + len(raw)

    async def wait(self, timeout_s: float) -> bool:
        """Nothing moved: wait up to `timeout_s` on the outboxes of the events prepared, but
        those with entries of this writer's pending after a failure (they go on with those, in
        stream order); what comes is each event's next batch. False: none to wait on."""
        waiting = [e for e in self._groups if e not in self._ahead and e not in self._fenced]
        streams = {e: s for e in waiting if (s := self._stream(e)) in self._sure}
        if not streams:
            return False
        try:
            found = await read_new(
                self.redis, streams, consumer=self.consumer, count=self.batch_max,
                timeout_s=timeout_s,
            )  # fmt: skip
            self._ahead.update((e, Ahead(entries, None)) for e, entries in found.items())
        except BaseException as exc:  # what one call read stays pending: the next takes look
            self._sure.difference_update(streams.values())
            if not isinstance(exc, ResponseError) or "NOGROUP" not in str(exc):
                raise
            self._groups.difference_update(streams)  # a stream recreated: prepared again
        return True

    async def _read_ahead(self, event_id: str, stream: str) -> Ahead:
        """The next new batch, read and its rows built while PostgreSQL writes the one before
        (a record that cannot be read: built at its write, which fails there)."""
        entries = await self._take_new(event_id, stream)
        try:
            return Ahead(entries, batch_of(records_of(entries)))
        except Exception:
            return Ahead(entries, None)

    async def _move(
        self, event_id: str, stream: str, entries: list[tuple[str, Any]], batch: Batch | None
    ) -> None:
        """One batch of the outbox written, acknowledged, the stream trimmed (one of a replaced
        outbox dropped, and what was read ahead with it)."""
        try:
            collided = await self.write(event_id, entries, batch)
        except OutboxReplaced as exc:  # still pending where that outbox lives: looked at again
            self._ahead.pop(event_id, None)
            self._sure.discard(stream)
            self.stats.replaced += 1
            log.warning("ledger: %d decisions not written: %s", len(entries), exc)
            return
        if collided:
            await self.fencer.fence(event_id, "a decision number the ledger already held")
        await self.redis.xack(stream, LEDGER_GROUP, *[entry_id for entry_id, _ in entries])
        if self.retention_ms is not None:
            await self.trim(event_id)
        self.stats.batches += 1
        self.stats.entries += len(entries)

    async def flush(self) -> None:
        """Write the read-ahead batches left (a stop came between two steps); a fenced event's
        stay pending, and so do all in an outage (the next writer's take reads them)."""
        try:
            while self._ahead:
                event_id, ahead = self._ahead.popitem()
                if (await self.reads.event_fields(event_id, "status"))[0] != "fenced":
                    await self._move(event_id, self._stream(event_id), *ahead)
        except (OSError, RedisError, asyncpg.PostgresError, asyncpg.InterfaceError):
            log.exception("ledger: read-ahead batches left pending at the stop")

    async def _take(
        self, event_id: str, stream: str
    ) -> tuple[list[tuple[str, dict[str, str]]], bool]:
        """A batch of the stream, and whether it is new: this writer's own pending entries (a
        failed write's, on the next pass), then those a dead consumer left, then new ones."""
        pause = min(RECLAIM_S, self.claim_idle_ms / 1000)
        looks = time.monotonic() - self._looked_at.get(stream, -math.inf) >= pause
        try:  # its own pending entries too once a second (a read retried after a lost reply)
            own = looks or stream not in self._sure
            entries = await self._read_group(stream, "0") if own else []
            if not entries:
                self._sure.add(stream)
                entries = await self._reclaim(stream) if looks else []
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            self._groups.discard(event_id)
            return [], False
        if entries:
            return await present(self.redis, stream, entries), False
        return await self._take_new(event_id, stream), True

    async def _reclaim(self, stream: str) -> list[tuple[str, Any]]:
        """Entries a dead consumer left pending (idle `claim_idle_ms`), taken over."""
        entries = await reclaim(
            self.redis, stream, self.consumer, self.claim_idle_ms, self.batch_max
        )
        self.stats.reclaimed += len(entries)
        self._looked_at[stream] = -math.inf if entries else time.monotonic()  # found: again
        return entries

    async def _take_new(self, event_id: str, stream: str) -> list[tuple[str, dict[str, str]]]:
        """Entries never delivered before."""
        try:
            return await self._read_group(stream, ">")
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            # The stream was deleted and recreated (Redis lost, event rebuilt): start again.
            self._groups.discard(event_id)
            return []

    async def _read_group(self, stream: str, start: str) -> list[tuple[str, Any]]:
        """Its own pending entries (`start` "0") or new ones (">"), trimmed ones acknowledged."""
        entries = await read_group(self.redis, stream, self.consumer, start, self.batch_max)
        return await present(self.redis, stream, entries)

    async def write(
        self, event_id: str, entries: list[tuple[str, dict[str, str]]], batch: Batch | None = None
    ) -> bool:
        """The batch in one transaction (`batch`: its rows, if built already); refused rows
        parked. True when a refused row carried a decision number the ledger already held:
        this Redis went back in time."""
        b = batch or batch_of(records_of(entries))
        collided = False
        async with self.pool.acquire() as conn, conn.transaction():
            await from_the_outbox_now(conn, self.redis, self._stream(event_id), event_id, entries)
            await conn.execute(Q["insert_event"], event_id)
            try:
                async with conn.transaction():  # savepoint: the fast path, whole batch
                    await apply_records(conn, b, bulk=True)
                return False
            except asyncpg.IntegrityConstraintViolationError:
                pass
            for (sid, fields), row in zip(entries, b.records, strict=True):  # the slow path
                try:
                    async with conn.transaction():
                        await apply_records(conn, batch_of([row]), bulk=False)
                except asyncpg.IntegrityConstraintViolationError as exc:
                    self.stats.alerts += 1
                    log.error("ledger refused %s %s: %s", event_id, sid, exc)
                    collided |= getattr(exc, "constraint_name", "") == "decisions_seq"
                    if row[1].hold_id:
                        await self.store.restore.mark_refused(event_id, row[1].hold_id, str(exc))
                    await conn.execute(
                        Q["insert_alert"],
                        event_id,
                        sid,
                        fields["decision_id"],
                        f"{type(exc).__name__}: {exc}",
                        fields,
                    )
        return collided

    async def trim(self, event_id: str) -> int:
        """XTRIM MINID below both the oldest entry the ledger may not hold yet (pending or
        undelivered) and the retention horizon: never past what the ledger holds."""
        assert self.retention_ms is not None
        progress = await self.reads.ledger_progress(event_id)
        if progress.floor == (0, 0):
            return 0
        horizon = await self.reads.server_time_ms() - self.retention_ms
        minid = min(progress.floor, (horizon, 0))
        trimmed: int = await self.redis.xtrim(
            self._stream(event_id), minid=f"{minid[0]}-{minid[1]}", approximate=False
        )
        return trimmed

    async def lag(self, event_id: str) -> tuple[int, float]:
        """(entries not yet in the ledger, age in seconds of the oldest of them)."""
        progress = await self.reads.ledger_progress(event_id)
        if not progress.behind or not progress.oldest_ms:
            return progress.behind, 0.0
        now_ms = await self.reads.server_time_ms()
        return progress.behind, max(0.0, (now_ms - progress.oldest_ms) / 1000)

    async def run(
        self,
        stop: asyncio.Event,
        *,
        idle_s: float = 0.1,
        metrics: LedgerMetrics | None = None,
        webhooks: SenderSettings | None = None,
    ) -> WriterStats:
        """Move every event's outbox into the ledger until `stop` is set. Redis and PostgreSQL
        outages are retried with backoff; the entries wait in Redis meanwhile. The merchant
        webhook sender runs beside it on the same pool (ADR 0024), with `webhooks`, or else
        ONSALE_MERCHANT_WEBHOOK* read from the environment now."""
        reported = (0, 0)  # (entries, alerts) already counted in the metrics

        async def one_pass() -> bool:
            nonlocal reported
            moved = 0
            await self.fencer.check_due()  # and rebuilds what it finds lost, if asked to
            for event_id in await self.reads.index.ids():
                try:
                    moved += await self.step(event_id)
                except (OSError, RedisError, asyncpg.PostgresError, asyncpg.InterfaceError):
                    raise  # an outage: the whole pass backs off
                except Exception:
                    # One event's problem (a record the ledger cannot read) must not stop
                    # the others from reaching the ledger.
                    self.stats.errors += 1
                    log.exception("ledger: event %s skipped this pass", event_id)
                    continue
            if metrics is not None:
                metrics.entries.inc(self.stats.entries - reported[0])
                metrics.alerts.inc(self.stats.alerts - reported[1])
                reported = (self.stats.entries, self.stats.alerts)
            return moved > 0 or await self.wait(idle_s)

        def failed() -> None:
            self.stats.errors += 1
            if metrics is not None:
                metrics.errors.inc()

        sending = webhooks or SenderSettings.from_env(os.environ)
        async with asyncio.TaskGroup() as tasks:
            if sending.merchant_webhooks:
                shown = metrics.webhooks if metrics else None  # the log's figures, per endpoint
                tasks.create_task(WebhookSender(self.pool, sending, metrics=shown).run(stop))
            if metrics is not None:  # read from Redis on its own clock: true in a PG outage
                tasks.create_task(metrics.follow_lag(self.reads.event_ids, self.lag, stop))
            await repeat(
                "ledger write",
                one_pass,
                stop,
                interval_s=idle_s,
                log=log,
                expected=(OSError, RedisError, asyncpg.PostgresError, asyncpg.InterfaceError),
                on_error=failed,
                backoff_max_s=OUTAGE_PROBE_S,
            )
            await self.flush()  # the batch in hand: what was read ahead
            await self.fencer.rebuilder.wait()  # a rebuild under way ends before the exit
        return self.stats
