"""The benchmarks measure the claim a production deployment runs: the per-login rate limit and
cap stay at their defaults (each a command of the claim script) wherever every claim is a new
login's, which they never refuse. They are switched off only for a workload in which one login
claims again and again (claim_rate --logins per-connection), which they would refuse."""

import argparse
from pathlib import Path

import pytest

from api.settings import ApiSettings
from loadtest.bench import guard
from loadtest.bench.claim_rate import limits_env
from loadtest.devstack.scratch import api_env
from loadtest.devstack.stack import LocalStack

LIMITS = ("ONSALE_CLAIMS_PER_S", "ONSALE_LOGIN_CAP")


def test_a_claim_per_new_login_runs_the_production_limits(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What claim_rate's API processes are started with (LocalStack's environment)."""
    for name in LIMITS:
        monkeypatch.delenv(name, raising=False)
    extra = limits_env(argparse.Namespace(logins="per-claim"))
    env = LocalStack("redis://x", "p", tmp_path, extra_env=extra).env()
    limits = ApiSettings.from_env(env).limits
    assert limits.claims_per_s > 0 and limits.login_cap > 0
    in_process = ApiSettings.from_env(api_env("redis://x", limits=True)).limits
    assert in_process.claims_per_s > 0 and in_process.login_cap > 0


def test_one_login_claiming_again_and_again_runs_without_them() -> None:
    env = limits_env(argparse.Namespace(logins="per-connection"))
    assert {name: env[name] for name in LIMITS} == {name: "0" for name in LIMITS}


def test_the_guard_measures_the_production_limits() -> None:
    env = guard.workload_env("redis://x")
    limits = ApiSettings.from_env(env).limits
    assert limits.claims_per_s > 0 and limits.login_cap > 0


def test_tests_keep_an_api_without_limits_by_default() -> None:
    env = api_env("redis://x")
    assert {name: env[name] for name in LIMITS} == {name: "0" for name in LIMITS}
