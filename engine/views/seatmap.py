"""The seat map as a buyer's page draws it, and its live availability, kept off the hot path
(ADR 0028).

- **Layout**: each seat's section, row, position (x, y) and price level, in rank order, written
  once when the event is created (key `seatmap`, an EXTRA_KEYS entry under the event's hash
  tag; no script reads it). An event without one (created before layouts existed, or rebuilt
  from the ledger, which does not keep positions) is drawn from its seats and sections. Maps of
  more than SEATMAP_SEATS_MAX seats are not drawn (SeatMapTooLarge): the page offers sections
  and "best n" instead.
- **States**: one character per seat in layout order, F(ree) H(eld) B(locked) S(old), from the
  owners hash (lua/_lib.lua: a seat without an owner entry is free). No hold id or login leaves.
- **Version**: the event hash's counters and decision count. Every seat move changes one of
  free/held/blocked/sold, except a claim that also releases the login's previous hold, which
  writes a decision (`seq`); so two reads with the same version saw the same seats.
- **SeatBoard**: one per API process. It reads an event's version at most once per
  `refresh_s`, and its seats only when the version moved, however many pages watch: watchers
  wait on the board, never on Redis."""

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from engine.model import errors
from engine.model.event_details import DETAIL_FIELDS, EventDetails

if TYPE_CHECKING:
    from engine.store.reads import Reads

log = logging.getLogger("onsale.seatmap")

SEATMAP_SEATS_MAX = 20_000  # seats a drawn map may have (the page draws every one)
LAYOUT_KEY = "seatmap"  # engine/model/keys.py EXTRA_KEYS
COLUMNS = ("seat_id", "section", "row", "x", "y", "price_level", "number")
STATE_OF_OWNER = {"H": "H", "B": "B", "S": "S"}  # owners hash entries "H|B|S:<hold_id>"
COUNTERS = ("free", "held", "blocked", "sold")
# What a page shows besides the seats; with `seq`, `restocks` and `created_ms` they are the
# version (`created_ms` also tells a re-created event's new layout).
EVENT_FIELDS = ("status", "kind", "opens_at_ms", "created_ms", "seq", "restocks", *COUNTERS,
                "price_minor", "currency", "max_party", "hold_ttl_ms", "rebuilding",
                *DETAIL_FIELDS)  # fmt: skip


class SeatMapTooLarge(errors.EngineError):
    code = "seat_map_too_large"
    summary = "this event has too many seats to draw; use its sections and best-available claims"


class BoardFull(errors.EngineError):
    """This process watches as many pages or events as it may; the page polls instead."""

    code = "watchers_full"
    summary = "too many pages are watching seats on this server; poll the seat states instead"


@dataclass(frozen=True, slots=True)
class SeatPlace:
    seat_id: str
    section: str = ""
    row: str = ""
    x: float | None = None
    y: float | None = None
    price_level: str = ""
    number: str = ""  # the seat's number in its row, as printed on it ("" : none given)

    def row_of(self) -> list[object]:
        return [self.seat_id, self.section, self.row, self.x, self.y, self.price_level,
                self.number]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Layout:
    event_id: str
    seat_ids: tuple[str, ...]  # in rank order: the order of the states string
    body: bytes  # the JSON a page gets
    etag: str
    created_ms: str


def layout_json(places: Iterable[SeatPlace], prices: dict[str, int] | None = None) -> bytes:
    """The stored (and served) layout: columns, then one row per seat, in rank order, and the
    price of each level when the event prices its levels (ADR 0038; {} otherwise)."""
    rows = [p.row_of() for p in places]
    positioned = bool(rows) and all(r[3] is not None for r in rows)
    body = {"columns": COLUMNS, "positioned": positioned, "seats": rows}
    return orjson.dumps({**body, "price_levels": prices or {}})


# Where a seat is, as printed at the venue: its section, row and number ("" where none given).
Printed = tuple[str, str, str]


