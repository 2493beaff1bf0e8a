"""The gate of the sold-out memory (engine/gate/soldout.py, ADR 0012): per event and process, the
claims in flight to Redis and those waiting their turn, and how many may be in flight."""

import asyncio
import gc
import heapq
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.model import errors

# A waiting claim in its gate's heap: (when it looks again, arrival order, its turn, its give-up
# time, its pause's end or 0.0, its event).
Due = tuple[float, int, asyncio.Future[None], Callable[[], float], float, str]


@dataclass(slots=True)
class Gate:
    """One event's claims in flight to Redis from this process, and those waiting their turn.
    `limit` starts at START and grows by GROW per claim that won, OK (up to the window):
    a sold-out event is found out with few claims in flight, a selling one opens up within a
    few round trips."""

    limit: int
    answered_at: float  # loop time of the last claim Redis answered (or of the gate's start)
    inflight: int = 0
    waiting: deque[asyncio.Future[None]] = field(default_factory=deque)
    # The waiting claims by the time each must look again (a lower bound: a give-up time only
    # moves later), and the one timer that rings at the first of them.
    due: list["Due"] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None
    timer_at: float = 0.0
    to_wake: int = 0  # claims `wake_all` still has to wake, WAKE_CHUNK per loop iteration


@dataclass(frozen=True, slots=True)
class Wait:
    """The gate's verdict on a claim that must wait its turn: in `gate`, until at least
    `paused` (a loop time; 0.0: no pause) when a memory is being made."""

    gate: Gate
    paused: float


REFUSED, PLACED = True, False
# One look at the gate: REFUSED (answer sold_out), PLACED (a place in flight is the claim's
# until `release`), or Wait. Both lanes of the claim front take it (api/claim_front/).
Verdict = bool | Wait

START = 128  # claims of one event in flight from this process before any has won
GROW = 1  # more in flight per claim that won: the window doubles each round trip
ENTER_PAUSE_S = 0.5  # the longest a memory being made holds the event's waiting claims back
PATIENCE = 5  # a claim waits at most this many store timeouts in all, however busy the gate
# Claims `wake_all` wakes per loop iteration: between two chunks the loop reads its sockets
# (a restock message, a probe's reply, new claims). At T0 a memory answers thousands of waiting
# claims at once, and woken together they held the loop for a quarter of a second: the memory
# lapsed before its probe could be read, and a restock heard meanwhile waited for all of them.
WAKE_CHUNK = 64
GC_PAUSE_S = 1.0  # the collector is paused at most this long per wave of waiting claims
_ORDER = itertools.count()  # ties in a gate's `due` heap: first come, first looked at


def wake(gate: Gate, n: int) -> None:
    """Let the first `n` claims still waiting ask again (one gone away is skipped)."""
    while n > 0 and gate.waiting:
        turn = gate.waiting.popleft()
        if not turn.done():
            turn.set_result(None)
            n -= 1


