"""What `python -m loadtest.bench.size_cost` reads off the Redis server: INFO commandstats before
and after each step (calls and usec per command, the steps another client's calls fell into told
apart), and memory, both as INFO used_memory and as MEMORY USAGE of the event's keys. The numbers
are differences of server-wide readings; loadtest/bench/size_cost.py says why."""

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis.asyncio as aioredis

from engine.store import Store

LAZYFREE_WAIT_S = 60.0

T = TypeVar("T")
Stats = dict[str, tuple[int, int]]  # command -> (calls, usec)


@dataclass(frozen=True, slots=True)
class Sample:
    """One measured step: `made` FCALL calls sent, `units` things done (claims, holds)."""

    made: int
    units: int
    commands: Stats  # what the server counted meanwhile, by command

    @property
    def calls(self) -> int:
        return self.commands.get("fcall", (0, 0))[0]

    @property
    def usec(self) -> int:
        return self.commands.get("fcall", (0, 0))[1]

    @property
    def clean(self) -> bool:
        """No other client's FCALL fell in this step."""
        return self.calls == self.made


@dataclass
class Phase:
    samples: list[Sample] = field(default_factory=list)
    wall_s: float = 0.0

    def measured(self) -> list[Sample]:
        """The steps nobody else mixed into, or every step when there is none."""
        rows = [s for s in self.samples if s.units > 0]
        return [s for s in rows if s.clean] or rows

    def usec_per_unit(self) -> float:
        """The median step's FCALL usec per unit."""
        return statistics.median(s.usec / s.units for s in self.measured())

    def usec_per_unit_mean(self) -> float:
        rows = self.measured()
        return sum(s.usec for s in rows) / max(1, sum(s.units for s in rows))

    def per_unit(self) -> dict[str, tuple[float, float]]:
        """(calls, usec) per unit of every command counted in the measured steps."""
        rows = self.measured()
        units = max(1, sum(s.units for s in rows))
        names = {name for s in rows for name in s.commands}
        return {
            name: (
                sum(s.commands.get(name, (0, 0))[0] for s in rows) / units,
                sum(s.commands.get(name, (0, 0))[1] for s in rows) / units,
            )
            for name in sorted(names)
        }

    @property
    def units(self) -> int:
        return sum(s.units for s in self.samples)

    @property
    def clean_steps(self) -> int:
        return sum(s.clean for s in self.samples)

    @property
    def foreign_calls(self) -> int:
        return sum(s.calls - s.made for s in self.samples)


@dataclass(frozen=True, slots=True)
class Memory:
    used: int  # INFO memory used_memory: the whole server
    keys: int  # MEMORY USAGE SAMPLES 0 summed over the event's keys

    def per(self, before: "Memory", n: int) -> tuple[float, float]:
        return (self.used - before.used) / n, (self.keys - before.keys) / n


async def command_stats(client: "aioredis.Redis") -> Stats:
    """(calls, usec) per command since the server's last stats reset."""
    raw: dict[str, Any] = await client.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"])) for name, v in raw.items()
    }


async def measured(
    client: "aioredis.Redis",
    phase: Phase,
    made: int,
    step: Awaitable[T],
    units: Callable[[T], int] | None = None,
) -> T:
    """Await `step` between two commandstats readings; nothing else of ours is in flight."""
    before = await command_stats(client)
    started = time.perf_counter()
    out = await step
    phase.wall_s += time.perf_counter() - started
    after = await command_stats(client)
    delta: Stats = {}
    for name, (calls, usec) in after.items():
        calls0, usec0 = before.get(name, (0, 0))
        if calls > calls0 and name != "info":
            delta[name] = (calls - calls0, usec - usec0)
    phase.samples.append(Sample(made, made if units is None else units(out), delta))
    return out


async def memory(store: Store, event_id: str) -> Memory:
    async with store.client.pipeline(transaction=False) as pipe:
        for key in store.keys(event_id):
            pipe.memory_usage(key, samples=0)
        sizes = await pipe.execute()
    info: dict[str, Any] = await store.client.info("memory")
    return Memory(int(info["used_memory"]), sum(int(n or 0) for n in sizes))


async def settle_lazyfree(client: "aioredis.Redis") -> None:
    """Wait until the server has freed what UNLINK handed to its background thread, so a
    memory reading is not lowered by an earlier size being freed meanwhile."""
    deadline = time.monotonic() + LAZYFREE_WAIT_S
    while time.monotonic() < deadline:
        info: dict[str, Any] = await client.info("memory")
        if int(info.get("lazyfree_pending_objects", 0)) == 0:
            return
        await asyncio.sleep(0.05)
    raise TimeoutError("Redis did not finish freeing the previous event")
