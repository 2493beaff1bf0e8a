"""The sold-out shortcut: once Redis has said an event is sold out, this process answers
"sold out" to further claims from memory, without a Redis call, until a seat comes back.

At T0 nearly every claim of a small hot event is a refusal, and a refusal that costs a full
script call costs as much as a sale. ADR 0012 records the rules; in short:

- Entered only from a SOLD_OUT reply of the claim script, tagged with the event's `restocks`
  count from that reply. It holds for `ttl_s` at most; the next real claim renews it, and one
  in use is renewed before it lapses (a probe: `refuses`).
- Dropped at once when the event goes from no free seat to one: every script that frees a seat
  publishes on the event's `<event key>:restocked` channel with SPUBLISH (lua/_lib.lua
  `restocked`), a sharded channel in the event's slot, and this process subscribes to that
  channel (SSUBSCRIBE) when it first hears the event is sold out. On one server and on a
  cluster alike the message goes only to the node serving the event (ADR 0030).
- A memory is entered only after the event's subscription is confirmed, from a read made after
  that confirmation which still shows the `restocks` count of the SOLD_OUT reply: a seat that
  came back before the read shows in the count, one after it arrives as a message. Losing the
  subscription (the connection, a slot moved to another node: `sunsubscribe`) forgets what it
  covered; a confirmation heard again (a reconnection) forgets that event.
- A retried claim must still get its hold: when the memory is entered, the ids of the event's
  holds are read once (after the SOLD_OUT reply, so every hold made before it is there) and a
  claim whose idempotency key is among them goes to Redis and gets its REPLAY. A hold made
  later needs a seat to come back, which changes `restocks` and drops the memory. Events with
  more than `snapshot_max` holds are not remembered at all (the snapshot would cost more than
  it saves); their refusals go to Redis as before. The trimmer (engine/workers/trim.py, ADR 0018)
  keeps an event's holds to its live ones, those money touched and those ended within the retention
  window, so only a flood within that window can pass the bound, and only until it is trimmed.
- Bound: a client can be told "sold out" while a seat is free for at most the time this
  process takes to read the restock message (sub-millisecond on an idle host; under T0 load,
  the event loop's lag), and never longer than `ttl_s` even if a message is lost while the
  subscription still looks healthy.
- `restocks` starts at the event's creation time (lua/event_create.lua), so a rebuilt event
  never repeats a count of its earlier life and cannot renew a memory of it.

What the shortcut answers differently from the script: a claim for a specific seat is told
sold_out rather than seat_taken or unknown_seat.

The gate in front of it: at T0 every claim of the burst reaches this process before the first
reply comes back, so without more the memory would answer none of them. `admit` lets a limited
number of claims of one event be in flight to Redis from this process: START at first, one more
per claim that won, up to `window` (ONSALE_CLAIM_WINDOW, within the pipeline's own capacity,
`max_batch` x `max_inflight`), so a sale that sells opens up within a few round trips while a
sold-out one is found out with few claims; the others wait their turn, in order. While a
SOLD_OUT reply is being turned into a memory (the subscription confirmed, the snapshot read),
no waiting claim of that event is let through; then each is answered from the memory, or, if
none was entered (a seat came back meanwhile, the read failed), goes on to Redis. A wait is
bounded by the caller's `wait_s` (StoreUnavailable after it). Nothing is answered that the
memory alone would not answer: the gate only changes when a claim asks. The API waits at the
gate before it checks the claim's token (api/claim_front/asgi_lane.py), so a claim answered
from memory costs little more than a trivial request."""

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from engine.gate.claim_gate import ENTER_PAUSE_S, Gates, Verdict
from engine.model import keys
from engine.store.cluster import is_cluster
from engine.store.loops import repeat

log = logging.getLogger("onsale.soldout")

KEEP_S = 30.0  # expired memories and heard restocks are kept this long, then pruned
SUBSCRIBED_S = 600.0  # a channel not needed this long is unsubscribed
WAIT_S = 0.05  # the listener's longest wait for a message before it subscribes new channels


