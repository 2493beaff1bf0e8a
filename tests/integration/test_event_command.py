"""The merchant's day from the command line (onsale/event_command.py) against the whole stack:
`onsale event create ... && onsale event open ...` runs a sale without curl, `show` and `list`
read it, `close` and `cancel` end it, and a refusal says the API's code and exits 1."""

import os
import subprocess
import sys
import uuid

import pytest

from tests.integration.conftest import ADMIN, Stack, claim, eventually, hold_state, pay

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def onsale(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ONSALE_ADMIN_TOKEN": ADMIN, "ONSALE_API_URL": stack.api,
           "COLUMNS": "200"}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "onsale.cli", "event", *args], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_a_sale_created_opened_sold_closed_and_cancelled_from_the_command_line(
    stack: Stack,
) -> None:
    stack.sim_config(decline_rate=0.0, fail_rate=0.0, late_rate=0.0, loss_rate=0.0)
    event_id = f"cli-{uuid.uuid4().hex[:8]}"
    made = onsale(stack, "create", event_id, "--seats", "3", "--price-minor", "2500",
                  "--name", "Cli Night", "--starts-at", "2030-01-01T20:00+01:00",
                  "--time-zone", "Europe/Berlin")  # fmt: skip
    assert made.returncode == 0 and "'seats': 3" in made.stdout, made
    assert onsale(stack, "open", event_id).returncode == 0
    again = onsale(stack, "open", event_id)  # the API's own refusal, said and exit 1
    assert again.returncode == 1 and "already_open" in again.stdout, again
    buyer = stack.buyer(event_id, "cli-fan")
    h = claim(stack, buyer)
    pay(stack, buyer, h["hold_id"])
    eventually(lambda: hold_state(stack, buyer, h["hold_id"])["state"] == "CONFIRMED")
    shown = onsale(stack, "show", event_id)
    assert shown.returncode == 0 and "Cli Night" in shown.stdout and "1893524400000" in shown.stdout
    assert event_id in onsale(stack, "list").stdout
    assert "closed" in onsale(stack, "close", event_id).stdout
    cancelled = onsale(stack, "cancel", event_id)
    assert cancelled.returncode == 0 and f"{event_id}: cancelled" in cancelled.stdout, cancelled
    assert hold_state(stack, buyer, h["hold_id"])["state"] in ("REVOKED", "EXCEPTION")


def test_without_the_token_or_the_api_it_says_so() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ONSALE_ADMIN_TOKEN"}
    done = subprocess.run([sys.executable, "-m", "onsale.cli", "event", "list"], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and "ONSALE_ADMIN_TOKEN" in done.stdout
    env["ONSALE_ADMIN_TOKEN"] = "x" * 40
    done = subprocess.run([sys.executable, "-m", "onsale.cli", "event", "--api",
                           "http://127.0.0.1:9", "list"], env=env, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 2 and "cannot reach the API" in done.stdout
