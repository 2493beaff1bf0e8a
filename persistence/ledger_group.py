"""The ledger writers' consumer group on the outboxes.

The idle writer's wait: a blocking XREADGROUP on the outboxes themselves, so a decision
made while the writer has nothing to do is read the moment it is added, not at the end of a
pause (the write-behind lag was the idle interval plus a batch).

One call covers the outboxes of every event on one server. On a Redis Cluster a command names
keys of one slot only (each event's keys share its hash tag: engine/model/keys.py), so there is one
call per slot, all at once, each holding a connection to its node. The writer goes on only once
all have ended, so with several slots each waits at most SLOTS_BLOCK_S (a decision is read
within that, for a pass of the writer that often while idle); past WAITS_MAX slots the writer
pauses instead, as before (a decision is then read within the idle interval).

What a call returns is delivered to this consumer (pending in the group) and becomes the
event's next batch; a call cut short (an outage, a stream deleted meanwhile) leaves what it
read pending, and the writer's next take of the event reads its own pending entries first.

Each writer process is its own consumer: a stopped one is removed from the group once idle for
CONSUMER_IDLE_MS with nothing pending."""

import asyncio
from typing import Any

import redis.asyncio as aioredis

from engine.model import keys
from engine.model.ledger_progress import LEDGER_GROUP
from engine.store.cluster import is_cluster

CONSUMER_IDLE_MS = 3_600_000  # a writer gone this long, with nothing pending, leaves the group
WAITS_MAX = 16  # blocking reads at once on a cluster (one per slot), within its pool per node
SLOTS_BLOCK_S = 0.02  # each one's wait when there are several
# The wait ends this long before the client's own socket timeout would cut it as an outage.
TIMEOUT_SHARE = 0.5


def block_ms(redis: "aioredis.Redis", timeout_s: float) -> int:
    """The blocking read's bound: `timeout_s`, within half the client's socket timeout."""
    pool_kwargs = (
        redis.nodes_manager.connection_kwargs  # type: ignore[attr-defined]
        if is_cluster(redis)
        else redis.connection_pool.connection_kwargs
    )
    socket_s = pool_kwargs.get("socket_timeout")
    if socket_s:
        timeout_s = min(timeout_s, socket_s * TIMEOUT_SHARE)
    return max(1, int(timeout_s * 1000))


async def read_new(
    redis: "aioredis.Redis",
    streams: dict[str, str],
    *,
    consumer: str,
    count: int,
    timeout_s: float,
) -> dict[str, list[tuple[str, Any]]]:
    """Wait up to `timeout_s` for entries never delivered before in the outboxes `streams`
    (event id -> stream key), at most `count` per stream; returns them by event id."""
    groups: dict[int, dict[Any, Any]] = {}
    cluster = is_cluster(redis)
    for event_id, stream in streams.items():
        groups.setdefault(keys.slot_of(event_id) if cluster else 0, {})[stream] = ">"
    if len(groups) > WAITS_MAX:
        await asyncio.sleep(timeout_s)
        return {}
    wait = block_ms(redis, timeout_s if len(groups) == 1 else min(timeout_s, SLOTS_BLOCK_S))
    replies: list[Any] = await asyncio.gather(
        *(
            redis.xreadgroup(LEDGER_GROUP, consumer, group, count=count, block=wait)
            for group in groups.values()
        ),
        return_exceptions=True,  # every call ended before any failure is raised
    )
    if failed := next((r for r in replies if isinstance(r, BaseException)), None):
        raise failed
    event_of = {stream: event_id for event_id, stream in streams.items()}
    found: dict[str, list[tuple[str, Any]]] = {}
    for reply in replies:
        for stream, entries in reply or []:
            if entries:
                found[event_of[stream]] = list(entries)
    return found


async def forget_idle_consumers(redis: "aioredis.Redis", stream: str, consumer: str) -> list[str]:
    """Writers that stopped stay in the group; those other than `consumer` with nothing
    pending and idle for CONSUMER_IDLE_MS go. One with entries pending is kept whatever its
    age: deleting it would drop them from the group's pending list, and the ledger would never
    get them (XAUTOCLAIM takes them over instead)."""
    gone = []
    for c in await redis.xinfo_consumers(stream, LEDGER_GROUP):
        name = str(c["name"])
        if name != consumer and not c["pending"] and c["idle"] > CONSUMER_IDLE_MS:
            await redis.xgroup_delconsumer(stream, LEDGER_GROUP, name)
            gone.append(name)
    return gone


async def read_group(
    redis: aioredis.Redis, stream: str, consumer: str, start: str, count: int
) -> list[tuple[str, Any]]:
    """XREADGROUP from `start`: "0" this consumer's own pending entries, ">" new ones."""
    reply: Any = await redis.xreadgroup(LEDGER_GROUP, consumer, {stream: start}, count=count)
    return list(reply[0][1]) if reply else []


async def reclaim(
    redis: aioredis.Redis, stream: str, consumer: str, idle_ms: int, count: int
) -> list[tuple[str, Any]]:
    """Entries a dead consumer left pending (idle `idle_ms`), taken over by `consumer`."""
    _next, entries, *_ = await redis.xautoclaim(
        stream, LEDGER_GROUP, consumer, idle_ms, "0-0", count=count
    )
    return list(entries)


async def present(
    redis: aioredis.Redis, stream: str, entries: list[tuple[str, Any]]
) -> list[tuple[str, Any]]:
    """An entry trimmed while pending comes back without fields and is only acknowledged."""
    if gone := [entry_id for entry_id, fields in entries if not fields]:
        await redis.xack(stream, LEDGER_GROUP, *gone)
    return [(entry_id, fields) for entry_id, fields in entries if fields]
