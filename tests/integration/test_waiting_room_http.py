"""The waiting room over HTTP on the real stack (API, worker, provider simulator): buyers join
before T0 from one tab or two, are admitted at T0 in the draw's order and within the free seats,
claim once with their admission (a replay with another key is refused, the same claim again is
answered), pay, and everyone still waiting is then told "sold out" without any claim of theirs
reaching the claim script."""

import os
import subprocess
import sys
import time
import uuid
from typing import Any

import orjson
import pytest
import redis

from engine.model import keys
from engine.waiting.draw import entry_of
from engine.waiting.tokens import draw
from loadtest.bench import waiting_burst
from loadtest.devstack.buyer import BuyerApi, Call, bearer
from tests.conftest import REDIS_URL
from tests.integration.conftest import Stack

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.fixture(autouse=True)
def honest_provider(stack: Stack) -> None:
    stack.sim_config(
        decline_rate=0.0, fail_rate=0.0, late_rate=0.0, duplicate_rate=0.0, loss_rate=0.0
    )


def server_ms() -> int:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        seconds, micros = client.time()
    finally:
        client.close()
    return int(seconds) * 1000 + int(micros) // 1000


def eventually(check: Any, timeout_s: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.1)
    raise AssertionError(f"not reached within {timeout_s}s")


def queue(buyer: BuyerApi, method: str = "GET") -> Call:
    path = f"{buyer.path}/queue" + ("/me" if method == "GET" else "")
    return Call("queue", method, path, json=None, headers=bearer(buyer.token))


def claim(buyer: BuyerApi, key: str, admission: str | None) -> Call:
    headers = {**bearer(buyer.token), "Idempotency-Key": key}
    if admission is not None:
        headers["Onsale-Admission"] = admission
    return Call("claim", "POST", f"{buyer.path}/holds", json={}, headers=headers)


def room_event(stack: Stack, seats: int, t0_in_ms: int, **settings: Any) -> str:
    event_id = f"wr-{uuid.uuid4().hex[:8]}"
    stack.local.create_event(event_id, seats, opens_at_ms=None, price_minor=4500)
    with stack.client() as c:
        url = f"/v1/admin/events/{event_id}/waiting-room"
        first = c.put(url, json=settings, headers=stack.admin_headers())
        assert first.status_code == 201, first.text
        assert c.put(url, json=settings, headers=stack.admin_headers()).status_code == 200
        opened = c.post(
            f"/v1/admin/events/{event_id}/open",
            json={"opens_at_ms": server_ms() + t0_in_ms},
            headers=stack.admin_headers(),
        )
        assert opened.status_code == 200, opened.text
    return event_id


def quota_fields(stack: Stack, event_id: str) -> set[str]:
    """Every login whose claim reached the claim script has a claim-rate bucket here."""
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        return {
            str(field) for field in client.hkeys(keys.event_key(event_id, "quota", stack.prefix))
        }
    finally:
        client.close()


def room_secret(stack: Stack, event_id: str) -> str:
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        secret = client.hget(keys.queue_keys(event_id, stack.prefix)[1], "secret")
    finally:
        client.close()
    assert isinstance(secret, str)
    return secret


