"""The gate of the sold-out memory (engine/soldout.py, ADR 0012): per event and process, the
claims in flight to Redis and those waiting their turn, and how many may be in flight."""

import asyncio
from collections import deque
from dataclasses import dataclass, field


@dataclass(slots=True)
class Gate:
    """One event's claims in flight to Redis from this process, and those waiting their turn.
    `limit` starts at START and grows by GROW per claim that won (up to the memory's window):
    a sold-out event is found out with few claims in flight, a selling one opens up within a
    few round trips."""

    limit: int
    inflight: int = 0
    waiting: deque[asyncio.Future[None]] = field(default_factory=deque)


START = 128  # claims of one event in flight from this process before any has won
GROW = 1  # more in flight per claim that won: the window doubles each round trip


def wake(gate: Gate, n: int) -> None:
    """Let the first `n` claims still waiting ask again (one gone away is skipped)."""
    while n > 0 and gate.waiting:
        turn = gate.waiting.popleft()
        if not turn.done():
            turn.set_result(None)
            n -= 1
