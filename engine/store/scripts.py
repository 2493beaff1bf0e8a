"""Loads lua/ as one Redis Functions library (lua/__init__.py `library`, ADR 0032): FUNCTION LOAD,
FCALL, reloaded when a server lost it (reply codes: engine/model/replies.py). Production uses the
server clock; `Scripts(test_clock=True)` loads a library with lua/_clock_test.lua (tests only)."""

from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

import lua
from engine.model.replies import REPLY_CODES


def missing_function(reply: object) -> bool:
    """A server without the library (restarted, flushed, a fresh replica promoted)."""
    return isinstance(reply, ResponseError) and "Function not found" in str(reply)


class Scripts:
    """The library of every transition, bound to one client; each called by FCALL."""

    def __init__(self, client: "aioredis.Redis", *, test_clock: bool = False) -> None:
        missing = set(lua.names()) ^ set(REPLY_CODES)
        assert not missing, f"scripts and reply-code table disagree: {sorted(missing)}"
        self.test_clock = test_clock
        self.client = client
        self.library_name, self.library = lua.library(test_clock=test_clock)
        tag = self.library_name.removeprefix("onsale_")
        self._functions = {name: f"{name}_{tag}" for name in REPLY_CODES}

    def names(self) -> list[str]:
        return list(self._functions)

    def function(self, name: str) -> str:
        """The name FCALL calls script `name` by."""
        return self._functions[name]

    async def load_all(self) -> dict[str, str]:
        """FUNCTION LOAD REPLACE of the library (every primary of a cluster): a syntax error or
        a Lua limit fails boot. Loading the same library again changes nothing."""
        loaded: Any = await self.client.function_load(self.library, replace=True)
        names = set(loaded.values()) if isinstance(loaded, dict) else {loaded}
        assert names == {self.library_name}, f"FUNCTION LOAD answered {loaded!r}"
        return dict(self._functions)

    async def loaded(self) -> bool:
        """Every server (every primary of a cluster) has the library."""
        listed: Any = await self.client.function_list(library=self.library_name)
        per_server = listed.values() if isinstance(listed, dict) else [listed]
        return all(bool(x) for x in per_server)

    async def call(self, name: str, keys: list[str], args: list[Any]) -> list[Any]:
        function = self._functions[name]
        try:
            reply = await self.client.fcall(function, len(keys), *keys, *args)
        except ResponseError as exc:
            if not missing_function(exc):
                raise
            await self.load_all()
            reply = await self.client.fcall(function, len(keys), *keys, *args)
        assert isinstance(reply, list) and reply, f"{name}: unexpected reply {reply!r}"
        return reply
