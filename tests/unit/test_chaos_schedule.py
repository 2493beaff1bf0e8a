"""The fault schedule of `onsale chaos` is a function of the seed alone: the same seed gives the
same faults at the same instants, another seed another schedule; every kind of fault is in it,
in equal shares, and a process is never killed again before its restart."""

import itertools
import subprocess
import sys

import pytest

from loadtest.chaos.schedule import (
    END_MARGIN_S,
    KINDS,
    SLOT_MARGIN_S,
    START_S,
    build_schedule,
    by_kind,
    fingerprint,
)


def test_the_same_seed_gives_the_same_schedule() -> None:
    assert build_schedule(7, 40, 12) == build_schedule(7, 40, 12)
    assert fingerprint(build_schedule(7, 300, 110)) == fingerprint(build_schedule(7, 300, 110))


def test_another_seed_gives_another_schedule() -> None:
    schedules = {fingerprint(build_schedule(seed, 300, 110)) for seed in range(20)}
    assert len(schedules) == 20
    assert build_schedule(7, 40, 12) != build_schedule(8, 40, 12)


def test_the_schedule_is_the_same_in_another_process() -> None:
    """Nothing but the seed goes in (no hash randomisation, no clock)."""
    code = (
        "from loadtest.chaos.schedule import build_schedule, fingerprint;"
        "print(fingerprint(build_schedule(7, 300, 110)))"
    )
    env = {"PYTHONHASHSEED": "random"}
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert other.stdout.strip() == fingerprint(build_schedule(7, 300, 110))


@pytest.mark.parametrize(("duration", "faults"), [(40, 12), (300, 110), (60, 5), (30, 3)])
def test_every_kind_gets_its_share_within_the_run(duration: float, faults: int) -> None:
    schedule = build_schedule(3, duration, faults)
    assert len(schedule) == faults
    counts = by_kind(schedule)
    assert max(counts.values()) - min(counts.values()) <= 1
    if faults >= len(KINDS):
        assert min(counts.values()) >= 1
    assert schedule == sorted(schedule)
    for f in schedule:
        assert f.at_s >= START_S and f.at_s + f.down_s <= duration - END_MARGIN_S
        assert f.down_s > 0


@pytest.mark.parametrize("seed", range(10))
def test_a_process_is_up_again_before_its_next_fault(seed: int) -> None:
    schedule = build_schedule(seed, 300, 110)
    for kind in KINDS:
        mine = [f for f in schedule if f.kind == kind]
        for before, after in itertools.pairwise(mine):
            assert before.at_s + before.down_s + SLOT_MARGIN_S <= after.at_s + 1e-9


def test_a_run_too_short_for_its_margins_is_refused() -> None:
    with pytest.raises(ValueError):
        build_schedule(1, START_S + END_MARGIN_S, 5)


def test_a_schedule_of_some_kinds_has_only_those() -> None:
    schedule = build_schedule(5, 200, 20, kinds=("redis",))
    assert [f.kind for f in schedule] == ["redis"] * 20
    for before, after in itertools.pairwise(schedule):
        assert before.at_s + before.down_s + SLOT_MARGIN_S <= after.at_s + 1e-9
    with pytest.raises(ValueError):
        build_schedule(5, 200, 20, kinds=("disk",))
