"""Headless Chromium for the page tests: Debian's /usr/bin/chromium, driven by Playwright (never a
browser Playwright downloads). When it is missing, it is installed as .ci/services.sh does (apt,
as root); the tests are skipped, saying why, only when that is impossible."""

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from engine.model.orders import order_number
from tests.integration import conftest as integration
from tests.integration.conftest import Stack

stack = integration.stack  # the whole stack, one per test module, as the integration tests have

CHROMIUM = Path("/usr/bin/chromium")
PHONE = {"width": 390, "height": 844}
expect.set_options(timeout=10_000)


def install_chromium() -> str:
    """'' once /usr/bin/chromium exists, else why it cannot."""
    if CHROMIUM.exists():
        return ""
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        return "no /usr/bin/chromium, and no apt-get as root to install Debian's chromium"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "chromium"]
    for step in (install, ["apt-get", "update", "-q"], install):
        subprocess.run(step, env=env, capture_output=True, timeout=900, check=False)
        if CHROMIUM.exists():
            return ""
    return "no /usr/bin/chromium, and `apt-get install chromium` did not provide it"


@pytest.fixture(scope="module")  # Playwright's loop is gone before any asyncio test runs
def browser() -> Iterator[Browser]:
    why = install_chromium()
    if why:
        pytest.skip(why)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def contexts(browser: Browser, stack: Stack) -> Iterator[list[BrowserContext]]:
    """Browser profiles for one test (each its own storage: another person), closed after."""
    made: list[BrowserContext] = []
    yield made
    for context in made:
        context.close()


def new_profile(
    browser: Browser,
    stack: Stack,
    made: list[BrowserContext],
    **options: object,
) -> BrowserContext:
    options.setdefault("locale", "en-US")  # the page speaks the browser's language (ADR 0046)
    context = browser.new_context(base_url=stack.api, **options)  # type: ignore[arg-type]
    made.append(context)
    return context


def seat(seat_id: str) -> str:
    return f'g.seat[data-seat="{seat_id}"]'


def signed_in(
    context: BrowserContext,
    event_id: str,
    name: str,
    *,
    on_sale: bool = True,
    errors: list[str] | None = None,
) -> Page:
    """The buyer's page of the event, signed in as `name`, its seats drawn and live (and the
    sale open, unless `on_sale` is False). `errors` collects what the console reports as an
    error (a script refused by the Content-Security-Policy, say)."""
    page = context.new_page()
    if errors is not None:
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"/ui/buyer.html?event={event_id}")
    page.fill("#login-name", name)
    page.click("#login-form button")
    expect(page.locator("#feed-mode")).to_have_text("Live")
    if on_sale:
        expect(page.locator("#countdown")).to_have_text("On sale now")
    return page


def pay_and_read_the_order(page: Page, event_id: str, login: str, confirmed: str) -> str:
    """Hold what is picked, pay, and see `confirmed` said: the order's number shown is the one
    its hold makes (engine/model/orders.py) and its QR code is drawn. Returns the number."""
    page.click("#hold-picked")
    page.click("#pay")
    expect(page.locator("#hold-message")).to_contain_text(confirmed, timeout=15_000)
    number = page.locator("#order-number").inner_text()
    hold_id = page.evaluate(f"localStorage.getItem('onsale.hold.{event_id}.{login}')")
    assert number == order_number(event_id, hold_id)
    assert page.evaluate("document.getElementById('order-qr').naturalWidth") > 0
    return number
