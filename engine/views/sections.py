"""Availability per section of a seat map, cheap under burst: one ZCOUNT of the free set per
section over the section's rank range, no scan and nothing on the claim path.

A venue numbers its seats section after section, so each section's seats occupy one range of
ranks that no other section's seat falls in. The ranges are found once from the seat map
(fixed once the sale is open) and kept in the event hash (`section_ranges`); a map whose
sections interleave by rank cannot be counted this way and is refused (SectionsInterleaved)."""

from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson

from engine.model import errors

if TYPE_CHECKING:
    from engine.store.reads import Reads

INTERLEAVED = "interleaved"


class SectionsInterleaved(errors.EngineError):
    code = "sections_interleaved"
    summary = "this seat map's sections share rank ranges: no per-section availability"


@dataclass(frozen=True, slots=True)
class SectionCount:
    section: str
    seats: int
    free: int


def rank_ranges(seats: list[tuple[str, float]], sections: dict[str, str]) -> str:
    """The sections' rank ranges as json [[section, low, high, seats], ...] in rank order, or
    INTERLEAVED when two sections' ranges touch or overlap."""
    ranges: list[list[object]] = []
    for seat, rank in seats:  # in rank order
        section = sections.get(seat, "")
        if ranges and ranges[-1][0] == section:
            ranges[-1][2] = rank
            ranges[-1][3] = int(str(ranges[-1][3])) + 1
            continue
        if ranges and float(str(ranges[-1][2])) >= rank:
            return INTERLEAVED
        ranges.append([section, rank, rank, 1])
    if len({r[0] for r in ranges}) != len(ranges):
        return INTERLEAVED  # a section in two stretches
    return orjson.dumps(ranges).decode()


async def section_availability(reads: "Reads", event_id: str) -> list[SectionCount]:
    """Seats and free seats per section, in rank order. Raises EventNotFound (via
    availability), SectionsInterleaved."""
    status, known = await reads.event_fields(event_id, "status", "section_ranges")
    if status is None:
        await reads.availability(event_id)  # EventNotFound or Recovering
    if known is None:
        seats = await reads._read(reads.client.zrange(reads._key(event_id, "seats"), 0, -1,
                                                      withscores=True))  # fmt: skip
        sections = await reads._read(reads.client.hgetall(reads._key(event_id, "sections")))
        known = rank_ranges([(str(s), float(r)) for s, r in seats], sections)
        if status != "draft":  # the map is fixed from the opening on
            await reads._read(
                reads.client.hset(reads._key(event_id, "event"), "section_ranges", known)
            )
    if known == INTERLEAVED:
        raise SectionsInterleaved(f"event {event_id}: sections interleave by rank")
    ranges = orjson.loads(known)
    async with reads.client.pipeline(transaction=False) as pipe:
        for _section, low, high, _n in ranges:
            pipe.zcount(reads._key(event_id, "free"), low, high)
        free = await reads._read(pipe.execute())
    return [
        SectionCount(str(section), int(n), int(f))
        for (section, _low, _high, n), f in zip(ranges, free, strict=True)
    ]
