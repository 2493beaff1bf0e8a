"""A buyer's orders on the page (ADR 0042) in headless Chromium, against a stack with a ledger
(the webhook tests' stack): a seat bought is found under "My orders" with its number, and its
confirmation shows the number and its QR code."""

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from tests.browser.conftest import new_profile, pay_and_read_the_order, seat, signed_in
from tests.integration.conftest import Stack
from tests.integration.test_webhooks_http import hooks

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]
__all__ = ["hooks"]


@pytest.fixture(scope="module")
def stack(hooks: Stack) -> Iterator[Stack]:
    yield hooks


def test_a_seat_bought_is_found_under_my_orders_with_its_number_and_code(
    browser: Browser, stack: Stack, contexts: list[BrowserContext]
) -> None:
    event_id = stack.new_event(3)
    errors: list[str] = []
    page = signed_in(new_profile(browser, stack, contexts), event_id, "rui", errors=errors)
    expect(page.locator("#orders-panel")).to_be_hidden()  # none yet
    page.click(seat("s2"))
    number = pay_and_read_the_order(page, event_id, "rui", "Confirmed: Section A, seat s2")
    mine = page.locator("#my-orders li")
    expect(mine).to_have_count(1)
    expect(mine).to_have_text(f"{number} · s2 · €45.00")
    assert errors == []
