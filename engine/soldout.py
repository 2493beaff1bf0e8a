"""The sold-out shortcut: once Redis has said an event is sold out, this process answers
"sold out" to further claims from memory, without a Redis call, until a seat comes back.

At T0 nearly every claim of a small hot event is a refusal, and a refusal that costs a full
script call costs as much as a sale. ADR 0012 records the rules; in short:

- Entered only from a SOLD_OUT reply of the claim script, tagged with the event's `restocks`
  count from that reply. It holds for `ttl_s` at most; the next real claim renews it.
- Dropped at once when the event goes from no free seat to one: every script that frees a seat
  publishes on `<event key>:restocked` (lua/_lib.lua `restocked`), and this process listens.
  Memory is used only while the subscription is confirmed; losing it forgets everything.
- A retried claim must still get its hold: when the memory is entered, the ids of the event's
  holds are read once (after the SOLD_OUT reply, so every hold made before it is there) and a
  claim whose idempotency key is among them goes to Redis and gets its REPLAY. A hold made
  later needs a seat to come back, which changes `restocks` and drops the memory. Events with
  more than `snapshot_max` holds are not remembered at all (the snapshot would cost more than
  it saves); their refusals go to Redis as before. The trimmer (engine/trim.py, ADR 0018) keeps
  an event's holds to its live ones, those money touched and those ended within the retention
  window, so only a flood within that window can pass the bound, and only until it is trimmed.
- Bound: a client can be told "sold out" while a seat is free for at most the time this
  process takes to read the restock message (sub-millisecond on an idle host; under T0 load,
  the event loop's lag), and never longer than `ttl_s` even if a message is lost while the
  subscription still looks healthy.
- `restocks` starts at the event's creation time (lua/event_create.lua), so a rebuilt event
  never repeats a count of its earlier life and cannot renew a memory of it.

What the shortcut answers differently from the script: a claim for a specific seat is told
sold_out rather than seat_taken or unknown_seat."""

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from engine import keys
from engine.loops import repeat

log = logging.getLogger("onsale.soldout")

KEEP_S = 30.0  # expired memories and heard restocks are kept this long, then pruned


@dataclass(frozen=True, slots=True)
class _Memory:
    restocks: int
    until: float  # time.monotonic() deadline
    holds: frozenset[str]


@dataclass
class SoldOutStats:
    answered: int = 0  # claims refused from memory
    entered: int = 0  # memories made (one snapshot read each, or a reuse)
    snapshots: int = 0
    dropped: int = 0  # restock messages that dropped a memory
    subscriptions: int = 0  # (re)subscriptions: each one forgets everything remembered


