"""A waiting room put back from the ledger (ADR 0029): the room's last settings and its line's
changes, replayed in decision order, make the room's keys as the lost Redis held them; a
rebuild (persistence/rebuild.py) writes them with lua/queue_restore.lua while the event is a
DRAFT.

What comes back exactly: the settings and the secret (so a place drawn stays drawn, a
published commitment still holds and an admission's token still verifies), every login's
place, when it joined, its admission and the hold its admission was spent on, the cursor of
admissions and the counters of places and spends. What starts afresh: the token bucket (full)
and the admission rate (0); `lapsed` counts the lapses the ledger can see (an admission never
spent that its login replaced by joining again); an unspent admission counts against the free
units until its deadline, as it did."""

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field

from engine.model.records import Marker, OutboxRecord, RecordKind
from engine.model.replies import QueueRestoreCode
from engine.store.runner import Runner
from engine.waiting.room import AFTER_T0, SEQ_SPAN

PLACES_PER_CALL = 500  # entries one restore call writes (a bounded script step)


@dataclass(frozen=True, slots=True)
class RoomSetup:
    """The room's settings as last set (the ledger's `waiting_rooms` row)."""

    admit_per_s: int
    admit_factor_pct: int
    admission_ttl_ms: int
    auto: bool
    secret: str

    @classmethod
    def of_record(cls, r: OutboxRecord) -> "RoomSetup":
        """The settings a ROOM_SET record carries ('per_s|pct|ttl|auto|secret')."""
        assert r.kind == RecordKind.QUEUE and r.to_state == Marker.ROOM_SET, r
        per_s, pct, ttl, auto, secret = r.room.split("|")
        return cls(int(per_s), int(pct), int(ttl), auto == "1", secret)


@dataclass(frozen=True, slots=True)
class Move:
    """One change of a room's line (the ledger's `waiting_moves` row), in decision order."""

    move: Marker  # PLACE_TAKEN, ADMITTED or ADMISSION_SPENT
    login: str
    place: int | None  # the place taken; an admission's last place
    place_from: int | None  # an admission's places start after this one
    admissions: int
    hold_id: str
    at_ms: int

    @classmethod
    def of_record(cls, r: OutboxRecord) -> "Move":
        """The move an outbox record of kind queue (not ROOM_SET) tells."""
        assert r.kind == RecordKind.QUEUE and r.to_state != Marker.ROOM_SET, r
        return cls(
            Marker(r.to_state), r.login, int(r.place) if r.place else None,
            int(r.place_from) if r.place_from else None, r.admissions, r.hold_id, r.decided_ms,
        )  # fmt: skip


@dataclass(slots=True)
class Entry:
    place: int
    admitted_ms: int
    hold_id: str
    joined_ms: int


@dataclass
class Line:
    """What the moves make of a room's line (lua/_queue.lua's entries and counters)."""

    entries: dict[str, Entry] = field(default_factory=dict)
    # Every place taken, sorted before an admission reads it (joins before T0 come in draw
    # order, not place order: one sort, not an insertion each).
    by_place: list[tuple[int, str]] = field(default_factory=list)
    unsorted: bool = False
    # The arrival number of the latest place: the next join's comes after it, so no new place
    # falls at or before a restored cursor (a count of the recorded joins could, when joins
    # are missing from the ledger).
    seq: int = 0
    pre: int = 0
    first_ms: int = 0
    cursor: int = -1
    admitted: int = 0
    used: int = 0
    lapsed: int = 0
    skipped: int = 0  # moves of a login whose join the ledger does not have (said by the rebuild)

    def take(self, m: Move) -> None:
        assert m.place is not None, m
        old = self.entries.get(m.login)
        if old is not None and old.admitted_ms and not old.hold_id:
            self.lapsed += 1  # joined again: its admission lapsed unspent
        self.entries[m.login] = Entry(m.place, 0, "", m.at_ms)
        self.unsorted |= bool(self.by_place) and m.place < self.by_place[-1][0]
        self.by_place.append((m.place, m.login))
        arrival = m.place - AFTER_T0 if m.place >= AFTER_T0 else m.place % SEQ_SPAN
        self.seq = max(self.seq, arrival)
        if m.place < AFTER_T0:
            self.pre += 1
            self.first_ms = self.first_ms or m.at_ms

    def admit(self, m: Move) -> None:
        assert m.place is not None and m.place_from is not None, m
        if self.unsorted:
            self.by_place.sort()
            self.unsorted = False
        start = bisect.bisect_right(self.by_place, (m.place_from, "\U0010ffff"))
        for place, login in self.by_place[start:]:
            if place > m.place:
                break
            entry = self.entries[login]
            if entry.place == place:  # not a place its login left by joining again
                entry.admitted_ms = m.at_ms
        self.cursor, self.admitted = m.place, self.admitted + m.admissions

    def spend(self, m: Move) -> None:
        entry = self.entries.get(m.login)
        if entry is None:  # joined before the ledger recorded rooms, or its join was refused
            self.skipped += 1
            return
        entry.hold_id = m.hold_id
        self.used += 1

    @property
    def drawn(self) -> bool:
        """T0 passed for the room: a place was taken or an admission made after it."""
        return self.cursor >= 0 or any(p >= AFTER_T0 for p, _ in self.by_place)


def replay(moves: Iterable[Move]) -> Line:
    line = Line()
    step = {
        Marker.PLACE_TAKEN: line.take,
        Marker.ADMITTED: line.admit,
        Marker.ADMISSION_SPENT: line.spend,
    }
    for m in moves:
        step[m.move](m)
    return line


async def restore_room(
    runner: Runner, queue_keys: list[str], event_id: str, setup: RoomSetup, line: Line
) -> QueueRestoreCode:
    """Write the room (replacing whatever room the keys held), then its entries in steps."""

    async def call(args: list[object]) -> QueueRestoreCode:
        reply = await runner.run("queue_restore", event_id, args, on=queue_keys)
        return QueueRestoreCode(reply[0])

    code = await call(
        [
            "ROOM", setup.admit_per_s, setup.admit_factor_pct, setup.admission_ttl_ms,
            int(setup.auto), setup.secret, line.seq, line.pre, line.first_ms, line.cursor,
            line.admitted, line.used, line.lapsed, int(line.drawn),
        ]
    )  # fmt: skip
    items = list(line.entries.items())
    for start in range(0, len(items), PLACES_PER_CALL):
        if code != QueueRestoreCode.RESTORED:
            break
        args: list[object] = ["PLACES"]
        for login, e in items[start : start + PLACES_PER_CALL]:
            args += [login, e.place, e.admitted_ms, e.hold_id, e.joined_ms]
        code = await call(args)
    return code