class Gates:
    """Every event's gate in this process. `window`: the most in flight per event."""

    def __init__(self, window: int, stats: Any, pause_gc: bool = False) -> None:
        """`pause_gc`: the collector is off while claims wait (`_park`)."""
        self.window = window
        self.by_event: dict[str, Gate] = {}
        self.stats = stats  # its `held` counts the claims that waited (each once)
        self.pause_gc = pause_gc
        self.parked = 0  # claims waiting, every event
        self._gc_off_at = 0.0  # loop time the collector was paused here (0.0: it was not)
        self._gc_spent = False  # this wave of waiting had its pause

    async def admit(
        self,
        event_id: str,
        refuses: Callable[[], bool],
        paused_until: Callable[[], float],
        wait_s: float,
    ) -> bool:
        """True: `refuses()` said so (before or after a wait). False: a place in flight is
        this claim's until `release`. Waits while the gate is full or paused (a memory being
        made: until `paused_until()`, a loop time). A wait ends in StoreUnavailable once Redis
        has answered none of the event's claims for `wait_s` (it is stalled or gone), or after
        PATIENCE times `wait_s` in all; a busy gate that keeps being answered is waited on."""
        loop = asyncio.get_running_loop()
        arrived, woken = loop.time(), False
        while True:
            verdict = self.ask(event_id, refuses, paused_until, woken)
            if not isinstance(verdict, Wait):
                return verdict
            gate, paused = verdict.gate, verdict.paused
            self.stats.held += int(not woken)
            self._park(loop.time())
            try:
                await _wait(gate, _give_up(gate, arrived, wait_s), paused, event_id)
            finally:
                self._unpark()
            woken = True

    def ask(
        self,
        event_id: str,
        refuses: Callable[[], bool],
        paused_until: Callable[[], float],
        woken: bool,
    ) -> Verdict:
        """One look at the gate, as `admit` takes it each time (`woken`: after a wait): REFUSED,
        PLACED (a place in flight is taken), or Wait in the gate."""
        gate = self.by_event.get(event_id)  # again after a wait: emptied and dropped?
        if refuses():
            if woken and gate is not None:
                if not gate.to_wake:  # (a `wake_all` under way wakes the next ones itself)
                    wake(gate, 1)  # answered without a place: the next one asks too
                self._drop_if_idle(event_id, gate)
            return REFUSED
        if gate is None:
            loop = asyncio.get_running_loop()
            gate = self.by_event[event_id] = Gate(min(START, self.window), loop.time())
        paused = paused_until()
        if gate.inflight < gate.limit and not paused and (woken or not gate.waiting):
            gate.inflight += 1  # a newcomer queues behind those waiting
            return PLACED
        return Wait(gate, paused)

    def wait_then(
        self,
        event_id: str,
        wait: Wait,
        arrived: float,
        wait_s: float,
        woken: bool,
        then: Callable[["asyncio.Future[None]"], None],
    ) -> "asyncio.Future[None]":
        """`admit`'s wait without a task, for a claim the connection holds
        (api/claim_front/connection.py): `then(turn)` runs when the turn ends, given (ask
        again, `woken`), failed (StoreUnavailable: waited too long, `arrived` being the claim's
        first look) or cancelled (the claim went away: cancel the returned turn). A claim that
        leaves after its turn was given passes it on (`pass_turn`)."""
        gate, paused = wait.gate, wait.paused
        self.stats.held += int(not woken)
        self._park(asyncio.get_running_loop().time())
        turn = _queue(gate, _give_up(gate, arrived, wait_s), paused, event_id)

        def ended(turn: "asyncio.Future[None]") -> None:
            self._unpark()
            then(turn)

        turn.add_done_callback(ended)
        return turn

    def pass_turn(self, event_id: str) -> None:
        """A claim given its turn went away without using it: the next one has it."""
        gate = self.by_event.get(event_id)
        if gate is not None:
            wake(gate, 1)
            self._drop_if_idle(event_id, gate)

    def _park(self, now: float) -> None:
        """A claim starts waiting. At T0 thousands wait at once, and everything each holds
        (its task, its request) is alive until it is answered: a collection then walks them
        all and frees nothing (about 18 µs of each refused claim's CPU at 10,000 clients).
        The first claim of a wave of waiting pauses the collector, the last one to leave
        resumes it, and so does any claim that waits after GC_PAUSE_S of it (the wave then
        runs with the collector on): a pause holds back at most a second's cyclic garbage."""
        self.parked += 1
        if self._gc_off_at:
            if now - self._gc_off_at >= GC_PAUSE_S:
                self.resume_gc()
                self._gc_spent = True
        elif self.pause_gc and not self._gc_spent and gc.isenabled():
            gc.disable()
            self._gc_off_at = now

    def _unpark(self) -> None:
        self.parked -= 1
        if self.parked == 0:
            self.resume_gc()
            self._gc_spent = False

    def resume_gc(self) -> None:
        """The collector back on, if this gate paused it."""
        if self._gc_off_at:
            self._gc_off_at = 0.0
            gc.enable()

    def release(self, event_id: str, reply: list[Any] | None, paused: bool) -> None:
        """A claim let through was answered (`reply`: the script's) or failed: the next may go;
        one that won (OK) lets one more in flight. An idle gate is dropped."""
        gate = self.by_event.get(event_id)
        if gate is None:
            return
        gate.inflight -= 1
        if reply is not None:
            gate.answered_at = asyncio.get_running_loop().time()
        won = reply is not None and reply[:1] == ["OK"]
        grow = min(GROW, self.window - gate.limit) if won else 0
        gate.limit += grow
        if not paused:
            wake(gate, 1 + grow)
        self._drop_if_idle(event_id, gate)

    def _drop_if_idle(self, event_id: str, gate: Gate) -> None:
        """Nothing in flight, nobody waiting: the gate goes (a claim woken and not yet run asks
        for it again and finds a new one)."""
        while gate.waiting and gate.waiting[0].done():  # claims that left before their turn
            gate.waiting.popleft()
        if gate.inflight <= 0 and not gate.waiting and self.by_event.get(event_id) is gate:
            del self.by_event[event_id]
            if gate.timer is not None:
                gate.timer.cancel()
            gate.timer, gate.due = None, []

    def wake_all(self, event_id: str) -> None:
        """Every claim waiting now asks again, WAKE_CHUNK of them per loop iteration, in
        order."""
        gate = self.by_event.get(event_id)
        if gate is not None:
            pending = gate.to_wake
            gate.to_wake = len(gate.waiting)
            if not pending:  # else the chunks already scheduled wake the new count too
                self._wake_chunk(event_id, gate)

    def _wake_chunk(self, event_id: str, gate: Gate) -> None:
        if self.by_event.get(event_id) is not gate:
            gate.to_wake = 0
            return
        n = min(WAKE_CHUNK, gate.to_wake)
        gate.to_wake -= n
        wake(gate, n)
        if gate.to_wake > 0 and gate.waiting:
            asyncio.get_running_loop().call_soon(self._wake_chunk, event_id, gate)
        else:
            gate.to_wake = 0


