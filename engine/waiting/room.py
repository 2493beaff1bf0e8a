"""The waiting room in front of T0 (ADR 0029): an event may send its buyers through a queue
before they claim. A login joins (a second tab or a rejoin keeps its place), looks at its place
and the honest figures behind it, is admitted in place order, and spends its admission on one
claim. Every change is one script (lua/queue_setup.lua, queue_poll.lua, queue_use.lua) on the
queue's own keys, under the event's hash tag (engine/model/keys.py queue_keys).

The rules, decided in the scripts by the server clock:
- Places: every login that joins before T0 is placed by its draw (engine/waiting/tokens.py), so
  arriving earlier before T0 gains nothing; from T0 on, by arrival, after every draw.
- Admission happens as logins poll (any poll admits whoever is next): at most `admit_per_s` a
  second (a token bucket of a quarter second's worth), and no more than keep the admissions not
  yet used within `admit_factor_pct` of the free units. `admit_per_s` defaults to what the
  engine's claim path takes comfortably on the reference machine (CAPACITY_PER_S).
- An admission lives `admission_ttl_ms`; it is spent by the claim it lets through, once, while a
  unit is free; an unused one lapses. An entry whose admission was used or lapsed may join again,
  at the end of the line.
- Sold out for good (no unit free, held or blocked): the queue says so to every waiting login,
  and no claim script runs for them.

The claim path asks `skips(event_id)` first: an event known to have no room costs nothing more.
What a process knows of an event's room is cached while it cannot change: a room, as soon as it
exists (it is never removed, and its secret never changes); no room, once the sale started, and
before T0 until shortly before it (a room may still come, but every claim is refused until T0)."""

import asyncio
import math
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from engine.model import errors, keys
from engine.model.replies import QueuePollCode, QueueSetupCode, QueueUseCode
from engine.store import Store
from engine.store.reads import timed
from engine.waiting.draw import DRAW_BITS, Arrival, commitment_of, entry_of, seed_of
from engine.waiting.errors import (
    AdmissionExpired,
    AdmissionRequired,
    AdmissionUsed,
    NotInQueue,
    NoWaitingRoom,
    QueueFull,
)
from engine.waiting.tokens import Admission, draw, issue

ENTRIES_MAX = 1_000_000  # places one room holds (lua/_queue.lua needs fewer than 2^20)
# `admit_per_s` when the operator gives none: a fifth of the claim endpoint's measured rate on
# the reference machine (about 10,000 claims/s, docs/benchmarks-journal.md section 2), leaving
# the rest to the polls and the other routes.
CAPACITY_PER_S = 2_000
FACTOR_PCT = 150  # admissions not yet used may reach 1.5 x the free units
ADMISSION_TTL_MS = 120_000  # an admission lives two minutes
ROOMS_CACHE_MAX = 10_000  # events whose room (or its absence) a process remembers
RATE_TAU_MS = 5_000  # the admission rate averages over about this long (lua/_queue.lua)
# A spent admission keeps counting against the free units this long: its claim is the next call
# and holds the unit once it lands; until then another look must not admit someone for it.
SPEND_GRACE_MS = 2_000
SEQ_SPAN = 2**20  # lua/_queue.lua: a place before T0 is draw x SEQ_SPAN + its arrival number
AFTER_T0 = 2**52  # lua/_queue.lua: every place taken from T0 on is after every draw
T0_MARGIN_MS = 500  # "no room" learnt before T0 is asked again this long before T0


class QueueState(StrEnum):
    WAITING = "waiting"
    ADMITTED = "admitted"
    USED = "used"
    LAPSED = "lapsed"
    SOLD_OUT = "sold_out"


_STATES = {
    QueuePollCode.WAITING: QueueState.WAITING,
    QueuePollCode.ADMITTED: QueueState.ADMITTED,
    QueuePollCode.USED: QueueState.USED,
    QueuePollCode.LAPSED: QueueState.LAPSED,
    QueuePollCode.SOLD_OUT: QueueState.SOLD_OUT,
}


@dataclass(frozen=True, slots=True)
class RoomSettings:
    admit_per_s: int | None = None  # None: CAPACITY_PER_S ("auto")
    admit_factor_pct: int = FACTOR_PCT
    admission_ttl_ms: int = ADMISSION_TTL_MS


