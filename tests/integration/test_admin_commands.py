"""The rest of the merchant's day from the command line (onsale/admin_commands.py) against the
whole stack with a ledger: webhook endpoints registered, listed, disabled and their delivery log
read; a login revoked; one seat of a party given back; each a thin client of the admin API
(its answers, its refusals with their codes and exit 1)."""

import os
import subprocess
import sys
from typing import Any

import pytest

from engine.model import webhooks as wh
from tests.integration.conftest import ADMIN, Stack, claim, eventually, hold_state, pay
from tests.integration.test_webhooks_http import hooks, receiver
from tests.receiver import Receiver

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]
__all__ = ["hooks", "receiver"]


def onsale(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ONSALE_ADMIN_TOKEN": ADMIN, "ONSALE_API_URL": stack.api,
           "COLUMNS": "250"}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "onsale.cli", *args], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done
    return done.stdout


def test_endpoints_logins_and_a_refund_from_the_command_line(
    hooks: Stack, receiver: Receiver
) -> None:
    made = ok(onsale(hooks, "webhooks", "create", receiver.url, "--description", "shop",
                     "--type", wh.ORDER_CONFIRMED))  # fmt: skip
    endpoint_id = next(w for w in made.replace("'", " ").split() if w.startswith("ep_"))
    assert "whsec_" in made  # the secret, shown once
    assert endpoint_id in ok(onsale(hooks, "webhooks", "list"))
    event_id = hooks.new_event(4)
    buyer = hooks.buyer(event_id, "vic")
    h = claim(hooks, buyer, party=2)
    pay(hooks, buyer, h["hold_id"])
    eventually(lambda: hold_state(hooks, buyer, h["hold_id"])["state"] == "CONFIRMED")
    log: Any = eventually(
        lambda: (
            "delivered" in (out := ok(onsale(hooks, "webhooks", "deliveries", endpoint_id))) and out
        )
    )
    assert wh.ORDER_CONFIRMED in log
    assert "False" in ok(onsale(hooks, "webhooks", "disable", endpoint_id))
    # One seat of the two given back: exactly its price, the order keeps the other.
    seat = h["seat_ids"][0]
    refunded = ok(onsale(hooks, "orders", "refund", event_id, h["hold_id"], "--seat", seat,
                         "--reason", "seat broken", "--key", "cli-1"))  # fmt: skip
    assert "'amount': 4500" in refunded and "'whole': False" in refunded
    assert hold_state(hooks, buyer, h["hold_id"])["seat_ids"] == h["seat_ids"][1:]
    again = onsale(hooks, "orders", "refund", event_id, h["hold_id"], "--seat", seat,
                   "--reason", "seat broken", "--key", "cli-1")  # fmt: skip
    assert "'replay': True" in ok(again)
    wrong = onsale(hooks, "orders", "refund", event_id, h["hold_id"], "--seat", seat,
                   "--reason", "x", "--key", "cli-2")  # fmt: skip
    assert wrong.returncode == 1 and "not_in_order" in wrong.stdout, wrong
    # A revoked login's token is refused from now on.
    assert "revoked_before_ms" in ok(onsale(hooks, "logins", "revoke", "vic"))
    answer = eventually(lambda: (a := hooks.send(buyer.hold(h["hold_id"]))).status == 401 and a)
    assert answer.body["error"]["code"] == "token_revoked"
