"""The ops dashboard in headless Chromium: an exception planted at the provider (a refund made
from its own dashboard after the sale) shows as a sold seat whose money left, with its
runbook, and the operator takes the seat back through a confirmation; the admin token never
leaves the tab's sessionStorage."""

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from tests.browser.conftest import new_profile
from tests.integration.conftest import ADMIN, Stack, claim, eventually, hold_state, pay

pytestmark = [pytest.mark.redis, pytest.mark.slow]


def sold(stack: Stack, event_id: str, name: str, seat_id: str) -> tuple[str, str]:
    """A seat bought by `name`: its hold id and the provider's attempt that paid."""
    buyer = stack.buyer(event_id, name)
    hold_id = claim(stack, buyer, seat_id)["hold_id"]
    attempt = stack.record(pay(stack, buyer, hold_id)["charge_id"])["attempt_id"]
    eventually(lambda: hold_state(stack, buyer, hold_id)["state"] == "CONFIRMED")
    return hold_id, str(attempt)


def sold_then_refunded_at_the_provider(stack: Stack, event_id: str) -> str:
    """s0 sold to fay, whose money the provider then gives back on its own (the planted
    exception: its hold id), and s1 sold to gus, a sale that stands."""
    stack.sim_config(decline_rate=0.0, fail_rate=0.0, late_rate=0.0, loss_rate=0.0)
    hold_id, attempt = sold(stack, event_id, "fay", "s0")
    sold(stack, event_id, "gus", "s1")
    refund = httpx.post(f"{stack.sim}/v1/test/attempts/{attempt}/refund", json={}, timeout=5)
    assert refund.status_code == 201, refund.text
    fay = stack.buyer(event_id, "fay")
    eventually(lambda: hold_state(stack, fay, hold_id)["state"] == "EXCEPTION")
    return hold_id


def test_the_dashboard_shows_a_planted_exception_and_resolves_it_with_confirmation(
    browser: Browser, stack: Stack, contexts: list[BrowserContext]
) -> None:
    event_id = stack.new_event(3)
    hold_id = sold_then_refunded_at_the_provider(stack, event_id)
    page = new_profile(browser, stack, contexts).new_page()
    page.goto(f"/ui/dashboard.html?event={event_id}")
    page.fill("#token", ADMIN)
    page.click("#token-form button")

    limbo = page.locator("#limbo section.seats_without_money")
    expect(limbo).to_have_attribute("data-count", "1")
    expect(limbo.locator("tbody tr")).to_contain_text(hold_id)
    expect(limbo.locator("a")).to_have_attribute("href", "/ui/runbooks#runbook-seat-without-money")
    expect(page.locator("#counters")).to_contain_text("sold 2")  # the seat is still assigned
    expect(page.locator("#sales-summary")).to_contain_text("1 order, €45.00")  # gus's
    links = page.eval_on_selector_all("#limbo h3 a", "links => links.map(a => a.hash.slice(1))")
    runbooks = httpx.get(f"{stack.api}/ui/runbooks", timeout=5).text
    assert len(links) == 9 and [a for a in links if f'id="{a}"' not in runbooks] == []
    # This stack has no ledger database: the webhook panel says so instead of an empty list.
    expect(page.locator("#hooks")).to_contain_text("in the ledger database")
    assert 'id="runbook-merchant-webhook-failing"' in runbooks  # the panel's runbook link
    assert ADMIN not in page.url
    assert page.evaluate("sessionStorage.getItem('onsale.admin')") == ADMIN
    assert page.evaluate("localStorage.length") == 0

    page.click("text=Revoke s0")
    expect(page.locator("#confirm-text")).to_contain_text(f"Take seat s0 back from hold {hold_id}")
    page.click("#confirm-no")
    expect(page.locator("#action-message")).to_have_text("Nothing done.")
    expect(limbo).to_have_attribute("data-count", "1")

    page.click("text=Revoke s0")
    page.click("#confirm-yes")
    expect(page.locator("#action-message")).to_contain_text('"state":"REVOKED"')
    expect(limbo).to_have_attribute("data-count", "0")
    expect(page.locator("#counters")).to_contain_text("free 2")  # s0 is on sale again


def test_the_dashboard_retries_a_parked_refund_and_shows_the_refund_bound(
    browser: Browser, stack: Stack, contexts: list[BrowserContext]
) -> None:
    """A signed capture naming a key we never minted, for another event, makes an orphan refund
    that the refund worker parks (the provider says the money is the winner's). The operator
    retries it from the dashboard, through a confirmation: it is due at once, the worker asks
    the provider again and parks it again, and the winner's money never goes back."""
    stack.sim_config(decline_rate=0.0, fail_rate=0.0, late_rate=0.0, loss_rate=0.0)
    event_id, other = stack.new_event(2), stack.new_event(2)
    _hold_id, attempt = sold(stack, event_id, "hal", "s0")
    forged = httpx.post(
        f"{stack.sim}/v1/test/attempts/{attempt}/callback",
        json={
            "type": "charge.captured",
            "data": {"idempotency_key": "forged-key"},
            "metadata": {"event_id": other, "charge_id": "forged-key"},
        },
        timeout=5,
    )
    assert forged.status_code < 300, forged.text
    eventually(lambda: parked_alert_at(stack, other) > 0)
    page = new_profile(browser, stack, contexts).new_page()
    page.goto(f"/ui/dashboard.html?event={other}")
    page.fill("#token", ADMIN)
    page.click("#token-form button")
    parked = page.locator("#limbo section.refunds_parked")
    expect(parked).to_have_attribute("data-count", "1")
    expect(page.locator("#lag")).to_contain_text("Late-capture-to-refund bound so far")
    expect(page.locator("#lag")).to_contain_text("Refunds open, oldest waiting")

    parked_at = parked_alert_at(stack, other)
    page.click(f"text=Retry refund of orphan/{attempt}")
    expect(page.locator("#confirm-text")).to_contain_text("provider is asked again first")
    page.click("#confirm-yes")
    expect(page.locator("#action-message")).to_contain_text('"was_parked":true')
    eventually(lambda: parked_alert_at(stack, other) > parked_at)  # the worker parked it again
    expect(parked).to_have_attribute("data-count", "1")
    moves = [e["kind"] for e in stack.ledger()["entries"] if e["attempt_id"] == attempt]
    assert moves == ["capture"]  # the winner's money never went back


def parked_alert_at(stack: Stack, event_id: str) -> int:
    """When the refund worker last parked the event's one parked refund (0: not yet)."""
    seen = httpx.get(
        f"{stack.api}/v1/admin/events/{event_id}/exceptions",
        headers=stack.admin_headers(),
        timeout=5,
    ).json()
    return max((a["at_ms"] for a in seen["alerts"] if "refund_parked" in a["reason"]), default=0)