@dataclass(frozen=True, slots=True)
class _Memory:
    restocks: int
    until: float  # time.monotonic() deadline
    holds: frozenset[str]
    since: float  # when the subscription it relies on was confirmed


@dataclass
class SoldOutStats:
    answered: int = 0  # claims refused from memory
    entered: int = 0  # memories made (one snapshot read each, or a reuse)
    snapshots: int = 0
    dropped: int = 0  # restock messages that dropped a memory
    subscriptions: int = 0  # channel subscriptions confirmed (a repeat forgets that event)
    unsubscribed: int = 0  # channels lost (slot moved, connection) or dropped when unused
    held: int = 0  # claims that waited at the gate
    probes: int = 0  # claims sent to Redis to renew a memory before it lapses


class SoldOutMemory:
    def __init__(
        self,
        client: "aioredis.Redis",
        prefix: str,
        *,
        ttl_s: float = 0.25,
        snapshot_max: int = 50_000,  # a safety bound; the trimmer keeps holds under it
        window: int = 1024,  # claims of one event in flight from this process (the gate)
        pause_gc: bool = False,  # the collector is off while claims wait (gate/claim_gate.py)
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.ttl_s = ttl_s
        self.snapshot_max = snapshot_max
        self.listening = False  # True while the listener's connection is up
        self.stats = SoldOutStats()
        self.gates = Gates(window, self.stats, pause_gc)  # engine/gate/claim_gate.py
        self._events: dict[str, _Memory] = {}
        # Highest restocks count heard of per event, and when: a SOLD_OUT reply with a lower
        # count was made before that restock. Kept KEEP_S, far longer than any call can live.
        self._latest: dict[str, tuple[int, float]] = {}
        # Events whose restock channel this process wants (-> when last needed), and those
        # whose subscription the server confirmed (-> when).
        self._wanted: dict[str, float] = {}
        self._confirmed: dict[str, float] = {}
        self._confirmations = asyncio.Condition()  # notified on each confirmation
        # Snapshot reads in flight, each with the loop time it started (the gate's pause).
        self._entering: dict[str, tuple[asyncio.Task[None], float]] = {}
        self._probed: dict[str, float] = {}  # event -> when its next probe may go (monotonic)
        self._pruned = 0.0
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- the request path -------------------------------------------------------------------

    def refuses(self, event_id: str, hold_id: str) -> bool:
        """True when this claim can be answered sold_out without asking Redis. Past the first
        quarter of a memory's life, one claim per eighth of it goes to Redis instead (a probe):
        its SOLD_OUT renews the memory before it lapses, so a memory in use never does (a
        lapse sent the next claims to Redis and held the others at the gate)."""
        if not self.listening:
            return False
        m, now = self._events.get(event_id), time.monotonic()
        if m is None or now >= m.until or hold_id.partition(":")[0] in m.holds:
            return False
        if now >= m.until - 0.75 * self.ttl_s and now >= self._probed.get(event_id, 0.0):
            self._probed[event_id] = now + self.ttl_s / 8
            self.stats.probes += 1
            return False
        self.stats.answered += 1
        return True

    def remembers(self, event_id: str) -> bool:
        """The event is remembered sold out now (a claim may still be a retry: `refuses`)."""
        m = self._events.get(event_id)
        return self.listening and m is not None and time.monotonic() < m.until

    async def admit(self, event_id: str, hold_id: str, wait_s: float, held: bool = False) -> bool:
        """True: answer this claim sold_out from memory. False: the claim goes to Redis and
        holds one of the event's places in flight until `release(event_id)`. `held`: it
        already holds one (taken in api/claim_front/asgi_lane.py, where it was asked this already).
        With a window of 0 there is no gate: only the memory is asked."""
        if held:
            return False
        if self.gates.window <= 0:
            return self.refuses(event_id, hold_id)
        return await self.gates.admit(
            event_id,
            lambda: self.refuses(event_id, hold_id),
            lambda: self._paused_until(event_id),
            wait_s,
        )

    def ask(self, event_id: str, hold_id: str, woken: bool) -> Verdict:
        """`admit`'s one look, for a claim its connection holds without a task
        (api/claim_front/connection.py): REFUSED, PLACED (a place in flight taken), or Wait in
        the gate (`gates.wait_then`) and ask again, `woken`, when the turn comes."""
        if self.gates.window <= 0:
            return self.refuses(event_id, hold_id)
        return self.gates.ask(
            event_id,
            lambda: self.refuses(event_id, hold_id),
            lambda: self._paused_until(event_id),
            woken,
        )

    def _paused_until(self, event_id: str) -> float:
        """While a SOLD_OUT reply is being turned into a memory, the loop time until which no
        waiting claim of the event goes on to Redis; 0.0 when not paused."""
        entering = self._entering.get(event_id)
        if entering is None:
            return 0.0
        until = entering[1] + ENTER_PAUSE_S
        return until if asyncio.get_running_loop().time() < until else 0.0

    def release(self, event_id: str, reply: list[Any] | None = None) -> None:
        """A claim let through by `admit` was answered (`reply`: the script's) or failed."""
        self.gates.release(event_id, reply, bool(self._paused_until(event_id)))

    def _entered(self, event_id: str) -> None:
        """The memory of the event was entered, or not: every waiting claim asks again."""
        self._entering.pop(event_id, None)
        self.gates.wake_all(event_id)

    def sold_out(self, event_id: str, restocks: int, sent_at: float) -> None:
        """Redis said SOLD_OUT (with its restocks count) to a call sent at `sent_at`
        (time.monotonic()): remember it, at most one read at a time per event. Called on the
        request path; the subscription and the read run in the background."""
        if not self.listening or event_id in self._entering:
            return
        now = time.monotonic()
        self._wanted[event_id] = now
        self._prune(now)
        if restocks < self._heard(event_id):
            return  # a seat came back after this reply was made
        m = self._events.get(event_id)
        if m is not None and m.restocks == restocks and sent_at >= m.since:
            # No seat came back since the snapshot, so no hold was made since (and `restocks`
            # never repeats across a rebuild of the event): renew it.
            self._events[event_id] = _Memory(restocks, now + self.ttl_s, m.holds, m.since)
            self.stats.entered += 1
            self.gates.wake_all(event_id)  # those still waiting are answered from it
            return
        loop = asyncio.get_running_loop()
        task = loop.create_task(self._enter(event_id, restocks))
        self._entering[event_id] = (task, loop.time())
        task.add_done_callback(lambda _t: self._entered(event_id))

    def _heard(self, event_id: str) -> int:
        latest = self._latest.get(event_id)
        return latest[0] if latest is not None else 0

    def _prune(self, now: float) -> None:
        """At most once a second: drop memories expired more than KEEP_S ago (kept that long
        only so that a renewal can reuse the snapshot), restocks heard and probes sent that
        long ago."""
        if now - self._pruned < 1.0:
            return
        self._pruned = now
        old = now - KEEP_S
        for event_id in [e for e, m in self._events.items() if m.until < old]:
            del self._events[event_id]
        for event_id in [e for e, (_n, at) in self._latest.items() if at < old]:
            del self._latest[event_id]
        for event_id in [e for e, at in self._probed.items() if at < old]:
            del self._probed[event_id]

    async def _enter(self, event_id: str, restocks: int) -> None:
        """Once the event's channel is confirmed: read its holds and its restocks count in
        one transaction; remember it only if no seat came back since the SOLD_OUT reply."""
        try:
            async with asyncio.timeout(2.0):
                async with self._confirmations:
                    await self._confirmations.wait_for(lambda: event_id in self._confirmed)
                since = self._confirmed[event_id]
                found = await self._snapshot(event_id)
        except (RedisConnectionError, RedisTimeoutError, TimeoutError) as exc:
            log.warning("sold-out snapshot of %s failed: %r", event_id, exc)
            return
        if found is None:
            return
        now_restocks, holds = found
        self.stats.snapshots += 1
        if self._confirmed.get(event_id) != since or now_restocks != restocks:
            return  # a seat came back, or the subscription was lost, while it was read
        if restocks < self._heard(event_id):
            return
        self._events[event_id] = _Memory(restocks, time.monotonic() + self.ttl_s, holds, since)
        self.stats.entered += 1

    async def _snapshot(self, event_id: str) -> tuple[int, frozenset[str]] | None:
        holds_key = keys.event_key(event_id, "holds", self.prefix)
        event_key = keys.event_key(event_id, "event", self.prefix)
        if await self.client.hlen(holds_key) > self.snapshot_max:
            return None
        async with self.client.pipeline(transaction=True) as pipe:  # one slot: one MULTI
            pipe.hget(event_key, "restocks")
            pipe.hkeys(holds_key)
            now_restocks, ids = await pipe.execute()
        # The idempotency key part of each id (a claim's hold id is `<key>:<window>` when the
        # store has an idempotency window): a retry is recognised by its key.
        return int(now_restocks or 0), frozenset(str(h).partition(":")[0] for h in ids)

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

    def _unconfirmed(self, event_id: str) -> None:
        """The event's subscription is gone (or was renewed): forget what it covered."""
        self._confirmed.pop(event_id, None)
        self._events.pop(event_id, None)
        self._latest.pop(event_id, None)

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
        self.gates.resume_gc()  # a pause never outlives the memory (claims cut off mid-wait)
        for task, _since in list(self._entering.values()):
            task.cancel()
        if self._task is not None:
            self._task.cancel()  # it may be parked in a read for up to WAIT_S
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _lost(self) -> None:
        self.listening = False
        self._confirmed.clear()
        self.forget()
        for task, _since in list(self._entering.values()):
            task.cancel()  # its end wakes the claims its gate held

    async def _listen(self) -> bool:
        """One connection's life: subscribe the channels wanted, hear confirmations, restock
        messages and unsubscriptions. Any error ends it (everything is forgotten) and the
        loop starts a fresh one."""
        pubsub: Any = self.client.pubsub()
        cluster = is_cluster(self.client)
        asked: set[str] = set()
        self.listening = True
        try:
            while not self._stop.is_set():
                await self._follow_wants(pubsub, asked)
                if not asked:
                    await asyncio.sleep(WAIT_S)
                    continue
                if cluster:
                    msg = await pubsub.get_sharded_message(timeout=WAIT_S / 3)
                else:
                    msg = await pubsub.get_message(timeout=WAIT_S)
                if msg is not None and self._heard_message(msg):
                    async with self._confirmations:
                        self._confirmations.notify_all()
            return False
        finally:
            self._lost()
            await pubsub.aclose()

    async def _follow_wants(self, pubsub: Any, asked: set[str]) -> None:
        """Subscribe newly wanted events' channels; unsubscribe those unused for long."""
        stale = time.monotonic() - SUBSCRIBED_S
        for event_id in [e for e, at in self._wanted.items() if at < stale]:
            del self._wanted[event_id]
        new = [e for e in self._wanted if e not in asked]
        gone = [e for e in asked if e not in self._wanted]
        if new:
            await pubsub.ssubscribe(*(self._channel(e) for e in new))
            asked.update(new)
        if gone:
            await pubsub.sunsubscribe(*(self._channel(e) for e in gone))
            asked.difference_update(gone)
            for event_id in gone:
                self._unconfirmed(event_id)

    def _channel(self, event_id: str) -> str:
        return keys.event_key(event_id, "event:restocked", self.prefix)

    def _heard_message(self, msg: dict[str, Any]) -> bool:
        """Apply one message; True when it confirmed a subscription."""
        kind = str(msg["type"])
        event_id = keys.event_of_channel(str(msg["channel"]))
        if kind == "ssubscribe":
            # The first confirmation, or one after the client reconnected and subscribed again
            # by itself: anything remembered of the event may have missed a message.
            self._unconfirmed(event_id)
            self._confirmed[event_id] = time.monotonic()
            self.stats.subscriptions += 1
            return True
        if kind == "sunsubscribe":  # ours, or the server's: the slot moved to another node
            self._unconfirmed(event_id)
            self.stats.unsubscribed += 1
        elif kind == "smessage":
            self.restocked(event_id, int(msg["data"]))
        return False
