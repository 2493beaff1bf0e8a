"""`make screenshots`: the buyer's page and the ops dashboard as a person sees them, from the
whole stack in headless Chromium, written to docs/screenshots/ (buyer.png, buyer-phone.png,
dashboard.png, buyer-waiting.png). A sale in motion: seats sold, held and blocked by a payment in
flight, one sold seat whose money the provider gave back on its own (the dashboard's planted
exception); and a second sale behind a waiting room, just opened, with a line ahead of the buyer.

    python -m tests.browser.screenshots docs/screenshots"""

import math
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, expect, sync_playwright

from loadtest.devstack.buyer import bearer
from tests.browser.conftest import CHROMIUM, PHONE, install_chromium, seat
from tests.integration.conftest import (
    ADMIN,
    Stack,
    claim,
    eventually,
    hold_state,
    pay,
    running_stack,
)

EVENT = "spring-gala"
QUEUED = "summer-gala"  # the sale behind a waiting room


def venue() -> list[dict[str, Any]]:
    """Two sections of curved rows facing a stage: stalls (front) and circle (back)."""
    seats = []
    for section, rows, first_row, radius0 in (("Stalls", 5, 0, 160), ("Circle", 3, 5, 340)):
        for r in range(rows):
            radius, n = radius0 + r * 34, 12 + 2 * r
            for i in range(n):
                angle = math.pi * (0.25 + 0.5 * (i + 0.5) / n)
                seats.append({
                    "seat_id": f"{section[0]}{r + 1}-{i + 1}", "rank": len(seats),
                    "section": section, "row": str(first_row + r + 1),
                    "x": round(400 - radius * math.cos(angle), 1),
                    "y": round(radius * math.sin(angle) - 100, 1),
                    "price_level": "front" if section == "Stalls" and r < 2 else "standard",
                })  # fmt: skip
    return seats


def a_sale_in_motion(stack: Stack) -> None:
    stack.sim_config(decline_rate=0.0, fail_rate=0.0, late_rate=0.0, loss_rate=0.0)
    seats = venue()
    stack.local.create_event(EVENT, seats, price_minor=4500, hold_ttl_ms=480_000)
    paid = []
    for n, spot in enumerate(("S1-6", "S1-7", "S2-7", "S2-8", "C1-5", "C1-6")):
        buyer = stack.buyer(EVENT, f"fan{n}")
        hold_id = claim(stack, buyer, spot)["hold_id"]
        paid.append((buyer, hold_id, pay(stack, buyer, hold_id)["charge_id"]))
    for buyer, hold_id, _charge in paid:
        eventually(lambda b=buyer, h=hold_id: hold_state(stack, b, h)["state"] == "CONFIRMED")
    for n, spot in enumerate(("S3-3", "S3-4", "C2-10")):
        claim(stack, stack.buyer(EVENT, f"holder{n}"), spot)
    stack.sim_config(late_rate=1.0, late_delay_ms=600_000)  # a payment in flight, then released
    late = stack.buyer(EVENT, "late")
    hold_id = claim(stack, late, "S2-12")["hold_id"]
    pay(stack, late, hold_id)
    assert stack.send(late.release(hold_id)).status == 200
    stack.sim_config(late_rate=0.0)
    buyer, hold_id, charge_id = paid[0]  # the provider refunds a sale from its own dashboard
    attempt = stack.record(charge_id)["attempt_id"]
    httpx.post(f"{stack.sim}/v1/test/attempts/{attempt}/refund", json={}, timeout=5)
    eventually(lambda: hold_state(stack, buyer, hold_id)["state"] == "EXCEPTION")


def buyer_page(page: Page, stack: Stack, name: str, held: tuple[str, str], picked: str) -> None:
    page.goto(f"{stack.api}/ui/buyer.html?event={EVENT}")
    page.fill("#login-name", name)
    page.click("#login-form button")
    expect(page.locator("#feed-mode")).to_have_text("Live")
    for spot in held:
        page.click(seat(spot))
    page.click("#hold-picked")
    expect(page.locator("#hold-message")).to_contain_text("held for you")
    page.click(seat(picked))  # a next pick, to show the picked state
    time.sleep(1.2)  # the countdown has ticked


def polite(send: Callable[[], httpx.Response]) -> httpx.Response:
    """A request sent again after its Retry-After while the API's per-address limit refuses it
    (every request here comes from one address)."""
    while (answer := send()).status_code == 429:
        time.sleep(int(answer.headers.get("Retry-After", "1")))
    return answer


def a_waiting_room(stack: Stack, ahead: int = 9) -> None:
    """The second sale: a waiting room admitting one buyer a second, `ahead` buyers in line
    since before its T0, which has just passed (none of them looks again: only the page's looks
    admit anyone)."""
    stack.local.create_event(QUEUED, venue(), opens_at_ms=None, price_minor=4500)
    admin = stack.admin_headers()
    with stack.client() as c:
        room = f"/v1/admin/events/{QUEUED}/waiting-room"
        assert polite(lambda: c.put(room, json={"admit_per_s": 1}, headers=admin)).is_success
        t0_ms = int(time.time() * 1000) + 3000
        opening = f"/v1/admin/events/{QUEUED}/open"
        assert polite(
            lambda: c.post(opening, json={"opens_at_ms": t0_ms}, headers=admin)
        ).is_success
        for n in range(ahead):
            login = polite(partial(c.post, "/v1/login", json={"login": f"early{n}"}))
            auth = bearer(login.json()["token"])
            assert polite(partial(c.post, f"/v1/events/{QUEUED}/queue", headers=auth)).is_success
    time.sleep(max(0.0, t0_ms / 1000 - time.time()) + 0.3)


def waiting_page(page: Page, stack: Stack) -> None:
    """A buyer who arrives after T0: at the end of the line, with its position and estimate."""
    page.goto(f"{stack.api}/ui/buyer.html?event={QUEUED}")
    page.fill("#login-name", "carol")
    page.click("#login-form button")
    expect(page.locator("#queue-position")).to_be_visible()
    expect(page.locator("#queue-estimate")).not_to_have_text("Not known yet")


def dashboard(page: Page, stack: Stack) -> None:
    page.goto(f"{stack.api}/ui/dashboard.html?event={EVENT}")
    page.fill("#token", ADMIN)
    page.click("#token-form button")
    expect(page.locator("#limbo section.seats_without_money")).to_have_attribute("data-count", "1")


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "docs/screenshots")
    out.mkdir(parents=True, exist_ok=True)
    why = install_chromium()
    if why:
        print(f"screenshots: {why}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as logs, running_stack(Path(logs)) as stack:
        a_sale_in_motion(stack)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
            desk = browser.new_context(viewport={"width": 1280, "height": 900})
            buyer_page(page := desk.new_page(), stack, "alice", ("S1-9", "S1-10"), "S2-2")
            page.screenshot(path=str(out / "buyer.png"), full_page=True)
            phone = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
            buyer_page(small := phone.new_page(), stack, "bob", ("S1-11", "S1-12"), "S2-3")
            small.screenshot(path=str(out / "buyer-phone.png"), full_page=True)
            dashboard(ops := desk.new_page(), stack)
            ops.screenshot(path=str(out / "dashboard.png"), full_page=True)
            a_waiting_room(stack)
            waiting_page(queue := desk.new_page(), stack)
            queue.screenshot(path=str(out / "buyer-waiting.png"), full_page=True)
            browser.close()
    print(f"screenshots written to {out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
