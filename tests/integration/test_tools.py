"""Smoke runs of the measurement tools with tiny numbers (the real runs are benchmarks, never
part of the test suite): they must run end to end and their own checks must pass."""

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REDIS_URL
from tests.pg import PG_DSN

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def run_tool(*args: str, env_extra: dict[str, str] | None = None) -> str:
    env = {**os.environ, "ONSALE_REDIS_URL": REDIS_URL, "COLUMNS": "120", **(env_extra or {})}
    proc = subprocess.run(
        [sys.executable, "-m", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_burst_generator_smoke() -> None:
    out = run_tool("loadtest.burst", "--clients", "200", "--seats", "10", "--workers", "1")
    assert "answer 201" in out and "VIOLATED" not in out


@pytest.mark.postgres
def test_ledger_bench_smoke() -> None:
    out = run_tool(
        "loadtest.ledger_bench",
        "--rows",
        "400",
        "--batch",
        "100",
        env_extra={"ONSALE_PG_DSN": PG_DSN},
    )
    assert "COPY to temp" in out


@pytest.mark.skipif(shutil.which("redis-benchmark") is None, reason="needs redis-benchmark")
def test_persistence_cost_smoke() -> None:
    out = run_tool("loadtest.persistence_cost", "--requests", "500", "--seats", "2000")
    assert "AOF always" in out
