"""The short version of `onsale chaos` (docs/reliability.md), as CI runs it: the command starts
its own Redis (AOF, fsync always), PostgreSQL and stack on spare loopback ports, kills each kind
of process at least twice during a T0 burst and a purchase flow against a misbehaving provider,
settles, reconciles and checks every invariant. Its JSON figures are read, not its screen."""

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from loadtest.chaos.schedule import KINDS, build_schedule, by_kind, fingerprint

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]

SEED, FAULTS = 7, 12
RUN_TIMEOUT_S = 420


def chaos(where: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    """(exit code, the JSON figures, the screen) of `onsale chaos --short <args>`."""
    figures = where / "chaos.json"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "onsale.cli", "chaos", "--short", *args),
            *("--json", str(figures), "--log-dir", str(where / "logs")),
        ],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    screen = done.stdout + done.stderr
    assert figures.exists(), f"no figures written; the run said:\n{screen[-5000:]}"
    return done.returncode, orjson.loads(figures.read_bytes()), screen


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], str]:
    return chaos(tmp_path_factory.mktemp("chaos"), "--seed", str(SEED))


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_the_short_chaos_run_ends_with_no_violation(
    short_run: tuple[int, dict[str, Any], str],
) -> None:
    code, figures, screen = short_run
    failed = [c for c in figures["checks"] if c["violations"]]
    assert failed == [], screen[-5000:]
    assert figures["violations"] == 0
    assert code == 0, screen[-5000:]
    assert len(figures["checks"]) >= 12  # every check ran


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_the_short_run_injects_its_schedule_every_kind_twice(
    short_run: tuple[int, dict[str, Any], str],
) -> None:
    _code, figures, screen = short_run
    schedule = build_schedule(SEED, 40.0, FAULTS)
    assert figures["schedule"]["fingerprint"] == fingerprint(schedule)
    assert fingerprint(schedule) in screen  # printed before the run
    assert figures["faults_planned"] == by_kind(schedule)
    assert figures["faults_injected"] == by_kind(schedule)
    assert all(figures["faults_injected"][kind] >= 2 for kind in KINDS)
    for injected in figures["injected"]:
        assert injected["at_s"] >= 0 and injected["back_s"] >= injected["at_s"] + 0.1


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_the_short_run_held_its_load_and_measured_the_refund_bound(
    short_run: tuple[int, dict[str, Any], str],
) -> None:
    _code, figures, _screen = short_run
    load = figures["load"]
    assert load["t0_clients"] == 500 and load["t0_winners"] > 0
    assert load["flow_arrivals"] > 50 and load["confirmations_told"] > 0
    assert load["internal_errors"] == 0
    # Faults were felt: some requests found a process down and were sent again.
    retried = sum(
        n for code, n in load["answers"].items() if code[:1] in "05" or "transport" in code
    )
    assert retried > 0
    bound = figures["late_capture_to_refund"]
    assert bound["n"] > 0 and 0 <= bound["p50_ms"] <= bound["p99_ms"] <= bound["max_ms"]
    # Our part of it: from our 2xx answer to a capture's callback to the refund we asked for.
    ours = figures["answered_callback_to_refund"]
    assert 0 < ours["n"] <= bound["n"] and ours["p50_ms"] <= ours["p99_ms"] <= ours["max_ms"]
    assert figures["provider"]["callbacks"]["lost"] > 0
    assert figures["provider"]["callbacks"]["duplicates"] > 0


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_redis_lost_empty_four_times_is_rebuilt_with_nobody_at_the_keyboard(
    tmp_path: Path,
) -> None:
    """`--lose-redis`: Redis comes back empty after each fault (its AOF deleted); no operator
    loop runs, the ledger process rebuilds every lost event by itself, and the run still ends
    with no violation, every event seen lost selling again and every event whole."""
    code, out, screen = chaos(
        tmp_path,
        *("--seed", "3", "--lose-redis", "--only", "redis", "--faults", "4"),
        *("--flow-seats", "2000"),
    )
    assert out["faults_injected"] == {"redis": 4}
    events = 1 + out["config"]["flow_events"]
    # Every loss lost every event, and each was seen lost once and selling again after it.
    assert len(out["recoveries"]) == 4 * events
    assert all(r["ok"] and r["done_s"] > r["at_s"] for r in out["recoveries"])
    names = [c["name"] for c in out["checks"]]
    assert any(n.startswith("Redis lost 12 events") for n in names)
    assert not any("lost nothing" in n for n in names)
    assert out["violations"] == 0 and code == 0, screen[-5000:]
