"""The waiting room on the buyer's page (ADR 0029) in headless Chromium against the whole stack:
buyers who open the page before T0 wait in its queue panel, not at the map; at T0 each sees its
position, and they are admitted one by one in the order of their places, as the queue's own
answers give them; the admitted ones claim with their admission. Once the stock is gone for
good, a buyer still waiting is told "sold out", its page stops looking, and it never sent a
claim."""

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Request, Response, expect

from tests.browser.conftest import PHONE, new_profile, seat
from tests.integration.conftest import Stack, eventually

pytestmark = [pytest.mark.redis, pytest.mark.slow]

BEFORE_T0 = "You are in the queue. Your place is drawn when the sale opens."
TURN = "It's your turn: pick your seats now."
SOLD_OUT = "Sold out: every seat is sold, and none can come back."
# The position the panel shows now ('' when it shows none).
SHOWN = (
    "document.getElementById('queue-place').hidden ? ''"
    " : document.getElementById('queue-position').textContent"
)
# The hidden hold button forced on and pressed (as a script in the page could).
FORCED_PRESS = (
    "(() => { const b = document.getElementById('hold-best'); b.disabled = false; b.click(); })()"
)


@pytest.fixture(autouse=True)
def honest_provider(stack: Stack) -> None:
    stack.sim_config(decline_rate=0.0, fail_rate=0.0, late_rate=0.0, loss_rate=0.0,
                     contradict_rate=0.0)  # fmt: skip


def room_event(stack: Stack, seats: int, t0_in_ms: int, **settings: Any) -> str:
    """A draft event given a waiting room, then opened with its T0 `t0_in_ms` from now (the
    clocks of this machine and of Redis agree)."""
    event_id = f"wr-{uuid.uuid4().hex[:8]}"
    layout = [{"seat_id": f"s{i}", "rank": i, "section": "A"} for i in range(seats)]
    stack.local.create_event(event_id, layout, opens_at_ms=None, price_minor=4500)
    with stack.client() as c:
        room = c.put(
            f"/v1/admin/events/{event_id}/waiting-room",
            json=settings,
            headers=stack.admin_headers(),
        )
        assert room.status_code == 201, room.text
        opened = c.post(
            f"/v1/admin/events/{event_id}/open",
            json={"opens_at_ms": int(time.time() * 1000) + t0_in_ms},
            headers=stack.admin_headers(),
        )
        assert opened.status_code == 200, opened.text
    return event_id


def room_figures(stack: Stack, event_id: str) -> dict[str, Any]:
    with stack.client() as c:
        r = c.get(f"/v1/admin/events/{event_id}/waiting-room", headers=stack.admin_headers())
    assert r.status_code == 200, r.text
    figures: dict[str, Any] = r.json()
    return figures


@dataclass
class Buyer:
    """One person's page, with what it sent and what the queue answered it."""

    name: str
    page: Page
    requests: list[Request] = field(default_factory=list)
    queue_answers: list[Response] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def views(self) -> list[dict[str, Any]]:
        """The queue's answers to this page, in order (its joins and looks)."""
        return [r.json() for r in self.queue_answers]

    def claims(self) -> list[Request]:
        return [r for r in self.requests if r.method == "POST" and r.url.endswith("/holds")]

    def status(self) -> str:
        return self.page.locator("#queue-status").inner_text()


def queue_answer(r: Response) -> bool:
    """A place the queue gave (a join's or a look's answer), not a refusal."""
    return r.ok and r.url.split("?")[0].endswith(("/queue", "/queue/me"))


def open_page(context: BrowserContext, event_id: str, name: str) -> Buyer:
    """The buyer's page of the event, signed in as `name` (not waited for: see `queued`)."""
    buyer = Buyer(name, context.new_page())
    page = buyer.page
    page.on("request", lambda r: buyer.requests.append(r))
    page.on("response", lambda r: buyer.queue_answers.append(r) if queue_answer(r) else None)
    page.on("console", lambda m: buyer.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: buyer.errors.append(str(exc)))
    page.goto(f"/ui/buyer.html?event={event_id}")
    page.fill("#login-name", name)
    page.click("#login-form button")
    return buyer


def queued(buyer: Buyer) -> Buyer:
    """In the queue before T0: the panel, its countdown, and no map."""
    page = buyer.page
    expect(page.locator("#queue-status")).to_have_text(BEFORE_T0)
    expect(page.locator("#queue-clock-label")).to_have_text("Sale opens in")
    expect(page.locator("#map-panel")).to_be_hidden()
    expect(page.locator("#hold-best")).to_be_hidden()
    return buyer


