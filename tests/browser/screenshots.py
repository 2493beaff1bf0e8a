"""`make screenshots`: the buyer's page and the ops dashboard as a person sees them, from the
whole stack in headless Chromium, written to docs/screenshots/ (buyer.png, buyer-phone.png,
dashboard.png). A sale in motion: seats sold, held and blocked by a payment in flight, one sold
seat whose money the provider gave back on its own (the dashboard's planted exception).

    python -m tests.browser.screenshots docs/screenshots"""

import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, expect, sync_playwright

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
            browser.close()
    print(f"screenshots written to {out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