def _give_up(gate: Gate, arrived: float, wait_s: float) -> Callable[[], float]:
    """When a claim that arrived at `arrived` stops waiting: `wait_s` after the later of its
    arrival and the gate's last answer, and PATIENCE times `wait_s` after its arrival at most."""
    return lambda: min(arrived + PATIENCE * wait_s, max(arrived, gate.answered_at) + wait_s)


async def _wait(gate: Gate, give_up: Callable[[], float], paused: float, event_id: str) -> None:
    """Wait in the queue for a turn, until a pause's end (`paused`, 0.0 for none: then ask
    again) or `give_up()` (then StoreUnavailable), which moves on while Redis answers the
    event's claims: the claim keeps its place meanwhile. A turn given to a claim that leaves
    passes to the next."""
    turn = _queue(gate, give_up, paused, event_id)
    try:
        await turn
    except BaseException:
        if turn.done() and not turn.cancelled() and turn.exception() is None:
            wake(gate, 1)  # a turn given, then the claim stopped: the next one has it
        raise
    finally:
        turn.cancel()  # a turn not given is skipped by `wake`


def _queue(
    gate: Gate, give_up: Callable[[], float], paused: float, event_id: str
) -> "asyncio.Future[None]":
    """A place at the back of the queue: the turn, set when the claim may ask again (or failed
    with StoreUnavailable when it gives up). The gate's one timer looks at each waiting claim
    when it is due (at a T0 burst every claim waits here: `asyncio.wait` with a timeout cost
    10-15 us of each, a timer per claim about 7)."""
    loop = asyncio.get_running_loop()
    turn: asyncio.Future[None] = loop.create_future()
    gate.waiting.append(turn)
    _look(gate, (0.0, next(_ORDER), turn, give_up, paused, event_id), loop.time())
    if not turn.done():
        _arm(gate, loop, gate.due[0][0])
    return turn


def _look(gate: Gate, entry: Due, now: float) -> None:
    """A waiting claim looks at the time: it gives up, or its pause is over (it asks again), or
    it waits on in the gate's heap until the earlier of the two."""
    _at, n, turn, give_up, paused, event_id = entry
    limit = give_up()
    if now >= limit:
        turn.set_exception(errors.StoreUnavailable(f"claim on {event_id}: waited too long"))
    elif paused and now >= paused:
        turn.set_result(None)
    else:
        heapq.heappush(gate.due, (min(limit, paused or limit), n, turn, give_up, paused, event_id))


def _arm(gate: Gate, loop: asyncio.AbstractEventLoop, at: float) -> None:
    """The gate's timer rings at `at` unless it already rings sooner."""
    if gate.timer is not None and gate.timer_at <= at:
        return
    if gate.timer is not None:
        gate.timer.cancel()
    gate.timer, gate.timer_at = loop.call_at(at, _ring, gate, loop), at


def _ring(gate: Gate, loop: asyncio.AbstractEventLoop) -> None:
    """Each waiting claim now due looks at the time (a turn given or a claim gone: skipped)."""
    gate.timer, now = None, loop.time()
    while gate.due and gate.due[0][0] <= now:
        entry = heapq.heappop(gate.due)
        if not entry[2].done():
            _look(gate, entry, now)
    if gate.due:
        _arm(gate, loop, max(gate.due[0][0], now + 0.001))
