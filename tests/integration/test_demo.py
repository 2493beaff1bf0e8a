"""Smoke runs of the README's main job and of its retail run, with tiny numbers: each must
finish, audit clean, exit 0."""

import asyncio
import os
import re
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
            [sys.executable, "-m", "loadtest.demo.main", *args],
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


def test_retail_demo_runs_clean_and_checks_stock_money_and_ledger() -> None:
    prefix = f"onsale:test:{uuid.uuid4().hex[:12]}"
    database = f"onsale_test_{uuid.uuid4().hex[:10]}"
    env = {
        **os.environ,
        "ONSALE_PG_DSN": PG_DSN,
        "ONSALE_DEMO_DATABASE": database,
        "ONSALE_REDIS_URL": REDIS_URL,
        "ONSALE_KEY_PREFIX": prefix,
        "COLUMNS": "140",
    }
    args = ["--retail", "--shoppers", "150", "--arrival-s", "2", "--hold-ttl-ms", "1500"]
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "loadtest.demo.main", *args, "--api-workers", "1"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        out = proc.stdout
        assert proc.returncode == 0, out + proc.stderr
        assert "VIOLATED" not in out
        for row in (
            "per SKU and location: available + held + blocked + sold = on hand",
            "per SKU and location: sold = units of the confirmed orders",
            "on hand = initial counts + corrections applied, per SKU and location",
            "money kept = sum of the confirmed orders",
            "provider holds what our charges say (money invariant)",
            "ledger: stock_corrections rows = corrections applied (initial counts included)",
            "ledger: confirmed holds = confirmed holds in Redis",
            "full audit (docs/invariants.md)",
        ):
            assert row in out, row
        # The stock table names every SKU at both warehouses; the corrections were answered
        # applied, refused below zero and replayed.
        assert "RD-DI2@east" in out and "TUBE-700C@west" in out
        assert "201 applied" in out and "409 stock_below_zero" in out and "replay=true" in out
        # Timed-out charges capture a whole cart lifetime later: some came after their cart's
        # deadline, and every one of them was refunded, none confirmed a cart.
        late = re.search(r"refunded / confirmed a cart\s*[│|]\s*(\d+): (\d+) / (\d+)", out)
        assert late is not None, out
        assert int(late[1]) >= 1 and late[1] == late[2] and late[3] == "0", late[0]
    finally:
        asyncio.run(drop_database(database))
        client = redis.Redis.from_url(REDIS_URL)
        for key in client.scan_iter(match=f"{prefix}:*"):
            client.delete(key)
        client.close()


@pytest.mark.parametrize("args", [[], ["--retail"]], ids=["seats", "retail"])
def test_missing_setting_is_a_clear_error(args: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ONSALE_REDIS_URL"}
    proc = subprocess.run(
        [sys.executable, "-m", "loadtest.demo.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "ONSALE_REDIS_URL" in proc.stderr