@dataclass(frozen=True, slots=True)
class Place:
    """One login's state in a room, and the figures it was decided with (lua/queue_poll.lua)."""

    state: QueueState | None  # None: the login has no entry (and the event is not sold out)
    position: int  # 1: the next admitted; 0: not waiting, or before T0 (places drawn at T0)
    admitted: int  # admissions made so far
    rate_per_s: float  # admissions per second, averaged over about 5 s
    free: int
    held: int
    blocked: int
    admitted_ms: int  # 0: never admitted (or waiting again)
    hold_id: str  # the hold its admission made ("" if none)
    opens_at_ms: int
    now_ms: int
    entries: int  # places in the room
    joined_before_t0: int
    created: bool  # this call gave the login its place
    ttl_ms: int
    first_join_ms: int  # when the first login joined (0: none yet)
    draw_share: float  # the login's draw over its range: 0 is the best place before T0

    @classmethod
    def of_reply(cls, reply: list[Any], draw_share: float) -> "Place":
        code, (position, admitted, rate_milli, free, held, blocked) = reply[0], map(int, reply[1:7])
        at, hold, opens, now, entries, pre, created, ttl, first = reply[7:16]
        return cls(
            _STATES.get(code), position, admitted, int(rate_milli) / 1000, free, held, blocked,
            int(at), str(hold), int(opens), int(now), int(entries), int(pre), int(created) == 1,
            int(ttl), int(first), draw_share,
        )  # fmt: skip

    @property
    def drawn(self) -> bool:
        return self.now_ms >= self.opens_at_ms

    @property
    def expires_ms(self) -> int:
        return self.admitted_ms + self.ttl_ms if self.admitted_ms else 0


@dataclass(frozen=True, slots=True)
class PublishedDraw:
    commitment: str
    seed: str | None  # None before T0
    arrivals: list[Arrival]  # in place order
    next_offset: int | None  # None: the list is complete


@dataclass(frozen=True, slots=True)
class Room:
    secret: str  # hex; never leaves the server


