"""Revoked logins: login -> the instant (ms, Redis's clock) up to which its tokens are refused.
Written by the admin revoke route, read whole by every API process each poll
(api/identity.py). One small hash per deployment; an entry stays until an operator removes it
(a login's later tokens are good again anyway: only older ones are refused)."""

from typing import Any

import redis.asyncio as aioredis

from engine.model import keys
from engine.store.reads import timed


class RevokedLogins:
    def __init__(self, client: "aioredis.Redis", *, prefix: str, timeout_s: float) -> None:
        self.client = client
        self.key = keys.revoked_logins(prefix)
        self.timeout_s = timeout_s

    async def _call(self, coro: Any) -> Any:
        return await timed(coro, self.timeout_s)

    async def revoke(self, login: str) -> int:
        """Refuse every token of `login` issued up to now; returns that instant. Never moves it
        back: a revocation racing another keeps the later instant."""
        seconds, micros = await self._call(self.client.time())
        now_ms = int(seconds) * 1000 + int(micros) // 1000
        current = await self._call(self.client.hget(self.key, login))
        at_ms = max(now_ms, int(current or 0))
        await self._call(self.client.hset(self.key, login, str(at_ms)))
        return at_ms

    async def all(self) -> dict[str, int]:
        raw = await self._call(self.client.hgetall(self.key))
        return {login: int(ms) for login, ms in raw.items()}