def test_buyers_wait_for_t0_and_are_admitted_in_the_order_of_their_places(
    browser: Browser, stack: Stack, contexts: list[BrowserContext]
) -> None:
    # One seat, passed along: admissions stay within the free seats, so each turn comes only
    # once the buyer before has claimed the seat and released it (the room's pace, not the
    # test's). Every page looks when the API says, spread over the first seconds after T0.
    # T0 8 s away: every page must be open and queued before it, on a loaded machine too.
    event_id = room_event(stack, 1, 8_000, admit_factor_pct=100)
    names = ["ann", "ben", "cat", "dan"]
    opened = [open_page(new_profile(browser, stack, contexts), event_id, n) for n in names]
    buyers = [queued(b) for b in opened]
    shown: dict[str, set[int]] = {n: set() for n in names}  # positions seen on each panel

    def turns_now() -> list[Buyer]:
        """Who is told it is their turn now (and the positions the panels show)."""
        for b in buyers:
            if position := b.page.evaluate(SHOWN):
                shown[b.name].add(int(position))
        return [b for b in buyers if b.status() == TURN]

    # T0: each page is told its position, or its turn (the first in line's).
    eventually(lambda: all(b.status() == TURN or b.status().startswith("You are number ")
                           for b in buyers))  # fmt: skip
    turns: list[str] = []
    while len(turns) < len(names):
        [b] = eventually(lambda: [b for b in turns_now() if b.name not in turns])
        turns.append(b.name)
        expect(b.page.locator("#feed-mode")).to_have_text("Live")
        b.page.click(seat("s0"))
        b.page.click("#hold-picked")
        expect(b.page.locator("#hold-message")).to_contain_text("Seats s0 are held for you")
        expect(b.page.locator("#queue-status")).to_have_text("Your turn was used for your claim.")
        assert [w.name for w in turns_now()] == []  # nobody else's turn while the seat is held
        if len(turns) < len(names):  # the seat comes back: the next in line is admitted
            b.page.click("#release")
            expect(b.page.locator("#hold-message")).to_contain_text("You released seats s0.")
            expect(b.page.locator("#queue-rejoin")).to_be_visible()

    views = {b.name: b.views() for b in buyers}
    assert all(not v[0]["drawn"] and v[0]["state"] == "waiting" for v in views.values()), views
    # A place is the admissions made before it plus its position: the queue's answers after T0
    # give each waiting buyer one place, and the turns came in the order of the places. Only the
    # first in line never waited after T0: the first look of anyone admitted it.
    places = {
        n: {v["admitted"] + v["position"] for v in vs if v["state"] == "waiting" and v["drawn"]}
        for n, vs in views.items()
    }
    assert [n for n in turns if not places[n]] == turns[:1], (places, turns)
    for n in turns[1:]:
        assert places[n] == {turns.index(n) + 1}, (n, places, turns)
        answered = {v["position"] for v in views[n] if v["position"] is not None}
        assert shown[n] and shown[n] <= answered, (n, shown[n], answered)  # on its panel too
    for b in buyers:  # each claim carried the buyer's own admission
        [sent] = b.claims()
        [token] = {v["admission"]["token"] for v in views[b.name] if v["state"] == "admitted"}
        assert sent.header_value("Onsale-Admission") == token
        assert b.errors == []
    room = room_figures(stack, event_id)
    counts = ("entries", "joined_before_t0", "admitted", "used", "outstanding")
    assert {k: room[k] for k in counts} == dict(zip(counts, (4, 4, 4, 4, 0), strict=True))


def test_a_waiting_buyer_is_told_sold_out_on_a_phone_and_never_claims(
    browser: Browser, stack: Stack, contexts: list[BrowserContext]
) -> None:
    # One seat: one turn at a time (admissions stay within the free units).
    event_id = room_event(stack, 1, 6_000, admit_per_s=5, admit_factor_pct=100)
    phone: dict[str, Any] = {"viewport": PHONE, "is_mobile": True, "has_touch": True}
    opened = [
        open_page(new_profile(browser, stack, contexts, **phone), event_id, n)
        for n in ("eve", "fay")
    ]
    buyers = [queued(b) for b in opened]
    eventually(
        lambda: sorted(b.status() for b in buyers) == sorted((TURN, "You are number 1 in line."))
    )
    [first] = [b for b in buyers if b.status() == TURN]
    [last] = [b for b in buyers if b is not first]
    expect(last.page.locator("#queue-position")).to_have_text("1")
    expect(last.page.locator("#map-panel")).to_be_hidden()

    first.page.locator(seat("s0")).tap()
    first.page.locator("#hold-picked").tap()
    expect(first.page.locator("#hold-message")).to_contain_text("Seats s0 are held for you")
    # The seat is held: nobody is admitted until it comes back or is sold, and the estimate says
    # so rather than guess.
    expect(last.page.locator("#queue-estimate")).to_have_text("None: no seat is free now")
    first.page.locator("#pay").tap()
    expect(first.page.locator("#hold-message")).to_contain_text(
        "Confirmed: Section A, seat s0, paid €45.00", timeout=15_000
    )

    expect(last.page.locator("#queue-status")).to_have_text(SOLD_OUT)
    for hidden in ("#map-panel", "#hold-panel", "#queue-place", "#queue-rejoin"):
        expect(last.page.locator(hidden)).to_be_hidden()
    expect(last.page.locator("#hold-best")).to_be_disabled()
    # Even its hidden button, forced on and pressed, sends nothing: the page has no turn.
    last.page.evaluate(FORCED_PRESS)
    looks = len(last.queue_answers)
    last.page.wait_for_timeout(1500)  # a final answer: no more looks (a waiting one, every second)
    assert len(last.queue_answers) == looks
    assert last.claims() == []  # never a claim from the page that waited
    assert [v["state"] for v in last.views()][-1] == "sold_out"
    assert len(first.claims()) == 1
    room = room_figures(stack, event_id)
    assert (room["entries"], room["admitted"], room["used"]) == (2, 1, 1)
    for b in buyers:
        assert b.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert b.errors == []
