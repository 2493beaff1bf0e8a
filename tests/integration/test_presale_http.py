"""Presale access codes over HTTP and from the command line, the stack as processes (ADR 0049):
an operator adds a presale's codes in bulk (`onsale presale add`, batches with progress, the
same run sent again adding nothing), reads them with their uses and the public windows; a buyer
before T0 is told a code is needed, claims with one, and the code's last use refuses the next
buyer; bad input is a stable 400."""

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from loadtest.devstack.buyer import Answer, Call, bearer
from tests.integration.conftest import ADMIN, Stack
from tests.integration.test_waiting_room_http import server_ms

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def onsale(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ONSALE_ADMIN_TOKEN": ADMIN, "ONSALE_API_URL": stack.api,
           "COLUMNS": "200"}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "onsale.cli", "presale", *args], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def claim(stack: Stack, event_id: str, login: str, body: dict[str, Any]) -> Answer:
    headers = {**bearer(stack.token(login)), "Idempotency-Key": f"k-{login}"}
    path = f"/v1/events/{event_id}/holds"
    return stack.send(Call("claim", "POST", path, body, headers))


def test_a_presale_from_the_command_line_sells_only_to_codes_before_t0(
    stack: Stack, tmp_path: Path
) -> None:
    event_id = f"ps-{uuid.uuid4().hex[:8]}"
    stack.local.create_event(event_id, 10, opens_at_ms=None, price_minor=4500)
    now = server_ms()
    t0 = now + 3_600_000
    with stack.client() as c:
        opened = c.post(f"/v1/admin/events/{event_id}/open", json={"opens_at_ms": t0},
                        headers=stack.admin_headers())  # fmt: skip
    assert opened.status_code == 200, opened.text
    window = ["--opens-at", str(now - 60_000), "--closes-at", str(t0)]
    out = tmp_path / "codes.txt"
    made = onsale(stack, "add", event_id, "fans", *window, "--count", "1500", "--uses", "1",
                  "--run", "r1", "--out", str(out))  # fmt: skip
    assert made.returncode == 0, made
    codes = out.read_text().split()
    assert len(codes) == len(set(codes)) == 1500 and "1500 codes added" in made.stderr
    again = onsale(stack, "add", event_id, "fans", *window, "--count", "1500", "--run", "r1",
                   "--out", str(out))  # fmt: skip
    assert again.returncode == 0 and "0 codes added, 1500 there already" in again.stderr, again
    assert out.read_text().split() == codes  # the same run makes the same codes
    moved = onsale(stack, "add", event_id, "fans", "--opens-at", str(now), "--closes-at", str(t0),
                   "--count", "1")  # fmt: skip
    assert moved.returncode == 1 and "presale_mismatch" in moved.stdout, moved
    shown = onsale(stack, "show", event_id)
    assert shown.returncode == 0 and "fans" in shown.stdout and str(t0) in shown.stdout

    required = claim(stack, event_id, "ann", {})
    assert (required.status, required.code) == (403, "access_code_required"), required
    assert required.body["error"]["closes_at_ms"] == t0
    bad = claim(stack, event_id, "ann", {"access_code": "no:colons"})
    assert (bad.status, bad.code) == (400, "invalid_request"), bad
    unknown = claim(stack, event_id, "ann", {"access_code": "NOSUCHCODE"})
    assert (unknown.status, unknown.code) == (403, "access_code_invalid"), unknown
    won = claim(stack, event_id, "ann", {"access_code": codes[0]})
    assert won.status == 201, won
    used_up = claim(stack, event_id, "bob", {"access_code": codes[0]})
    assert (used_up.status, used_up.code) == (409, "access_code_used_up"), used_up
    assert used_up.body["error"]["uses"] == 1
    listed = onsale(stack, "codes", event_id)
    assert listed.returncode == 0 and codes[0] in listed.stdout, listed
    with stack.client() as c:
        page = c.get(f"/v1/admin/events/{event_id}/codes?limit=2",
                     headers=stack.admin_headers()).json()  # fmt: skip
    assert len(page["codes"]) == 2 and page["next_after"]
    spent = sorted(codes)[0] == codes[0]
    assert page["codes"][0]["used"] == (1 if spent else 0)
