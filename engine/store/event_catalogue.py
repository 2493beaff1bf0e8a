"""The events as buyers find them (ADR 0041): a DRAFT event's details set (`describe`), and the
public list of the events on sale or to come (`public_events`), each with its details."""

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from redis.exceptions import WatchError

from engine.model import errors
from engine.model.event_details import DETAIL_FIELDS, EventDetails
from engine.store.runner import Runner

LISTED_FIELDS = ("status", "opens_at_ms", "kind", "currency", "price_minor", *DETAIL_FIELDS)
DESCRIBE_TRIES = 5  # optimistic writes lost to a concurrent open or create before giving up


async def describe(runner: Runner, event_id: str, changes: Mapping[str, Any]) -> EventDetails:
    """Set some of a DRAFT event's details (the rest kept); its details after. Refused
    (DetailsFixed) once the event left DRAFT; EventNotFound for no event. Optimistic: the event
    hash is watched, so an open between the read and the write makes it read again."""
    key = runner.key(event_id, "event")
    for _ in range(DESCRIBE_TRIES):
        async with runner.client.pipeline(transaction=True) as pipe:
            try:
                await runner.timed(pipe.watch(key))
                raw = await runner.timed(pipe.hgetall(key))
                if "status" not in raw:
                    raise errors.EventNotFound(event_id)
                if raw["status"] != "draft":
                    raise errors.DetailsFixed(f"event {event_id} is {raw['status']}")
                details = EventDetails.of(raw).changed(changes)
                given: dict[Any, Any] = {k: v for k, v in asdict(details).items() if v}
                empty = [k for k, v in asdict(details).items() if not v]
                pipe.multi()  # type: ignore[no-untyped-call]
                if given:
                    pipe.hset(key, mapping=given)
                if empty:
                    pipe.hdel(key, *empty)
                await runner.timed(pipe.execute())
                return details
            except WatchError:  # someone wrote the event meanwhile: read it again
                continue
    raise errors.StoreUnavailable(f"event {event_id} kept changing; retry")


@dataclass(frozen=True, slots=True)
class Listed:
    event_id: str
    status: str
    opens_at_ms: int
    kind: str
    currency: str
    price_minor: int
    details: EventDetails


async def public_events(runner: Runner, offset: int, limit: int) -> tuple[list[Listed], int | None]:
    """The events on sale or to come (open, by T0 or not), soonest show first (its start, else
    its T0), a page from `offset`; and the next page's offset (None: the list is complete).
    Reads every indexed event's listed fields: one pipelined round trip per hundred events."""
    ids = sorted(await runner.reads.event_ids())
    found: list[Listed] = []
    for first in range(0, len(ids), 100):
        chunk = ids[first : first + 100]
        async with runner.client.pipeline(transaction=False) as pipe:
            for event_id in chunk:
                pipe.hmget(runner.key(event_id, "event"), LISTED_FIELDS)
            rows = await runner.timed(pipe.execute())
        for event_id, values in zip(chunk, rows, strict=True):
            raw = dict(zip(LISTED_FIELDS, values, strict=True))
            if raw["status"] == "open":
                found.append(_listed(event_id, raw))
    found.sort(key=lambda e: (e.details.starts_at_ms or e.opens_at_ms, e.event_id))
    page = found[offset : offset + limit]
    return page, offset + limit if offset + limit < len(found) else None


def _listed(event_id: str, raw: dict[str, Any]) -> Listed:
    return Listed(event_id, raw["status"], int(raw["opens_at_ms"] or 0), raw["kind"] or "seats",
                  raw["currency"] or "EUR", int(raw["price_minor"] or 0),
                  EventDetails.of(raw))  # fmt: skip
