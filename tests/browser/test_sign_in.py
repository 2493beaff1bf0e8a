"""Sign-in through the identity provider on both pages (ADR 0050), in headless Chromium against
the whole stack with a ledger, configured with a real identity (no demo login) and the tests'
OpenID provider (tests/oidc/provider.py, Authlib): a buyer is sent to the provider, signs in,
comes back signed in with the token in memory only, holds a seat, is signed in again silently
after a reload, and the page renews its token before it runs out; a buyer's whole evening (the
event picked by name, two seats by row and number, paid, the order found with its number and
QR code); the dashboard lets in only an account with the admin claim."""

import uuid
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.browser.conftest import new_profile, pay_and_read_the_order, seat
from tests.integration.conftest import Stack, running_stack
from tests.oidc.provider import ADMIN_CLAIM, AUDIENCE, OpenIdProvider

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]

CLIENT = "onsale-pages"


@pytest.fixture(scope="module")
def provider() -> Iterator[OpenIdProvider]:
    # Access tokens of 70 s: the pages renew a minute before the end, here after 10 s.
    p = OpenIdProvider(access_token_ttl_s=70).start()
    yield p
    p.stop()


@pytest.fixture(scope="module")
def stack(provider: OpenIdProvider, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The stack with a ledger of its own (the buyer's orders are read from it), its buyers'
    tokens the provider's."""
    env = {
        "ONSALE_DEMO_LOGIN": "0",
        "ONSALE_JWT_JWKS_URL": f"{provider.issuer}/jwks",
        "ONSALE_JWT_ISSUER": provider.issuer,
        "ONSALE_JWT_AUDIENCE": AUDIENCE,
        "ONSALE_JWT_ADMIN_CLAIM": ADMIN_CLAIM,
        "ONSALE_OIDC_CLIENT_ID": CLIENT,
    }
    log_dir = tmp_path_factory.mktemp("oidc-stack")
    with running_stack(log_dir, env=env, ledger=True, duplicates=False) as s:
        s.sim_config(decline_rate=0.0, fail_rate=0.0, late_rate=0.0, loss_rate=0.0,
                     contradict_rate=0.0)  # fmt: skip
        provider.add_client(CLIENT, f"{s.api}/ui/buyer.html", f"{s.api}/ui/dashboard.html")
        yield s


def through_the_provider(page: Page, name: str) -> None:
    """The page has sent its buyer to the provider's form: sign in there as `name`."""
    page.fill("#username", name)
    page.click("#sign-in")


def test_a_buyer_signs_in_through_the_provider_holds_a_seat_and_stays_signed_in(
    browser: Browser, stack: Stack, provider: OpenIdProvider, contexts: list[BrowserContext]
) -> None:
    event_id = stack.new_event(3)
    context = new_profile(browser, stack, contexts)
    page = context.new_page()
    page.goto(f"/ui/buyer.html?event={event_id}")
    # No session at the provider yet: the silent try comes back, and the page offers its button.
    expect(page.locator("#provider-sign-in")).to_be_visible()
    expect(page.locator("#login-form")).to_be_hidden()  # no demo login here
    page.click("#provider-sign-in")
    through_the_provider(page, "fan-7")
    expect(page.locator("#who")).to_have_text("Signed in as fan-7")
    assert page.url.endswith(f"/ui/buyer.html?event={event_id}")  # back where it left
    expect(page.locator("#countdown")).to_have_text("On sale now")
    page.locator(seat("s1")).click()
    page.locator("#hold-picked").click()
    expect(page.locator("#hold-countdown")).to_be_visible()
    expect(page.locator(seat("s1"))).to_have_class("seat H mine")
    kept = page.evaluate("JSON.stringify({...localStorage}) + JSON.stringify({...sessionStorage})")
    assert "eyJ" not in kept  # no token in any storage: in memory only

    # Before the 70 s token runs out the page renews it with the refresh token (rotated: the
    # provider revokes the one used).
    for _ in range(60):
        if any(r.revoked and r.user.name == "fan-7" for r in provider.refresh.values()):
            break
        page.wait_for_timeout(500)
    else:
        pytest.fail("the page did not renew its token")
    page.locator("#release").click()
    expect(page.locator("#hold-message")).to_contain_text("released")  # the new token works

    page.reload()  # the token was in memory: signed in again, silently, at the provider
    expect(page.locator("#who")).to_have_text("Signed in as fan-7")
    expect(page.locator("#provider-sign-in")).to_be_hidden()


def test_a_buyer_picks_the_event_by_name_buys_two_seats_by_row_and_number_and_finds_the_order(
    browser: Browser, stack: Stack, contexts: list[BrowserContext]
) -> None:
    """Issue 34's whole evening: from the public list by name, signed in through the provider,
    two seats named by row and number, paid, the order under "My orders" with its number, and
    its QR code on the confirmation."""
    event_id = f"gala-{uuid.uuid4().hex[:8]}"
    seats = [{"seat_id": f"r{r}n{n}", "rank": r * 10 + n, "section": "Stalls", "row": str(r),
              "number": str(n), "x": n * 30, "y": r * 30}
             for r in (1, 2) for n in range(1, 7)]  # fmt: skip
    stack.local.create_event(event_id, seats, price_minor=4500, name=f"Gala {event_id[-4:]}",
                             venue="Konzerthaus")  # fmt: skip
    errors: list[str] = []
    page = new_profile(browser, stack, contexts).new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto("/ui/buyer.html")
    page.locator("#event-list li", has_text=f"Gala {event_id[-4:]}").get_by_role("link").click()
    page.click("#provider-sign-in")
    through_the_provider(page, "eve-9")
    expect(page.locator("#who")).to_have_text("Signed in as eve-9")
    expect(page.locator("#title")).to_have_text(f"Gala {event_id[-4:]}")
    for number in ("4", "5"):
        page.get_by_role("checkbox", name=f"Section Stalls, row 2, seat {number}").click()
    number = pay_and_read_the_order(
        page, event_id, "eve-9", "Confirmed: Section Stalls, row 2, seats 4, 5"
    )
    mine = page.locator("#my-orders li")
    page.reload()  # the orders are the ledger's: read again, signed in silently
    expect(page.locator("#who")).to_have_text("Signed in as eve-9")
    expect(mine).to_have_count(1)
    expect(mine).to_have_text(f"{number} · r2n4, r2n5 · €90.00")
    assert [e for e in errors if "status of 4" not in e] == []


def test_the_dashboard_lets_in_only_an_account_with_the_admin_claim(
    browser: Browser, stack: Stack, contexts: list[BrowserContext]
) -> None:
    event_id = stack.new_event(2)
    buyer = new_profile(browser, stack, contexts).new_page()
    buyer.goto("/ui/dashboard.html")
    buyer.click("#provider-sign-in")
    through_the_provider(buyer, "fan-8")
    expect(buyer.locator("#token-message")).to_have_text(
        "This account is not an operator's: it has no admin claim."
    )
    expect(buyer.locator("#event-panel")).to_be_hidden()
    ops = new_profile(browser, stack, contexts).new_page()
    ops.goto(f"/ui/dashboard.html?event={event_id}")
    ops.click("#provider-sign-in")
    through_the_provider(ops, f"admin-{uuid.uuid4().hex[:4]}")
    expect(ops.locator("#event-panel")).to_be_visible()
    expect(ops.locator("#event-select")).to_have_value(event_id)