class WaitingRoom:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._keys: dict[str, list[str]] = {}
        self._rooms: dict[str, Room | None] = {}  # only what cannot change (until `_until`)
        self._until: dict[str, float] = {}  # time.monotonic() a "no room" holds until
        self._lookups: dict[str, asyncio.Future[Room | None]] = {}

    def keys(self, event_id: str) -> list[str]:
        known = self._keys.get(event_id)
        if known is None:
            if len(self._keys) >= ROOMS_CACHE_MAX:
                self._keys.clear()
            known = self._keys[event_id] = keys.queue_keys(event_id, self.store.prefix)
        return known

    async def _call(self, name: str, event_id: str, args: Sequence[Any]) -> list[Any]:
        """One queue script on the queue's keys, as the store runs its own (store/runner.py)."""
        return await self.store.runner.run(name, event_id, args, on=self.keys(event_id))

    # -- the operator -----------------------------------------------------------------------

    async def configure(self, event_id: str, settings: RoomSettings) -> bool:
        """Give the event a room, or change its settings, before T0. True: the room is new."""
        per_s = settings.admit_per_s or CAPACITY_PER_S
        auto = 0 if settings.admit_per_s else 1
        args = [per_s, settings.admit_factor_pct, settings.admission_ttl_ms, auto]
        reply = await self._call("queue_setup", event_id, [*args, secrets.token_hex(32)])
        code = QueueSetupCode(reply[0])
        if code == QueueSetupCode.CONFIGURED:
            return int(reply[1]) == 1
        if code == QueueSetupCode.STARTED:
            raise errors.SaleStarted(f"event {event_id} started", opens_at_ms=int(reply[1]))
        if code == QueueSetupCode.CLOSED:
            raise errors.SaleClosed(f"event {event_id} is {reply[1]}", sale_status=str(reply[1]))
        if code == QueueSetupCode.FENCED:
            raise errors.Recovering(f"event {event_id} is being recovered; retry later")
        raise await self._missing(event_id)

    async def published_draw(self, event_id: str, offset: int, limit: int) -> PublishedDraw:
        """The room's draw as anyone may check it (ADR 0040): its commitment always; from T0 on
        (by the server clock) its seed and, in place order from `offset`, the anonymous entries
        that joined before T0 with their arrival numbers (`limit` at most)."""
        room = await self.room(event_id)
        if room is None:
            raise await self._missing(event_id)
        seed = seed_of(room.secret)
        if not await self._drawn(event_id):
            return PublishedDraw(commitment_of(seed), None, [], None)
        # By rank (O(log n) to the page, whatever the offset): the places drawn before T0 are
        # the zset's first ones; a place from T0 on ends the list.
        order = self.keys(event_id)[3]
        rows = await timed(
            self.store.client.zrange(order, offset, offset + limit, withscores=True),
            self.store.timeout_s,
        )
        drawn = [(str(login), int(score)) for login, score in rows if score < AFTER_T0]
        arrivals = [Arrival(entry_of(event_id, login), score % SEQ_SPAN)
                    for login, score in drawn[:limit]]  # fmt: skip
        after = offset + limit if len(drawn) > limit else None
        return PublishedDraw(commitment_of(seed), seed, arrivals, after)

    async def _drawn(self, event_id: str) -> bool:
        """T0 passed: the first look since marked the room drawn, or the server clock says so
        (nobody looked yet)."""
        queue = self.keys(event_id)[1]
        if await timed(self.store.client.hget(queue, "drawn"), self.store.timeout_s) == "1":
            return True
        (opens_at,) = await self.store.read.event_fields(event_id, "opens_at_ms")
        return bool(opens_at) and await self.store.read.server_time_ms() >= int(opens_at or 0)

    async def figures(self, event_id: str) -> dict[str, Any]:
        """The room's settings and counters, for operators (a read: decides nothing)."""
        queue, _entries, order, lapses = self.keys(event_id)[1:5]
        pipe = self.store.client.pipeline(transaction=True)  # one snapshot, one slot
        pipe.hgetall(queue)
        pipe.zcard(order)
        pipe.zcount(lapses, 0, "+inf")  # the admissions not yet used (not the spends)
        raw, entries, outstanding = await timed(pipe.execute(), self.store.timeout_s)
        if not raw:
            raise await self._missing(event_id)
        now = await self.store.read.server_time_ms()
        rate, rate_ms = float(raw.get("rate", 0)), int(raw.get("rate_ms", 0))
        decayed = rate * math.exp(-max(0, now - rate_ms) / RATE_TAU_MS) if rate_ms else 0.0
        count = {name: int(raw.get(name, 0)) for name in ("pre", "admitted", "used", "lapsed")}
        return {
            "admit_per_s": int(raw["per_s"]),
            "auto": raw.get("auto") == "1",
            "admit_factor_pct": int(raw["factor_pct"]),
            "admission_ttl_ms": int(raw["ttl_ms"]),
            "drawn": raw.get("drawn") == "1",
            "entries": int(entries),
            "joined_before_t0": count["pre"],
            "admitted": count["admitted"],
            "used": count["used"],
            "lapsed": count["lapsed"],
            "outstanding": int(outstanding),
            "admission_rate_per_s": round(decayed, 3),
            "server_time_ms": now,
        }

    # -- a buyer ----------------------------------------------------------------------------

    async def join(self, event_id: str, login: str) -> Place:
        """Take a place (or keep the one the login has); a sold-out event gives none."""
        return await self._poll(event_id, login, "join")

    async def look(self, event_id: str, login: str) -> Place:
        """The login's place and figures now (admitting whoever is next first)."""
        place = await self._poll(event_id, login, "look")
        if place.state is None:
            raise NotInQueue(f"{login} has no place in {event_id}'s room")
        return place

    async def _poll(self, event_id: str, login: str, mode: str) -> Place:
        room = await self.room(event_id)
        if room is None:
            raise await self._missing(event_id)
        drawn = draw(room.secret, event_id, login)
        reply = await self._call("queue_poll", event_id, [login, mode, drawn, ENTRIES_MAX])
        code = QueuePollCode(reply[0])
        if code in _STATES or code == QueuePollCode.NOT_IN_QUEUE:
            return Place.of_reply(reply, drawn / 2**DRAW_BITS)
        if code == QueuePollCode.FULL:
            raise QueueFull(f"{event_id}'s room holds {ENTRIES_MAX} places")
        if code == QueuePollCode.NOT_OPEN:
            raise errors.SaleNotOpen(f"event {event_id} is not open", opens_at_ms=int(reply[1]))
        if code == QueuePollCode.CLOSED:
            raise errors.SaleClosed(f"event {event_id} is {reply[1]}", sale_status=str(reply[1]))
        self.forget(event_id)  # NO_QUEUE, NOT_FOUND: this Redis has no such room (any more)
        raise await self._missing(event_id)

    def admission(self, event_id: str, login: str, place: Place) -> Admission | None:
        """The token of the login's live admission (the room's secret is known: `place` came
        from this room)."""
        room = self._rooms.get(event_id)
        if place.state != QueueState.ADMITTED or room is None:
            return None
        return issue(room.secret, event_id, login, place.admitted_ms, place.expires_ms)

    async def spend(self, event_id: str, login: str, hold_id: str, admitted_ms: int) -> None:
        """Spend the login's admission on the claim of `hold_id` (or let the same claim through
        again). Returns when the claim may go on; raises the refusal otherwise."""
        reply = await self._call(
            "queue_use", event_id, [login, hold_id, admitted_ms, SPEND_GRACE_MS]
        )
        code = QueueUseCode(reply[0])
        if code in (QueueUseCode.OK, QueueUseCode.REPLAY):
            return
        if code in (QueueUseCode.NOT_OPEN, QueueUseCode.NOT_FOUND, QueueUseCode.NO_QUEUE):
            # The claim script tells what it is (not open, closed, recovering, no event); a room
            # this Redis no longer has (lost with its data) no longer holds claims back.
            self.forget(event_id)
            return
        refusal: type[errors.EngineError] = {
            QueueUseCode.USED: AdmissionUsed,
            QueueUseCode.EXPIRED: AdmissionExpired,
            QueueUseCode.NOT_ADMITTED: AdmissionRequired,
            QueueUseCode.NO_FREE: errors.SoldOut,  # the admission is kept: try again later
            QueueUseCode.SOLD_OUT: errors.SoldOut,
        }[code]
        raise refusal(f"admission of {login} on {event_id}: {code}")

    # -- which events have a room -----------------------------------------------------------

    def skips(self, event_id: str) -> bool:
        """True when the event is known to have no room: its claims need no admission."""
        if self._rooms.get(event_id, _UNKNOWN) is not None:
            return False
        return time.monotonic() < self._until.get(event_id, math.inf)

    def forget(self, event_id: str) -> None:
        self._rooms.pop(event_id, None)
        self._until.pop(event_id, None)

    async def room(self, event_id: str) -> Room | None:
        """The event's room (None: none now). Concurrent lookups of one event share one read."""
        if event_id in self._rooms and (self._rooms[event_id] or not self._expired(event_id)):
            return self._rooms[event_id]
        pending = self._lookups.get(event_id)
        if pending is None:
            pending = asyncio.ensure_future(self._lookup(event_id))
            self._lookups[event_id] = pending
            pending.add_done_callback(lambda _f: self._lookups.pop(event_id, None))
        return await asyncio.shield(pending)

    async def _lookup(self, event_id: str) -> Room | None:
        event, queue = self.keys(event_id)[:2]
        pipe = self.store.client.pipeline(transaction=False)
        pipe.hmget(event, "status", "opens_at_ms")
        pipe.hget(queue, "secret")
        (status, opens_at), secret = await timed(pipe.execute(), self.store.timeout_s)
        if secret:  # a room is never removed, and its secret never changes
            return self._remember(event_id, Room(str(secret)))
        if status in ("closed", "cancelled"):  # an ended sale never opens again
            return self._remember(event_id, None)
        if status != "open":
            return None  # a draft may still get a room: not remembered
        to_t0_ms = int(opens_at or 0) - await self.store.read.server_time_ms()
        # A room can be set up only before T0, and until T0 every claim is refused anyway: "no
        # room" holds for good once the sale started, and before that until shortly before T0.
        until = math.inf if to_t0_ms <= 0 else time.monotonic() + (to_t0_ms - T0_MARGIN_MS) / 1000
        return self._remember(event_id, None, until)

    def _remember(self, event_id: str, room: Room | None, until: float = math.inf) -> Room | None:
        if len(self._rooms) >= ROOMS_CACHE_MAX:
            self._rooms.clear()
            self._until.clear()
        self._rooms[event_id] = room
        self._until[event_id] = until
        return room

    def _expired(self, event_id: str) -> bool:
        return time.monotonic() >= self._until.get(event_id, math.inf)

    async def _missing(self, event_id: str) -> errors.EngineError:
        """Why an event has no room: it is being recovered, it does not exist, or it has none."""
        if await self.store.read.recovering(event_id):
            return errors.Recovering(f"event {event_id} is being recovered; retry later")
        if not await self.store.read.event_exists(event_id):
            return errors.EventNotFound(event_id)
        return NoWaitingRoom(f"event {event_id} has no waiting room")


_UNKNOWN = Room("")  # a sentinel: never stored
