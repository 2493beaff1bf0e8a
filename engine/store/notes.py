"""What is kept beside an event's state, outside any transition: the raw stream of verified
callbacks (mirrored into the ledger for audits) and the pruning of the reconciliation watch
index. Plain commands, no script: neither changes a hold or a charge."""

from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis

from engine.model import keys
from engine.store.pipeline import AutoPipeline
from engine.store.reads import timed


class Notes:
    def __init__(
        self,
        client: "aioredis.Redis",
        *,
        prefix: str,
        timeout_s: float,
        pipeline: AutoPipeline | None = None,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.timeout_s = timeout_s
        self.pipeline = pipeline  # a callback's raw copy goes with its tick's calls

    async def _call(self, coro: Any) -> Any:
        return await timed(coro, self.timeout_s)

    async def keep_raw_callback(
        self, event_id: str, provider_event_id: str, raw: bytes, maxlen: int
    ) -> None:
        """Append a verified callback, byte for byte, to the event's raw stream (capped)."""
        stream = keys.event_key(event_id, "raw_callbacks", self.prefix)
        send = self.pipeline.command if self.pipeline is not None else self.client.execute_command
        await self._call(
            send("XADD", stream, "MAXLEN", "~", maxlen, "*",
                 "provider_event_id", provider_event_id, "body", raw)
        )  # fmt: skip

    async def unwatch(self, event_id: str, charge_ids: Sequence[str]) -> None:
        """Drop declines past the watch window from the watch index. An index entry, not a
        state: a DECLINED or FAILED charge is only ever re-indexed with the same score, and a
        charge moving on removes itself, so this plain ZREM cannot lose a charge to watch."""
        if charge_ids:
            key = keys.event_key(event_id, "watch", self.prefix)
            await self._call(self.client.zrem(key, *charge_ids))