def test_join_early_admitted_in_order_claim_once_then_sold_out(stack: Stack) -> None:
    event_id = room_event(stack, 2, 3_000, admit_per_s=100, admit_factor_pct=150)
    names = [f"fan{i}" for i in range(8)]
    buyers = {name: stack.buyer(event_id, name) for name in names}
    early = stack.send(claim(buyers["fan0"], "k0", None))
    assert early.code == "admission_required"  # before T0 too: no claim without an admission
    for name in names:
        joined = stack.send(queue(buyers[name], "POST"))
        assert (joined.status, joined.body["state"], joined.body["position"]) == (
            201, "waiting", None,
        ), joined  # fmt: skip
        assert joined.body["drawn"] is False and joined.body["poll_after_ms"] > 0
    second_tab = stack.send(queue(stack.buyer(event_id, "fan3"), "POST"))
    assert (second_tab.status, second_tab.body["entries"]) == (200, 8)  # the same place

    with stack.client() as c:  # the commitment, noted before T0 (ADR 0040)
        noted = c.get(f"/v1/events/{event_id}/queue/draw").json()
    assert (noted["seed"], noted["entries"]) == (None, [])
    time.sleep(3.2)  # T0
    places = {name: stack.send(queue(buyers[name])).body for name in names}
    by_draw = sorted(names, key=lambda n: draw(room_secret(stack, event_id), event_id, n))
    admitted = [n for n in by_draw if places[n]["state"] == "admitted"]
    assert admitted == by_draw[:3]  # 2 free seats x 150%, the three best draws
    waiting = [n for n in names if places[n]["state"] == "waiting"]
    assert sorted(waiting, key=lambda n: places[n]["position"]) == by_draw[3:]
    assert [places[n]["position"] for n in by_draw[3:]] == [1, 2, 3, 4, 5]
    # The draw, as anyone may check it (ADR 0040): published without a login, and verified by
    # the command line from what the API publishes alone.
    with stack.client() as c:
        published = c.get(f"/v1/events/{event_id}/queue/draw").json()
    assert [e["entry"] for e in published["entries"]] == [entry_of(event_id, n) for n in by_draw]
    verify = [sys.executable, "-m", "onsale.cli", "waiting", "verify", event_id, "--api",
              stack.api, "--commitment"]  # fmt: skip
    wide = {**os.environ, "COLUMNS": "300"}  # the verdict on one line of the table
    checked = subprocess.run([*verify, noted["commitment"]], capture_output=True, text=True,
                             timeout=60, env=wide)  # fmt: skip
    assert checked.returncode == 0 and "verified" in checked.stdout, checked
    other = subprocess.run([*verify, "0" * 64], capture_output=True, text=True, timeout=60,
                           env=wide)  # fmt: skip
    assert other.returncode == 1 and "another commitment" in other.stdout, other
    first, second, third = (buyers[n] for n in admitted)
    token = places[admitted[0]]["admission"]["token"]

    won = stack.send(claim(first, "k1", token))
    assert won.status == 201, won
    assert stack.send(claim(first, "k1", token)).status == 200  # the same claim: its hold
    assert stack.send(claim(first, "k2", token)).code == "admission_used"
    assert stack.send(claim(first, "k3", None)).code == "admission_required"
    assert stack.send(claim(second, "k1", token)).code == "admission_invalid"  # first's
    # Its MAC's last hex digit changed (to "0" it was the same token one time in 16).
    forged = token[:-1] + ("1" if token.endswith("0") else "0")
    assert stack.send(claim(first, "k1", forged)).code == "admission_invalid"
    other = stack.send(claim(second, "k1", places[admitted[1]]["admission"]["token"]))
    assert other.status == 201, other
    third_token = places[admitted[2]]["admission"]["token"]
    assert stack.send(claim(third, "k1", third_token)).code == "sold_out"  # held, not gone
    kept = stack.send(queue(third)).body
    assert kept["state"] == "admitted" and (kept["free"], kept["held"]) == (0, 2)
    still = stack.send(queue(buyers[by_draw[3]])).body
    assert (still["state"], still["estimate_s"]) == ("waiting", None)  # nobody admitted now

    for buyer, hold in ((first, won), (second, other)):
        assert stack.send(buyer.pay(str(hold.body["hold_id"]))).status == 202
    for buyer, hold in ((first, won), (second, other)):
        eventually(
            lambda b=buyer, h=hold: (
                stack.send(b.hold(str(h.body["hold_id"]))).body["state"] == "CONFIRMED"
            )
        )
    for name in [*by_draw[2:]]:
        assert stack.send(queue(buyers[name])).body["state"] == "sold_out"
    assert stack.send(queue(buyers[admitted[0]])).body["state"] == "used"
    late = stack.send(queue(stack.buyer(event_id, "latecomer"), "POST"))
    assert (late.status, late.body["state"], late.body["entries"]) == (200, "sold_out", 8)
    assert stack.send(claim(third, "k1", third_token)).code == "sold_out"
    reached = {f.removeprefix("claim:") for f in quota_fields(stack, event_id)}
    assert reached & set(by_draw[3:]) == set()  # the waiting never touched the claim script
    with stack.client() as c:
        figures = c.get(f"/v1/admin/events/{event_id}/waiting-room", headers=stack.admin_headers())
    assert figures.status_code == 200
    assert {k: figures.json()[k] for k in ("entries", "admitted", "used")} == {
        "entries": 8, "admitted": 3, "used": 2,
    }  # fmt: skip


def test_refusals_of_the_queue_and_an_event_without_a_room(stack: Stack) -> None:
    plain = stack.new_event(1)
    buyer = stack.buyer(plain, "walk-in")
    assert stack.send(queue(buyer, "POST")).code == "no_waiting_room"
    assert stack.send(claim(buyer, "k", None)).status == 201  # no room: no admission asked
    event_id = room_event(stack, 1, 60_000)
    fan = stack.buyer(event_id, "fan")
    assert stack.send(queue(fan)).code == "not_in_queue"
    with stack.client() as c:
        bad = c.put(
            f"/v1/admin/events/{event_id}/waiting-room",
            json={"admit_per_s": 0},
            headers=stack.admin_headers(),
        )
        unknown = c.put(
            f"/v1/admin/events/{event_id}/waiting-room",
            json={"admit_per_sec": 5},
            headers=stack.admin_headers(),
        )
        started = c.put(
            f"/v1/admin/events/{plain}/waiting-room", json={}, headers=stack.admin_headers()
        )
        # The public view says which has a room (the buyer's page opens the map or the queue).
        views = [c.get(f"/v1/events/{e}").json()["waiting_room"] for e in (plain, event_id)]
    assert (bad.status_code, unknown.status_code) == (400, 400)
    assert started.json()["error"]["code"] == "sale_started"
    assert views == [False, True]


def test_the_waiting_burst_tool_runs_both_bursts(tmp_path: Any) -> None:
    out = tmp_path / "burst.json"
    args = ["--clients", "200", "--seats", "5", "--workers", "1", "--spread-s", "1"]
    assert waiting_burst.main([*args, "--json", str(out)]) == 0
    result = orjson.loads(out.read_bytes())
    assert result["plain"]["answers"] == {"201": 5, "sold_out": 195}
    room = result["room"]
    assert room["answers"].get("bought", 0) == 5 and room["invariants_ok"]
    assert room["claim_requests"] < 200 and room["rho_place_vs_seat"] is not None
