"""Paying on the page with Stripe (ADR 0039) in headless Chromium, against the whole stack on
ONSALE_PROVIDER=stripe: the page mounts the Payment Element with the client secret the charge
start returns, the buyer types a card, and Stripe.js confirms it, with a 3-D Secure step for a
card that asks for one. Stripe.js is the simulator's stand-in (loadtest/provider_sim/stripe_js.py,
served by the simulator speaking Stripe's wire; no network), the intents wait for the page
(`buyer_confirms`), and the end state shown is the one the API tells, as for any provider."""

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.browser.conftest import new_profile, seat, signed_in
from tests.integration.conftest import Stack, running_stack

pytestmark = [pytest.mark.redis, pytest.mark.slow]

CARD = "4242424242424242"  # Stripe's test card: paid without a question
CARD_3DS = "4000002760003184"  # Stripe's test card that always asks for 3-D Secure
CARD_DECLINED = "4000000000000002"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("stripe-page"), "stripe") as s:
        yield s


@pytest.fixture(autouse=True)
def buyer_confirms(stack: Stack) -> None:
    stack.sim_config(decline_rate=0.0, fail_rate=0.0, late_rate=0.0, loss_rate=0.0,
                     contradict_rate=0.0, buyer_confirms=True)  # fmt: skip


def holding(stack: Stack, contexts: list[BrowserContext], browser: Browser, name: str,
            **event: object) -> tuple[Page, list[str]]:  # fmt: skip
    """A signed-in page holding seat s1 of a new event, its payment form open."""
    event_id = stack.new_event(3, **event)
    errors: list[str] = []
    page = signed_in(new_profile(browser, stack, contexts), event_id, name, errors=errors)
    page.click(seat("s1"))
    page.click("#hold-picked")
    expect(page.locator("#hold-message")).to_contain_text("Seats s1 are held for you")
    page.click("#pay")
    expect(page.locator("#payment-form")).to_be_visible()
    return page, errors


def test_a_seat_bought_with_a_card_that_asks_for_3d_secure(
    browser: Browser, stack: Stack, contexts: list[BrowserContext]
) -> None:
    page, errors = holding(stack, contexts, browser, "tds")
    page.fill("#payment-element input[name=cardnumber]", CARD_3DS)
    page.click("#pay-confirm")
    challenge = page.get_by_role("dialog", name="3-D Secure")
    expect(challenge).to_be_visible()
    challenge.get_by_role("button", name="Complete authentication").click()
    expect(page.locator("#hold-message")).to_contain_text(
        "Confirmed: Section A, seat s1, paid €45.00", timeout=15_000
    )
    expect(page.locator("#payment-form")).to_be_hidden()
    # The order's number and its QR code for the door (ADR 0042).
    expect(page.locator("#order-number")).to_have_text(
        re.compile(r"^[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{2}$")
    )
    assert page.evaluate("document.getElementById('order-qr').naturalWidth") > 0
    assert errors == []


def test_a_declined_card_is_said_and_another_card_pays(
    browser: Browser, stack: Stack, contexts: list[BrowserContext]
) -> None:
    page, errors = holding(stack, contexts, browser, "dec")
    page.fill("#payment-element input[name=cardnumber]", "4242 4242")  # mistyped: stays on form
    page.click("#pay-confirm")
    expect(page.locator("#payment-error")).to_have_text("Your card number is invalid.")
    expect(page.locator("#pay-confirm")).to_be_enabled()
    page.fill("#payment-element input[name=cardnumber]", CARD_DECLINED)
    page.click("#pay-confirm")
    expect(page.locator("#hold-message")).to_contain_text("declined", timeout=15_000)
    expect(page.locator("#pay")).to_be_enabled(timeout=15_000)  # the hold still runs: pay again
    page.click("#pay")
    page.fill("#payment-element input[name=cardnumber]", CARD)
    page.click("#pay-confirm")
    expect(page.locator("#hold-message")).to_contain_text(
        "Confirmed: Section A, seat s1, paid €45.00", timeout=15_000
    )
    # The browser logs the decline's 402 answer to Stripe.js's call, as it would Stripe's.
    assert [e for e in errors if "status of 402" not in e] == []


def test_3d_secure_that_outlasts_the_hold_ends_in_a_refunded_late_capture(
    browser: Browser, stack: Stack, contexts: list[BrowserContext]
) -> None:
    # The hold's deadline decides (ADR 0039): the buyer still authenticating when it passes is
    # told the hold ended; the capture that follows is refunded, and the page says so.
    page, errors = holding(stack, contexts, browser, "slow", hold_ttl_ms=3000,
                           policy="release_refund")  # fmt: skip
    page.fill("#payment-element input[name=cardnumber]", CARD_3DS)
    page.click("#pay-confirm")
    challenge = page.get_by_role("dialog", name="3-D Secure")
    expect(challenge).to_be_visible()
    expect(page.locator("#hold-message")).to_contain_text("Your hold expired", timeout=15_000)
    challenge.get_by_role("button", name="Complete authentication").click()
    expect(page.locator("#hold-message")).to_contain_text(
        "Your payment arrived after the deadline and was refunded.", timeout=15_000
    )
    expect(page.locator("#hold-charges")).to_contain_text("Payment of €45.00: refunded")
    assert errors == []
