"""The steps `python -m loadtest.bench.size_cost` runs on one event size (seats, first holds,
claims, sweep, audit; loadtest/bench/size_cost.py describes them), each measured with the readings
of loadtest/bench/size_cost_readings.py, and what one size's run sums up to."""

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

import redis.asyncio as aioredis
from rich.progress import Progress, TaskID

from engine.model import keys
from engine.model.audit import AuditReport
from engine.model.event_config import EventConfig
from engine.model.holds import Claimed, SeatSpec
from engine.store import Store
from loadtest.bench.size_cost_readings import Phase, measured, memory, settle_lazyfree

HOLD_TTL_MS = 3_600_000  # no hold ends by the server clock during a run; the sweep moves time
QUARANTINE_MS = 60_000
CLAIM_BATCH = 500  # claims in flight at once
SWEEP_BATCH_MAX = 200
SWEEP_CALLS_MAX = 1_000_000  # a sweep that never finishes is a bug, not a slow run
SECTION_SEATS = 1_000
PROGRESS_STEP = 1_000  # seats between progress bar updates


@dataclass
class SizeResult:
    size: int
    seats_load_s: float
    bytes_per_seat: float  # used_memory
    key_bytes_per_seat: float  # MEMORY USAGE of the event's keys
    logins: int
    bytes_per_hold: float
    key_bytes_per_hold: float
    first_claim_usec: float
    claims: int
    claim_usec: float  # median batch
    claim_usec_mean: float
    claim_zpopmin_usec: float
    claims_per_s: float
    # What each claim step leaves behind: the released hold's JSON and its outbox record.
    key_bytes_per_claim_step: float
    sweep_expired: int
    sweep_calls: int
    sweep_usec_per_hold: float  # median sweep call
    sweep_usec_per_hold_mean: float
    sweep_wall_usec_per_hold: float
    audit_ok: bool
    audit_violations: list[str]
    # FCALL calls counted by the server that this run did not make (another client), and
    # the claim batches free of them (the medians use only those, when there are any).
    foreign_fcalls: int
    claim_batches: int
    claim_batches_clean: int
    claim_ratio: float = 1.0
    # Per claim step: calls and usec of each command the claim script runs.
    claim_commands: dict[str, dict[str, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Readings:
    """What one size's steps measured, before it is summed up into a SizeResult."""

    size: int
    logins: int
    claims: int
    load_s: float
    per_seat: tuple[float, float]  # bytes: (used_memory, keys)
    per_hold: tuple[float, float]
    per_claim_step: tuple[float, float]
    first: Phase  # the first hold of each login
    steps: Phase  # the measured claims
    sweep: Phase
    audit: AuditReport


def seat_specs(n: int, progress: Progress, task: TaskID) -> Iterator[SeatSpec]:
    """The seats, advancing the progress bar as create_event consumes them."""
    for i in range(n):
        if i % PROGRESS_STEP == 0:
            progress.update(task, completed=i)
        yield SeatSpec(f"s{i}", float(i), f"S{i // SECTION_SEATS}")
    progress.update(task, completed=n)


async def claims(
    client: "aioredis.Redis",
    n: int,
    call: Callable[[int], Awaitable[Claimed]],
    progress: Progress,
    task: TaskID,
) -> Phase:
    """Run call(0..n-1), CLAIM_BATCH at a time, each batch measured; every claim must be a
    new, successful one (a refusal raises)."""
    phase = Phase()
    for start in range(0, n, CLAIM_BATCH):
        batch = range(start, min(n, start + CLAIM_BATCH))
        done = await measured(client, phase, len(batch), asyncio.gather(*(call(i) for i in batch)))
        assert not any(c.replay for c in done), "a claim was answered as a replay"
        progress.advance(task, len(batch))
    return phase


async def sweep_all(
    store: Store, event_id: str, expected: int, progress: Progress, task: TaskID
) -> Phase:
    """Store.sweep until nothing is due, each call measured by the holds it expired."""
    phase = Phase()
    due = True
    while due:
        assert len(phase.samples) < SWEEP_CALLS_MAX, "the sweep does not finish"
        swept = await measured(
            store.client,
            phase,
            1,
            store.sweep(event_id, batch_max=SWEEP_BATCH_MAX),
            units=lambda r: r.expired,
        )
        due = swept.remaining_due > 0
        progress.update(task, completed=phase.units)
    assert phase.units == expected, f"swept {phase.units} holds, {expected} were live"
    return phase


async def measure_size(
    store: Store, sweep_store: Store, size: int, claims_n: int, progress: Progress
) -> SizeResult:
    client = store.client
    event_id = f"size-{size}"
    logins = max(1, min(claims_n, size // 2))
    label = f"{size:>9,}"

    # 1. seats
    load_s, per_seat = await load_seats(store, event_id, size, progress, label)

    # 2. one live hold per login
    task = progress.add_task(f"{label} first holds", total=logins)
    mem2 = await memory(store, event_id)
    first = await claims(
        client, logins, lambda i: store.claim(event_id, f"u{i}", f"f{i}"), progress, task
    )
    mem3 = await memory(store, event_id)

    # 3. measured claims: each login gives up its hold for the best free seat
    task = progress.add_task(f"{label} claims", total=claims_n)
    steps = await claims(
        client,
        claims_n,
        lambda i: store.claim(event_id, f"u{i % logins}", f"c{i}"),
        progress,
        task,
    )
    mem4 = await memory(store, event_id)

    # 4. sweep every live hold, the test clock past their deadlines
    sweep = await sweep_past_deadlines(store, sweep_store, event_id, logins, progress, label)

    return size_result(
        Readings(
            size=size,
            logins=logins,
            claims=claims_n,
            load_s=load_s,
            per_seat=per_seat,
            per_hold=mem3.per(mem2, logins),
            per_claim_step=mem4.per(mem3, claims_n),
            first=first,
            steps=steps,
            sweep=sweep,
            audit=await store.read.audit(event_id),
        )
    )


async def load_seats(
    store: Store, event_id: str, size: int, progress: Progress, label: str
) -> tuple[float, tuple[float, float]]:
    """Create the event with `size` seats and open its sale: (seconds the seats took to load,
    bytes per seat by used_memory and by the event's keys)."""
    task = progress.add_task(f"{label} seats", total=size)
    await settle_lazyfree(store.client)
    mem0 = await memory(store, event_id)
    started = time.perf_counter()
    added = await store.create_event(
        event_id,
        seat_specs(size, progress, task),
        EventConfig(hold_ttl_ms=HOLD_TTL_MS, quarantine_ms=QUARANTINE_MS),
    )
    load_s = time.perf_counter() - started
    mem1 = await memory(store, event_id)
    assert added == size, f"created {added} seats of {size}"
    await store.open_sale(event_id)
    return load_s, mem1.per(mem0, size)


async def sweep_past_deadlines(
    store: Store, sweep_store: Store, event_id: str, live: int, progress: Progress, label: str
) -> Phase:
    """Set the test clock past every deadline, then sweep all `live` holds (sweep_store runs
    the scripts that read the test clock)."""
    task = progress.add_task(f"{label} sweep", total=live)
    now_ms = await store.read.server_time_ms()
    await store.client.hset(
        keys.event_key(event_id, "event", store.prefix), "test_now_ms", now_ms + HOLD_TTL_MS + 1
    )
    return await sweep_all(sweep_store, event_id, live, progress, task)


def size_result(r: Readings) -> SizeResult:
    commands = r.steps.per_unit()
    zpopmin_calls, zpopmin_usec = commands.get("zpopmin", (0.0, 0.0))
    first, steps, sweep = r.first, r.steps, r.sweep
    return SizeResult(
        size=r.size,
        seats_load_s=r.load_s,
        bytes_per_seat=r.per_seat[0],
        key_bytes_per_seat=r.per_seat[1],
        logins=r.logins,
        bytes_per_hold=r.per_hold[0],
        key_bytes_per_hold=r.per_hold[1],
        first_claim_usec=first.usec_per_unit(),
        claims=r.claims,
        claim_usec=steps.usec_per_unit(),
        claim_usec_mean=steps.usec_per_unit_mean(),
        claim_zpopmin_usec=zpopmin_usec / zpopmin_calls if zpopmin_calls else 0.0,
        claims_per_s=r.claims / steps.wall_s,
        key_bytes_per_claim_step=r.per_claim_step[1],
        sweep_expired=sweep.units,
        sweep_calls=len(sweep.samples),
        sweep_usec_per_hold=sweep.usec_per_unit(),
        sweep_usec_per_hold_mean=sweep.usec_per_unit_mean(),
        sweep_wall_usec_per_hold=sweep.wall_s * 1e6 / sweep.units,
        audit_ok=r.audit.ok,
        audit_violations=[str(v) for v in r.audit.violations[:5]],
        foreign_fcalls=first.foreign_calls + steps.foreign_calls + sweep.foreign_calls,
        claim_batches=len(steps.samples),
        claim_batches_clean=steps.clean_steps,
        # Every command of the claim script runs at least once per claim; rarer ones in the
        # readings are other clients'.
        claim_commands={
            name: {"calls": calls, "usec": usec}
            for name, (calls, usec) in commands.items()
            if name != "fcall" and calls >= 0.5
        },
    )
