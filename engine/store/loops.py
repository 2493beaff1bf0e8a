"""The one loop every background worker runs (sweeper, refunds, reconciliation, ledger).

`repeat` calls `step` until `stop` is set. A step that returns True left work behind and runs
again at once; otherwise the loop waits `interval_s`. Failures never end the loop: the expected
ones (outages, listed in `expected`) are logged as warnings, anything else as an error with its
traceback, and both are retried with capped, jittered exponential backoff (`backoff_max_s`: a
loop that must notice a server's return quickly caps it lower). Only an InvariantViolation ends
it: a bug must stop the process rather than act on impossible state.

`stop` is looked at between two steps, never inside one: a process told to stop (SIGTERM) ends
the step in hand and then returns, and a pause between steps ends at once."""

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from engine.model.errors import EventNotFound, InvariantViolation, StoreUnavailable

BACKOFF_MAX_S = 10.0


async def repeat(
    name: str,
    step: Callable[[], Awaitable[bool]],
    stop: asyncio.Event,
    *,
    interval_s: float,
    expected: tuple[type[BaseException], ...],
    log: logging.Logger,
    on_error: Callable[[], None] | None = None,
    backoff_max_s: float = BACKOFF_MAX_S,
) -> None:
    assert interval_s > 0 and backoff_max_s > 0
    failures = 0
    while not stop.is_set():
        try:
            behind = await step()
            failures = 0
            pause = 0.0 if behind else interval_s
        except InvariantViolation:
            raise
        except Exception as exc:
            failures += 1
            if on_error is not None:
                on_error()
            pause = min(backoff_max_s, interval_s * 2**failures) * random.uniform(0.5, 1.0)
            known = isinstance(exc, expected)
            log.log(
                logging.WARNING if known else logging.ERROR,
                "%s failed (%r); retrying in %.2fs",
                name,
                exc,
                pause,
                exc_info=not known,
            )
        if pause:
            try:
                async with asyncio.timeout(pause):
                    await stop.wait()
            except TimeoutError:
                pass


class PassStats(Protocol):
    passes: int
    errors: int


async def each_event(
    event_ids: Iterable[str], step: Callable[[str], Awaitable[bool]], stats: PassStats
) -> bool:
    """One pass of a per-event worker (sweeper, trimmer): `step` for every event, True if one
    still had work. An event deleted between the listing and its step is skipped."""
    behind = False
    for event_id in event_ids:
        try:
            behind |= await step(event_id)
        except EventNotFound:
            continue
    stats.passes += 1
    return behind


async def run_passes(
    name: str,
    run_once: Callable[[], Awaitable[bool]],
    stop: asyncio.Event,
    stats: PassStats,
    *,
    interval_s: float,
    log: logging.Logger,
) -> None:
    """`repeat` for a per-event worker: Redis outages are expected, counted in `stats`."""

    def failed() -> None:
        stats.errors += 1

    await repeat(
        name,
        run_once,
        stop,
        interval_s=interval_s,
        expected=(StoreUnavailable,),
        log=log,
        on_error=failed,
    )