def printed_places(layout: Layout) -> dict[str, Printed]:
    """Each seat's section, row and number, from the layout a page draws."""
    rows = orjson.loads(layout.body)["seats"]
    return {str(r[0]): (str(r[1] or ""), str(r[2] or ""), str(r[6] or "")) for r in rows}


def seats_in_words(seat_ids: Iterable[str], places: dict[str, Printed]) -> str:
    """Seats in words, grouped by section and row in the order given, as the pages say them
    (api/static/seatmap.js `namesOf`): "Section A, row 3, seats 5, 6; Section B, seat 12"; a
    seat the map does not place is named by its id."""
    groups: list[tuple[str, str, list[str]]] = []
    for seat in seat_ids:
        section, row, number = places.get(seat, ("", "", ""))
        if groups and groups[-1][:2] == (section, row):
            groups[-1][2].append(number or seat)
        else:
            groups.append((section, row, [number or seat]))
    texts = []
    for section, row, seats in groups:
        parts = [f"Section {section}" if section else "", f"row {row}" if row else "",
                 f"{'seats' if len(seats) > 1 else 'seat'} {', '.join(seats)}"]  # fmt: skip
        text = ", ".join(p for p in parts if p)
        texts.append(text[:1].upper() + text[1:])
    return "; ".join(texts)


def _layout(event_id: str, body: bytes, created_ms: str) -> Layout:
    seat_ids = tuple(str(row[0]) for row in orjson.loads(body)["seats"])
    etag = hashlib.sha256(body).hexdigest()[:24]
    return Layout(event_id, seat_ids, body, etag, created_ms)


async def save_layout(
    reads: "Reads", event_id: str, places: list[SeatPlace], prices: dict[str, int] | None = None
) -> None:
    """Written once, by the admin create, after the seats: `places` in rank order."""
    assert len(places) <= SEATMAP_SEATS_MAX, "a drawn map is bounded"
    key = reads._key(event_id, LAYOUT_KEY)
    await reads._read(reads.client.set(key, layout_json(places, prices)))


async def read_layout(reads: "Reads", event_id: str) -> Layout:
    """The stored layout, or one drawn from the seats and sections (rank order, no positions).
    Raises EventNotFound, Recovering, WrongKind, SeatMapTooLarge."""
    kind, created_ms = await reads.event_fields(event_id, "kind", "created_ms")
    if created_ms is None:
        await reads.availability(event_id)  # EventNotFound or Recovering
    if kind == "stock":
        raise errors.WrongKind(f"event {event_id} sells stock", kind="stock")
    stored = await reads._read(reads.client.get(reads._key(event_id, LAYOUT_KEY)))
    if stored is not None:
        raw = stored.encode() if isinstance(stored, str) else bytes(stored)
        return _layout(event_id, raw, created_ms or "")
    seats_key = reads._key(event_id, "seats")
    if int(await reads._read(reads.client.zcard(seats_key))) > SEATMAP_SEATS_MAX:
        raise SeatMapTooLarge(f"event {event_id}: more than {SEATMAP_SEATS_MAX} seats")
    seats = await reads._read(reads.client.zrange(seats_key, 0, -1))
    sections = await reads._read(reads.client.hgetall(reads._key(event_id, "sections")))
    places = [SeatPlace(str(s), str(sections.get(s, ""))) for s in seats]
    return _layout(event_id, layout_json(places), created_ms or "")


def encode_states(seat_ids: tuple[str, ...], owners: dict[str, str]) -> str:
    """One character per seat: F, H, B or S."""
    return "".join(STATE_OF_OWNER.get(owners.get(s, "F")[:1], "F") for s in seat_ids)


def changes_between(old: str, new: str) -> list[tuple[int, str]]:
    """(index, new state) of every seat whose state differs (same layout)."""
    assert len(old) == len(new), "states of one layout"
    return [(i, b) for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b]


