"""Smoke run of the README's main job with tiny numbers: it must finish, audit clean, exit 0."""

import asyncio
import os
import subprocess
import sys
import uuid

import pytest
import redis

from persistence import database
from tests.conftest import REDIS_URL
from tests.pg import PG_DSN


async def drop_database(name: str) -> None:
    await database.drop_database(PG_DSN, name)


pytestmark = [pytest.mark.redis, pytest.mark.postgres]


def test_demo_runs_clean_and_everything_settles() -> None:
    prefix = f"onsale:test:{uuid.uuid4().hex[:12]}"
    database = f"onsale_test_{uuid.uuid4().hex[:10]}"
    env = {
        **os.environ,
        "ONSALE_PG_DSN": PG_DSN,
        "ONSALE_DEMO_DATABASE": database,
        "ONSALE_REDIS_URL": REDIS_URL,
        "ONSALE_KEY_PREFIX": prefix,
        "COLUMNS": "120",
    }
    args = [
        "--clients",
        "300",
        "--seats",
        "12",
        "--hold-ttl-ms",
        "1500",
        "--quarantine-ms",
        "1000",
        "--api-workers",
        "1",
    ]
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "loadtest.demo", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "VIOLATED" not in proc.stdout
        assert "full audit (docs/invariants.md)" in proc.stdout
        assert "ledger holds every decision of the outbox" in proc.stdout
        settled = [line for line in proc.stdout.splitlines() if "everything settled" in line]
        assert settled and "ok" in settled[0], settled  # no live hold, refund or callback left
        # Parties take part at T0: the table says how many winning holds were parties and how
        # many seats they took, and the ledger's check counts a party's seats, not its hold.
        assert "winning holds that were parties / seats they took" in proc.stdout
        assert "won / asked at T0: a party of 2-4" in proc.stdout
        assert "ledger's confirmed seats = seats sold" in proc.stdout
    finally:
        asyncio.run(drop_database(database))
        client = redis.Redis.from_url(REDIS_URL)
        for key in client.scan_iter(match=f"{prefix}:*"):
            client.delete(key)
        client.close()


def test_missing_setting_is_a_clear_error() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ONSALE_REDIS_URL"}
    proc = subprocess.run(
        [sys.executable, "-m", "loadtest.demo"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "ONSALE_REDIS_URL" in proc.stderr
