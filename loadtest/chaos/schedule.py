"""The fault schedule of `onsale chaos` (loadtest/chaos/main.py): which process is killed when, and
for how long it stays down, built from the seed alone. The same seed, duration and number of
faults give the same schedule on any machine; the run prints it before it starts.

Each kind of fault gets an equal share of the faults (the remainder drawn by the seed), and its
faults are spread over the run in slots of their own: a process is never killed again before it
was restarted, while faults of different kinds overlap freely (the API may die while Redis is
down). Nothing here touches a process: the injector is loadtest/chaos/faults.py."""

import hashlib
import random
from dataclasses import dataclass

# What can be killed: the checkout API, the worker (sweeper, refunds, reconciliation), the ledger
# writer, Redis (the single server, or a cluster primary), PostgreSQL (the ledger's server).
KINDS = ("api", "worker", "ledger", "redis", "postgres")

# How long each kind stays down (seconds, drawn uniformly), before the seeded restart.
DOWN_S: dict[str, tuple[float, float]] = {
    "api": (0.2, 3.0),
    "worker": (0.2, 4.0),
    "ledger": (0.2, 4.0),
    "redis": (0.2, 2.5),
    "postgres": (0.5, 4.0),
}

WHAT = {
    "api": "kill -9 the API",
    "worker": "kill -9 the worker",
    "ledger": "kill -9 the ledger writer",
    "redis": "kill -9 Redis",
    "postgres": "kill -9 PostgreSQL",
}
WHAT_CLUSTER_REDIS = "kill -9 a Redis primary (a replica takes over)"

START_S = 2.0  # no fault before the T0 burst has begun
END_MARGIN_S = 2.0  # every process is back before the load stops
SLOT_MARGIN_S = 1.0  # a process is up at least this long between two faults of its kind


@dataclass(frozen=True, order=True)
class Fault:
    """Kill `kind` at `at_s` seconds after T0 and restart it `down_s` later; `target` picks,
    where there is a choice, which one (the event whose Redis primary is killed)."""

    at_s: float
    kind: str
    down_s: float
    target: int

    def describe(self, cluster: bool = False) -> str:
        what = WHAT_CLUSTER_REDIS if cluster and self.kind == "redis" else WHAT[self.kind]
        return f"{what}; back after {self.down_s:.2f} s"


def build_schedule(
    seed: int, duration_s: float, faults: int, kinds: tuple[str, ...] = KINDS
) -> list[Fault]:
    """`faults` faults of `kinds` over a run of `duration_s` seconds, in time order."""
    if faults < 0 or duration_s <= START_S + END_MARGIN_S:
        raise ValueError("a schedule needs a run longer than its margins and faults >= 0")
    if not kinds or set(kinds) - set(KINDS):
        raise ValueError(f"fault kinds are among {', '.join(KINDS)}")
    rng = random.Random(seed)
    counts = dict.fromkeys(kinds, faults // len(kinds))
    for kind in rng.sample(kinds, faults % len(kinds)):
        counts[kind] += 1
    window = duration_s - START_S - END_MARGIN_S
    schedule: list[Fault] = []
    for kind in kinds:
        schedule += _faults_of(rng, kind, counts[kind], window)
    return sorted(schedule)


def _faults_of(rng: random.Random, kind: str, n: int, window: float) -> list[Fault]:
    """`n` faults of one kind, one in each of `n` equal slots of the window: the process is
    killed somewhere in its slot and restarted before the slot ends."""
    if n == 0:
        return []
    slot = window / n
    low, high = DOWN_S[kind]
    out = []
    for i in range(n):
        down = min(rng.uniform(low, high), max(0.1, slot - SLOT_MARGIN_S) / 2)
        start = START_S + i * slot + rng.uniform(0.0, max(0.0, slot - down - SLOT_MARGIN_S))
        out.append(Fault(round(start, 3), kind, round(down, 3), rng.randrange(1 << 30)))
    return out


def fingerprint(schedule: list[Fault]) -> str:
    """A short digest of the schedule: two runs with the same one print the same digest."""
    text = ";".join(f"{f.at_s:.3f},{f.kind},{f.down_s:.3f},{f.target}" for f in schedule)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def by_kind(schedule: list[Fault]) -> dict[str, int]:
    return {kind: sum(f.kind == kind for f in schedule) for kind in KINDS}