def version_of(fields: list[str | None]) -> str:
    return hashlib.sha256("|".join(f or "" for f in fields).encode()).hexdigest()[:20]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a page shows of an event at one version. `serial` numbers this process's
    snapshots (of every event); `changes` lead from the snapshot `base` to this one (None: send
    it whole)."""

    version: str
    serial: int
    states: str
    event: dict[str, Any]
    base: int = 0
    changes: tuple[tuple[int, str], ...] | None = None


def event_view(fields: list[str | None]) -> dict[str, Any]:
    raw = dict(zip(EVENT_FIELDS, fields, strict=True))
    view: dict[str, Any] = {name: raw[name] for name in ("status", "kind", "currency")}
    for name in ("opens_at_ms", "price_minor", "max_party", "hold_ttl_ms", *COUNTERS):
        view[name] = int(raw[name] or 0)
    view["recovering"] = raw["rebuilding"] == "1" or raw["status"] == "fenced"
    return view | EventDetails.of(raw).view()  # what people know it by (ADR 0041)


@dataclass
class BoardStats:
    version_reads: int = 0  # HMGET of the event's version (at most one per refresh_s)
    state_reads: int = 0  # owners read when the version moved
    layout_reads: int = 0
    clock_reads: int = 0


@dataclass
class _Entry:
    layout: Layout
    snapshot: Snapshot | None = None
    checked: float = float("-inf")  # time.monotonic() of the last version read
    used: float = 0.0
    watchers: int = 0
    task: asyncio.Task[None] | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class SeatBoard:
    """The per-process view of the seat maps pages watch: bounded in events and watchers."""

    def __init__(
        self,
        reads: "Reads",
        *,
        refresh_s: float = 0.25,
        events_max: int = 1_000,
        watchers_max: int = 10_000,
        idle_s: float = 60.0,
        clock_s: float = 5.0,
    ) -> None:
        self.reads, self.refresh_s, self.idle_s = reads, refresh_s, idle_s
        self.events_max, self.watchers_max, self.clock_s = events_max, watchers_max, clock_s
        self.stats = BoardStats()
        self.watchers = 0
        self._serial = 0
        self._entries: dict[str, _Entry] = {}
        self._clock: tuple[int, float] = (0, float("-inf"))  # (Redis ms, monotonic) read at
        self._clock_lock = asyncio.Lock()

    async def layout(self, event_id: str) -> Layout:
        return (await self._entry(event_id)).layout

    async def snapshot(self, event_id: str) -> Snapshot:
        """The event's seats as of at most `refresh_s` ago (one version read per refresh_s,
        shared by every caller; the seats read only when the version moved)."""
        entry = await self._entry(event_id)
        await self._refresh(event_id, entry)
        assert entry.snapshot is not None
        return entry.snapshot

    async def server_time_ms(self) -> int:
        """The Redis clock, read at most every `clock_s` and carried forward by this host's
        monotonic clock in between (for countdowns on pages, never for a decision)."""
        async with self._clock_lock:
            read_ms, at = self._clock
            if time.monotonic() - at >= self.clock_s:
                self.stats.clock_reads += 1
                read_ms, at = await self.reads.server_time_ms(), time.monotonic()
                self._clock = (read_ms, at)
        return read_ms + int((time.monotonic() - at) * 1000)

    def room(self) -> None:
        """Raises BoardFull when this process has as many watchers as it may."""
        if self.watchers >= self.watchers_max:
            raise BoardFull(f"{self.watchers} watchers")

    def join(self, event_id: str) -> bool:
        """A page starts watching (snapshot() found the event first); False when the event was
        forgotten since (the page then reconnects). Every join is paired with a leave."""
        entry = self._entries.get(event_id)
        if entry is None:
            return False
        entry.watchers += 1
        self.watchers += 1
        if entry.task is None or entry.task.done():
            entry.task = asyncio.get_running_loop().create_task(self._follow(event_id, entry))
        return True

    def leave(self, event_id: str) -> None:
        entry = self._entries.get(event_id)
        if entry is not None and entry.watchers > 0:
            entry.watchers -= 1
            self.watchers -= 1
            entry.used = time.monotonic()

    async def next_snapshot(self, event_id: str, serial: int, timeout_s: float) -> Snapshot | None:
        """The first snapshot after `serial`, or None after `timeout_s` without one."""
        entry = self._entries.get(event_id)
        if entry is None:
            return None
        if entry.snapshot is not None and entry.snapshot.serial != serial:
            return entry.snapshot
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await entry.changed.wait()
        snap = entry.snapshot
        return snap if snap is not None and snap.serial != serial else None

    async def _follow(self, event_id: str, entry: _Entry) -> None:
        """While pages watch: read the version every refresh_s, and tell them of a change."""
        while entry.watchers > 0:
            try:
                await self._refresh(event_id, entry)
            except errors.EngineError as exc:  # Redis away, event rebuilt: keep the last state
                log.warning("seat board %s: %s", event_id, exc.code)
            except Exception:  # a bug: logged, and the pages keep their last state meanwhile
                log.exception("seat board %s", event_id)
            await asyncio.sleep(self.refresh_s)

    async def _entry(self, event_id: str) -> _Entry:
        entry = self._entries.get(event_id)
        now = time.monotonic()
        if entry is None:
            self._evict(now)
            layout = await read_layout(self.reads, event_id)
            self.stats.layout_reads += 1
            entry = self._entries.setdefault(event_id, _Entry(layout))
        entry.used = now
        return entry

    def _evict(self, now: float) -> None:
        """Forget events no page watches and nobody asked about for idle_s; when still full,
        the least recently asked about; when every one is watched, refuse (BoardFull)."""
        idle = [
            e for e, x in self._entries.items() if not x.watchers and now - x.used > self.idle_s
        ]
        for event_id in idle:
            del self._entries[event_id]
        if len(self._entries) < self.events_max:
            return
        unwatched = [(x.used, e) for e, x in self._entries.items() if not x.watchers]
        if not unwatched:
            raise BoardFull(f"{len(self._entries)} events watched")
        del self._entries[min(unwatched)[1]]

    async def _refresh(self, event_id: str, entry: _Entry) -> None:
        async with entry.lock:  # one read at a time per event; the others then find it fresh
            if time.monotonic() - entry.checked < self.refresh_s:
                return
            self.stats.version_reads += 1
            fields = await self.reads.event_fields(event_id, *EVENT_FIELDS)
            if fields[EVENT_FIELDS.index("created_ms")] is None:
                await self.reads.availability(event_id)  # EventNotFound or Recovering
            entry.checked = time.monotonic()
            if entry.snapshot is not None and entry.snapshot.version == version_of(fields):
                return
            await self._read_seats(event_id, entry)

    async def _read_seats(self, event_id: str, entry: _Entry) -> None:
        """The version and the owners in one MULTI: the states belong to that version."""
        reads = self.reads
        self.stats.state_reads += 1
        async with reads.client.pipeline(transaction=True) as pipe:
            pipe.hmget(reads._key(event_id, "event"), list(EVENT_FIELDS))
            pipe.hgetall(reads._key(event_id, "owners"))
            fields, owners = await reads._read(pipe.execute())
        created_ms = fields[EVENT_FIELDS.index("created_ms")] or ""
        if created_ms != entry.layout.created_ms:  # re-created, or rebuilt: a new layout
            entry.layout = await read_layout(reads, event_id)
            self.stats.layout_reads += 1
            entry.snapshot = None
        states = encode_states(entry.layout.seat_ids, owners)
        last = entry.snapshot
        self._serial += 1
        entry.snapshot = Snapshot(
            version_of(fields),
            self._serial,
            states,
            event_view(fields),
            base=last.serial if last is not None else 0,
            changes=tuple(changes_between(last.states, states)) if last is not None else None,
        )
        entry.changed.set()  # wake every watcher, then a fresh event for the next change
        entry.changed = asyncio.Event()
