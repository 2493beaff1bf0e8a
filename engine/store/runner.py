"""How every part of the store talks to Redis: one script call by name on an event's key set
(through the auto-pipeline when there is one, ADR 0011), one bounded read, the key names, and a
refusal of an event being recovered said as such (ADR 0017). The store and each of its facets
(lifecycle, stock, restore, prices, policies, trim) take this runner, never the store itself:
the plumbing sits under them all, and nothing under it knows them."""

import asyncio
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis

from engine.model import errors, keys
from engine.store.cluster import is_cluster, is_outage
from engine.store.pipeline import AutoPipeline
from engine.store.reads import Reads, timed
from engine.store.scripts import Scripts

KEYS_CACHE_MAX = 10_000  # events whose key names are kept built


class Runner:
    def __init__(
        self,
        client: "aioredis.Redis",
        scripts: Scripts,
        reads: Reads,
        *,
        prefix: str,
        timeout_s: float,
        pipeline: AutoPipeline | None,
    ) -> None:
        self.client, self.scripts, self.reads = client, scripts, reads
        self.prefix, self.timeout_s, self.pipeline = prefix, timeout_s, pipeline
        self._keys: dict[str, list[str]] = {}
        self.cluster = is_cluster(client)  # an index per slot (engine/model/keys.py index_key)

    def keys(self, event_id: str) -> list[str]:
        """What the event's scripts get as KEYS (engine/model/keys.py script_keys), built once."""
        known = self._keys.get(event_id)
        if known is None:
            if len(self._keys) >= KEYS_CACHE_MAX:
                self._keys.clear()
            known = self._keys[event_id] = keys.script_keys(
                event_id, self.prefix, cluster=self.cluster
            )
        return known

    def key(self, event_id: str, name: str) -> str:
        return keys.event_key(event_id, name, self.prefix)

    async def run(
        self, name: str, event_id: str, args: Sequence[Any], on: list[str] | None = None
    ) -> list[Any]:
        """One script call on the event's key set (or on `on`, keys under the same hash tag:
        the waiting room's), under one timeout from queueing to reply; an outage is
        StoreUnavailable, a script's INVARIANT error InvariantViolation."""
        keys_ = on if on is not None else self.keys(event_id)
        try:
            if self.pipeline is not None:  # one timeout_s from queueing to reply, pipeline.py
                reply = await self.pipeline.call(name, keys_, args)
                assert isinstance(reply, list) and reply, f"{name}: unexpected reply {reply!r}"
                return reply
            async with asyncio.timeout(self.timeout_s):  # pool wait, command, retry: one bound
                return await self.scripts.call(name, keys_, list(args))
        except errors.EngineError:
            raise
        except Exception as exc:
            if str(exc).startswith("INVARIANT"):
                raise errors.InvariantViolation(f"{name}: {exc}") from exc
            if is_outage(exc):  # engine/store/cluster.py: a failover's errors included
                raise errors.StoreUnavailable(f"{name}: {exc!r}") from exc
            raise

    async def timed(self, coro: Any) -> Any:
        """One read or plain command under the store's timeout."""
        return await timed(coro, self.timeout_s)

    async def refuse_truthfully(self, event_id: str, code: str) -> None:
        """A refusal of an event that is being recovered says so (503, retry), instead of
        "not open" or "not found" (ADR 0017)."""
        if code in ("NOT_OPEN", "NOT_FOUND") and await self.reads.recovering(event_id):
            raise errors.Recovering(f"event {event_id} is being recovered; retry later")
