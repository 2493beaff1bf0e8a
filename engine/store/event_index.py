"""Which events exist: the per-slot index sets (engine/model/keys.py `event_index`), found by SCAN
on every primary and read with one SMEMBERS each. The same code serves one server and a cluster:
no global key, so nothing about the list of events lives apart from the events themselves.

The index keys (one per cluster slot in use, at most 16,384) are rescanned at most once per
`rescan_s`; in between, the known ones are read again, so a new event in a slot already in use
shows at once and one in a new slot within `rescan_s`."""

import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis.asyncio as aioredis

from engine.model import keys

SCAN_COUNT = 1_000


class EventIndex:
    def __init__(
        self,
        client: "aioredis.Redis",
        *,
        prefix: str,
        read: Callable[[Any], Awaitable[Any]],  # the caller's bounded read (engine/store/reads.py)
        rescan_s: float = 1.0,
    ) -> None:
        self.client, self.prefix, self._read = client, prefix, read
        self.rescan_s = rescan_s
        self._index_keys: set[str] = set()
        self._scanned = -float("inf")

    async def ids(self) -> list[str]:
        """Every indexed event id, sorted."""
        if time.monotonic() - self._scanned >= self.rescan_s:
            self._index_keys = await self._read(self._scan())
            self._scanned = time.monotonic()
        if not self._index_keys:
            return []
        found: set[str] = set()
        async with self.client.pipeline(transaction=False) as pipe:
            for key in sorted(self._index_keys):
                pipe.smembers(key)
            for members in await self._read(pipe.execute()):
                found.update(members)
        return sorted(found)

    async def _scan(self) -> set[str]:
        pattern = keys.index_pattern(self.prefix)
        it: Any = self.client.scan_iter(match=pattern, count=SCAN_COUNT, _type="set")
        return {str(k) async for k in it}

    async def add(self, event_id: str) -> None:
        """Index the event, before it is created (a create cut short is still walked)."""
        key = keys.event_index(event_id, self.prefix)
        await self._read(self.client.sadd(key, event_id))
        self._index_keys.add(key)

    async def remove(self, event_id: str) -> None:
        key = keys.event_index(event_id, self.prefix)
        await self._read(self.client.srem(key, event_id))