class SoldOutMemory:
    def __init__(
        self,
        client: "aioredis.Redis",
        prefix: str,
        *,
        ttl_s: float = 0.25,
        snapshot_max: int = 50_000,  # a safety bound; the trimmer keeps holds under it
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.ttl_s = ttl_s
        self.snapshot_max = snapshot_max
        self.listening = False  # True only while the restock subscription is confirmed
        self.stats = SoldOutStats()
        self._events: dict[str, _Memory] = {}
        # Highest restocks count heard of per event, and when: a SOLD_OUT reply with a lower
        # count was made before that restock. Kept KEEP_S, far longer than any call can live.
        self._latest: dict[str, tuple[int, float]] = {}
        self._since = float("inf")  # when the current subscription was confirmed
        self._entering: dict[str, asyncio.Task[None]] = {}  # snapshot reads in flight
        self._pruned = 0.0
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- the request path -------------------------------------------------------------------

    def refuses(self, event_id: str, hold_id: str) -> bool:
        """True when this claim can be answered sold_out without asking Redis."""
        if not self.listening:
            return False
        m = self._events.get(event_id)
        if m is None or time.monotonic() >= m.until or hold_id.partition(":")[0] in m.holds:
            return False
        self.stats.answered += 1
        return True

    def sold_out(self, event_id: str, restocks: int, sent_at: float) -> None:
        """Redis said SOLD_OUT (with its restocks count) to a call sent at `sent_at`
        (time.monotonic()): remember it, at most one read at a time per event. Called on the
        request path; the read runs in the background. A reply to a call sent before the
        subscription was (re)confirmed is not used: a restock message may have been missed."""
        if not self.listening or sent_at < self._since or event_id in self._entering:
            return
        now = time.monotonic()
        self._prune(now)
        if restocks < self._heard(event_id):
            return  # a seat came back after this reply was made
        m = self._events.get(event_id)
        if m is not None and m.restocks == restocks:
            # No seat came back since the snapshot, so no hold was made since (and `restocks`
            # never repeats across a rebuild of the event): renew it.
            self._events[event_id] = _Memory(restocks, now + self.ttl_s, m.holds)
            self.stats.entered += 1
            return
        task = asyncio.get_running_loop().create_task(self._enter(event_id, restocks, sent_at))
        self._entering[event_id] = task
        task.add_done_callback(lambda _t: self._entering.pop(event_id, None))

    def _heard(self, event_id: str) -> int:
        latest = self._latest.get(event_id)
        return latest[0] if latest is not None else 0

    def _prune(self, now: float) -> None:
        """At most once a second: drop memories expired more than KEEP_S ago (kept that long
        only so that a renewal can reuse the snapshot) and restocks heard that long ago."""
        if now - self._pruned < 1.0:
            return
        self._pruned = now
        old = now - KEEP_S
        for event_id in [e for e, m in self._events.items() if m.until < old]:
            del self._events[event_id]
        for event_id in [e for e, (_n, at) in self._latest.items() if at < old]:
            del self._latest[event_id]

    async def _enter(self, event_id: str, restocks: int, sent_at: float) -> None:
        holds_key = keys.event_key(event_id, "holds", self.prefix)
        try:
            async with asyncio.timeout(2.0):
                if await self.client.hlen(holds_key) > self.snapshot_max:
                    return
                # The idempotency key part of each id (a claim's hold id is `<key>:<window>` when
                # the store has an idempotency window): a retry is recognised by its key.
                ids = await self.client.hkeys(holds_key)
                holds = frozenset(str(h).partition(":")[0] for h in ids)
        except (RedisConnectionError, RedisTimeoutError, TimeoutError) as exc:
            log.warning("sold-out snapshot of %s failed: %r", event_id, exc)
            return
        self.stats.snapshots += 1
        if not self.listening or sent_at < self._since or restocks < self._heard(event_id):
            return  # a seat came back, or the subscription was lost, while it was read
        self._events[event_id] = _Memory(restocks, time.monotonic() + self.ttl_s, holds)
        self.stats.entered += 1

    # -- invalidation ---------------------------------------------------------------------

    def restocked(self, event_id: str, restocks: int) -> None:
        if restocks > self._heard(event_id):
            self._latest[event_id] = (restocks, time.monotonic())
        m = self._events.get(event_id)
        if m is not None and m.restocks < restocks:
            del self._events[event_id]
            self.stats.dropped += 1

    def forget(self) -> None:
        self._events.clear()
        self._latest.clear()

    async def start(self) -> None:
        """Listen for restock messages in the background until stop()."""
        self._task = asyncio.get_running_loop().create_task(
            repeat(
                "sold-out listener",
                self._listen,
                self._stop,
                interval_s=0.5,
                expected=(RedisConnectionError, RedisTimeoutError, TimeoutError),
                log=log,
                on_error=self._lost,
            )
        )

    async def stop(self) -> None:
        self._stop.set()
        for task in list(self._entering.values()):
            task.cancel()
        if self._task is not None:
            self._task.cancel()  # it may be parked in a read for up to half a second
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _lost(self) -> None:
        self.listening = False
        self._since = float("inf")
        self.forget()

    async def _listen(self) -> bool:
        pattern = keys.restock_pattern(self.prefix)  # lua/_lib.lua restocked()
        pubsub = self.client.pubsub()
        try:
            await pubsub.psubscribe(pattern)
            while not self._stop.is_set():
                msg = await pubsub.get_message(timeout=0.5)
                if msg is None:
                    continue
                if msg["type"] == "psubscribe":
                    # First subscription, or the client's reconnection after a lost connection
                    # (it resubscribes by itself): anything remembered may have missed a message.
                    self.stats.subscriptions += 1
                    self.forget()
                    self._since = time.monotonic()
                    self.listening = True
                elif msg["type"] == "pmessage":
                    event_id = keys.event_of_channel(str(msg["channel"]))
                    self.restocked(event_id, int(msg["data"]))
            return False
        finally:
            self._lost()
            await pubsub.aclose()  # type: ignore[no-untyped-call]
