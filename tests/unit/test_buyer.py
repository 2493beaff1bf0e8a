"""The buyer's side, without a server: each journey driven against scripted answers, checked for
the exact requests it sends and what it returns."""

import random
from collections.abc import Callable
from typing import Any

import pytest
from rich.progress import Progress

from loadtest.demo.scenario import PARTY, Burst, burst
from loadtest.devstack import buyer
from loadtest.devstack.buyer import (
    Answer,
    BuyerApi,
    Call,
    Ended,
    Journey,
    Patience,
    Trip,
    drive_async,
    drive_sync,
)

API = BuyerApi("e1", "tok")
AUTH = {"Authorization": "Bearer tok"}


class Script:
    """Answers each request with the next canned answer, on a clock that only pauses move."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.calls: list[Call] = []
        self.pauses: list[float] = []
        self.now = 0.0

    def send(self, call: Call) -> Answer:
        self.calls.append(call)
        assert self.answers, f"no answer left for {call}"
        return self.answers.pop(0)

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now

    def run(self, journey: Journey[Any]) -> Any:
        result = drive_sync(journey, self.send, self.sleep)
        assert self.answers == [], "answers left unasked"
        return result

    @property
    def sent(self) -> list[tuple[str, str]]:
        return [(c.method, c.path) for c in self.calls]


class Rolls(random.Random):
    """random() returns the given rolls in order; everything else is a seeded Random."""

    def __init__(self, *rolls: float) -> None:
        super().__init__(0)
        self.rolls = list(rolls)

    def random(self) -> float:
        return self.rolls.pop(0)

    def getrandbits(self, k: int) -> int:  # keeps choice() off the rolls
        return super().getrandbits(k)


def ok(status: int = 200, **body: Any) -> Answer:
    return Answer(status, str(status), body)


def refused(status: int, code: str) -> Answer:
    return Answer(status, code, {"error": {"code": code}})


def hold(state: str, in_flight: bool = False, seat: str = "s1") -> Answer:
    return ok(state=state, charge_in_flight="c" if in_flight else None, seat_id=seat)


def patient(script: Script, **changes: Any) -> Patience:
    settings: dict[str, Any] = {"tries_max": 3, "poll_s": 0.25, "deadline": 100.0}
    return Patience(**(settings | changes), clock=script.clock)


HOLD = ("GET", "/v1/events/e1/holds/h1")
PAY = ("POST", "/v1/events/e1/holds/h1/charges")
RELEASE = ("DELETE", "/v1/events/e1/holds/h1")
CLAIM = ("POST", "/v1/events/e1/holds")


def test_calls_are_the_checkout_api() -> None:
    calls = [
        API.login("ann"),
        API.claim("k1"),
        API.claim("k2", "s9"),
        API.hold("h1"),
        API.pay("h1"),
        API.pay("h1", "k3"),
        API.abandon("h1", "c1"),
        API.release("h1"),
        API.availability(),
        API.free_seats(20),
    ]
    key = {"Idempotency-Key"}
    assert [(c.name, c.method, c.path, c.json, dict(c.headers)) for c in calls] == [
        ("login", "POST", "/v1/login", {"login": "ann"}, {}),
        ("claim best available", *CLAIM, {}, AUTH | dict.fromkeys(key, "k1")),
        ("claim specific seat", *CLAIM, {"seat_id": "s9"}, AUTH | dict.fromkeys(key, "k2")),
        ("hold status", *HOLD, None, AUTH),
        ("start charge", *PAY, None, AUTH),
        ("start charge", *PAY, None, AUTH | dict.fromkeys(key, "k3")),
        ("abandon charge", "POST", "/v1/events/e1/holds/h1/charges/c1/abandon", None, AUTH),
        ("release", *RELEASE, None, AUTH),
        ("availability", "GET", "/v1/events/e1", None, AUTH),
        ("free seats", "GET", "/v1/events/e1/seats?limit=20", None, AUTH),
    ]
    assert API.claim().named("claim again best available") == Call(
        "claim again best available", *CLAIM, {}, AUTH
    )
    assert dict(BuyerApi("e1").claim().headers) == {}  # not logged in: no Authorization


def test_minted_keys_only_where_the_caller_gave_none() -> None:
    keys = iter(["m1", "m2"])
    api = BuyerApi("e1", "tok", mint_key=lambda: next(keys))
    assert api.claim().headers["Idempotency-Key"] == "m1"
    assert api.claim("mine").headers["Idempotency-Key"] == "mine"
    assert api.pay("h1").headers["Idempotency-Key"] == "m2"
    assert "Idempotency-Key" not in api.hold("h1").headers


@pytest.mark.parametrize(
    ("status", "raw", "code", "body"),
    [
        (201, b'{"hold_id": "h1"}', "201", {"hold_id": "h1"}),
        (200, b"", "200", {}),
        (409, b'{"error": {"code": "sold_out"}}', "sold_out", {"error": {"code": "sold_out"}}),
        (404, b'{"error": "nope"}', "404", {"error": "nope"}),
        (409, b"<html>conflict</html>", "409", {}),
        (400, b"[1, 2]", "400", {}),
        (503, b"<html>bad gateway</html>", "503", {}),
        (503, b'{"error": {"code": "unavailable"}}', "503", {"error": {"code": "unavailable"}}),
    ],
)
def test_answer_of_status_and_bytes(status: int, raw: bytes, code: str, body: Any) -> None:
    assert Answer.of(status, raw) == Answer(status, code, body)


def test_transport_error_answer() -> None:
    assert Answer.transport_error(TimeoutError()) == Answer(0, "transport:TimeoutError", {})
    assert Answer.transport_error(None).code == "transport:NoneType"


def test_could_come_back() -> None:
    assert not buyer.could_come_back({"free": 0, "held": 0, "blocked": 0})
    assert buyer.could_come_back({"free": 0, "held": 2, "blocked": 0})
    assert buyer.could_come_back({"free": 0, "held": 0, "blocked": 1})


def test_pays_again_after_a_decline() -> None:
    script = Script(
        hold("RESERVED"),
        ok(202, charge_id="c1"),
        hold("RESERVED", in_flight=True),
        hold("RESERVED"),  # declined: no charge in flight
        ok(202, charge_id="c2"),
        hold("CONFIRMED", seat="s7"),
    )
    end = script.run(
        buyer.pay_until_decided(API, "h1", deadline=9, clock=script.clock, tries_max=3, poll_s=0.25)
    )
    assert end == Ended("CONFIRMED", "s7", "h1")
    assert script.sent == [HOLD, PAY, HOLD, HOLD, PAY, HOLD]
    assert script.pauses == [0.25, 0.25, 0.25]


def test_stops_paying_after_tries_max() -> None:
    script = Script(hold("RESERVED"), ok(202), hold("RESERVED"), ok(202), hold("RESERVED"))
    journey = buyer.pay_until_decided(
        API, "h1", deadline=9, clock=script.clock, tries_max=2, poll_s=0.1
    )
    assert script.run(journey) == Ended(buyer.GAVE_UP_PAYING, hold_id="h1")
    assert script.sent == [HOLD, PAY, HOLD, PAY, HOLD]


def test_a_charge_in_flight_counts_as_a_try() -> None:
    script = Script(hold("RESERVED"))
    journey = buyer.pay_until_decided(
        API, "h1", deadline=9, clock=script.clock, tries_max=1, paying=True, poll_s=1
    )
    assert script.run(journey).state == buyer.GAVE_UP_PAYING
    assert script.sent == [HOLD]


def test_keep_waiting_polls_past_the_last_try_until_the_hold_ends() -> None:
    script = Script(hold("RESERVED"), ok(202), hold("RESERVED"), hold("EXPIRED"))
    journey = buyer.pay_until_decided(
        API, "h1", deadline=9, clock=script.clock, tries_max=1, poll_s=0.2, keep_waiting=True
    )
    assert script.run(journey) == Ended("EXPIRED", "s1", "h1")
    assert script.sent == [HOLD, PAY, HOLD, HOLD]


def test_gives_up_waiting_at_the_deadline() -> None:
    script = Script(*[hold("RESERVED", in_flight=True)] * 3)
    journey = buyer.pay_until_decided(
        API, "h1", deadline=1.0, tries_max=3, poll_s=0.4, clock=script.clock
    )
    assert script.run(journey) == Ended(buyer.GAVE_UP_WAITING, hold_id="h1")
    assert script.sent == [HOLD] * 3  # at 0.0, 0.4 and 0.8
    assert script.now == pytest.approx(1.2)


def test_patience_without_a_deadline_waits_from_when_it_starts() -> None:
    script = Script(*[hold("RESERVED", in_flight=True)] * 2)
    script.now = 50.0
    wait = Patience(poll_s=0.5, wait_s=1.0, clock=script.clock)
    assert script.run(wait.decide(API, "h1")).state == buyer.GAVE_UP_WAITING
    assert script.sent == [HOLD] * 2


def test_pays() -> None:
    script = Script(hold("RESERVED"), ok(202), hold("CONFIRMED"))
    trip = script.run(buyer.pays(API, "h1", patient(script)))
    assert trip == Trip([Ended("CONFIRMED", "s1", "h1")])
    assert script.sent == [HOLD, PAY, HOLD]


def test_abandons_the_charge_and_pays_again() -> None:
    script = Script(ok(202, charge_id="c1"), ok(abandoned=True), hold("RESERVED"), ok(202))
    script.answers += [hold("CONFIRMED")]
    trip = script.run(buyer.abandons_and_pays_again(API, "h1", patient(script)))
    assert trip == Trip([Ended("CONFIRMED", "s1", "h1")])
    abandon = ("POST", "/v1/events/e1/holds/h1/charges/c1/abandon")
    assert script.sent == [PAY, abandon, HOLD, PAY, HOLD]


def test_abandons_nothing_when_the_charge_was_refused() -> None:
    script = Script(refused(409, "hold_expired"), hold("EXPIRED"))
    trip = script.run(buyer.abandons_and_pays_again(API, "h1", patient(script)))
    assert trip.ended == [Ended("EXPIRED", "s1", "h1")]
    assert script.sent == [PAY, HOLD]


def regrab(api: BuyerApi, hold_id: str) -> Callable[[], Journey[Answer]]:
    return lambda: buyer.ask(api.claim(f"regrab-{hold_id}"))


def test_drops_the_seat_while_paying_and_grabs_another() -> None:
    script = Script(
        ok(202), ok(state="RELEASED"), ok(201, hold_id="h2"), hold("CONFIRMED", seat="s2")
    )
    trip = script.run(buyer.drops_and_grabs(API, "h1", patient(script), regrab(API, "h1")))
    assert trip == Trip([Ended("RELEASED", hold_id="h1"), Ended("CONFIRMED", "s2", "h2")])
    assert script.sent == [PAY, RELEASE, CLAIM, ("GET", "/v1/events/e1/holds/h2")]
    assert script.calls[2].headers["Idempotency-Key"] == "regrab-h1"


def test_drops_the_seat_and_finds_none_left() -> None:
    script = Script(ok(202), ok(state="RELEASED"), refused(409, "sold_out"))
    trip = script.run(buyer.drops_and_grabs(API, "h1", patient(script), regrab(API, "h1")))
    assert trip == Trip([Ended("RELEASED", hold_id="h1")])
    assert script.sent == [PAY, RELEASE, CLAIM]


def test_releases_and_walks_away() -> None:
    script = Script(ok(state="RELEASED"))
    assert script.run(buyer.releases(API, "h1")) == Trip([Ended("RELEASED", hold_id="h1")])
    assert script.sent == [RELEASE]
    idle = Script()
    assert idle.run(buyer.walks_away("h1")) == Trip([Ended(buyer.WALKED_AWAY, hold_id="h1")])
    assert idle.calls == [] and idle.pauses == []


def test_two_tabs_tab_2_claims_while_tab_1_is_idle() -> None:
    script = Script(ok(201, hold_id="h2"), refused(409, "hold_released"), hold("CONFIRMED"))
    trip = script.run(buyer.two_tabs(API, "h1", patient(script), Rolls(0.1)))
    assert trip == Trip([Ended("RELEASED", hold_id="h1"), Ended("CONFIRMED", "s1", "h2")])
    assert script.sent == [CLAIM, PAY, ("GET", "/v1/events/e1/holds/h2")]
    assert script.calls[0].name == buyer.TAB_2_CLAIM


def test_two_tabs_a_charge_accepted_on_the_replaced_hold_is_a_surprise() -> None:
    script = Script(ok(201, hold_id="h2"), ok(202, charge_id="c1"), hold("CONFIRMED"))
    trip = script.run(buyer.two_tabs(API, "h1", patient(script), Rolls(0.1)))
    assert trip.surprises == ["charge accepted on hold h1, replaced by tab 2"]


def test_two_tabs_tab_2_refused_while_tab_1_pays() -> None:
    script = Script(ok(202, charge_id="c1"), refused(409, "charge_in_flight"), hold("RESERVED"))
    wait = patient(script, tries_max=1)  # tab 1's charge is the one try: no second charge
    trip = script.run(buyer.two_tabs(API, "h1", wait, Rolls(0.9)))
    assert trip == Trip([Ended(buyer.GAVE_UP_PAYING, hold_id="h1")])
    assert script.sent == [PAY, CLAIM, HOLD]


def test_two_tabs_tab_1_bought_before_tab_2_claimed() -> None:
    script = Script(ok(202), ok(201, hold_id="h2"), hold("CONFIRMED", seat="s1"))
    script.answers += [hold("CONFIRMED", seat="s2")]
    trip = script.run(buyer.two_tabs(API, "h1", patient(script), Rolls(0.9)))
    assert trip == Trip([Ended("CONFIRMED", "s1", "h1"), Ended("CONFIRMED", "s2", "h2")])
    assert script.sent == [PAY, CLAIM, HOLD, ("GET", "/v1/events/e1/holds/h2")]


def test_two_tabs_tab_1_still_reserved_after_tab_2_claimed_is_a_surprise() -> None:
    script = Script(ok(202), ok(201, hold_id="h2"), hold("RESERVED"), hold("CONFIRMED"))
    trip = script.run(buyer.two_tabs(API, "h1", patient(script), Rolls(0.9)))
    assert trip.surprises == ["hold h1 still RESERVED after tab 2 claimed"]
    assert trip.ended == [Ended("CONFIRMED", "s1", "h2")]


def test_claim_any_picks_a_seat_from_the_hint_or_the_best_available() -> None:
    script = Script(ok(seats=["s7"]), ok(201, hold_id="h1"))
    assert script.run(buyer.claim_any(API, Rolls(0.1), 0.5)).status == 201
    assert [c.name for c in script.calls] == ["free seats", "claim specific seat"]
    assert script.calls[1].json == {"seat_id": "s7"}
    empty = Script(ok(seats=[]), refused(409, "sold_out"))
    assert empty.run(buyer.claim_any(API, Rolls(0.1), 0.5, "claim again")).code == "sold_out"
    assert [c.name for c in empty.calls] == ["free seats", "claim again best available"]
    best = Script(ok(201, hold_id="h1"))
    best.run(buyer.claim_any(API, Rolls(0.9), 0.5))
    assert [c.name for c in best.calls] == ["claim best available"]


async def test_drive_async_sends_and_pauses() -> None:
    answers = [hold("RESERVED", in_flight=True), hold("CONFIRMED")]
    sent: list[Call] = []

    async def send(call: Call) -> Answer:
        sent.append(call)
        return answers.pop(0)

    journey = buyer.pay_until_decided(API, "h1", deadline=float("inf"), tries_max=3, poll_s=0)
    assert await drive_async(journey, send) == Ended("CONFIRMED", "s1", "h1")
    assert [c.name for c in sent] == ["hold status", "hold status"]


def test_a_driver_that_sends_no_answer_is_caught() -> None:
    journey = buyer.ask(API.hold("h1"))
    assert next(journey) == API.hold("h1")
    with pytest.raises(TypeError, match="hold status"):
        journey.send(None)


# -- the demo's T0 burst ------------------------------------------------------------------------


class Sale:
    """The stack's side of a T0 burst: claims answered in the order they are sent, from `seats`
    free seats, a party whole or sold out (as the claim script answers)."""

    def __init__(self, seats: int) -> None:
        self.free = seats
        self.sent: list[Call] = []

    async def send(self, call: Call) -> Answer:
        self.sent.append(call)
        wanted = int((call.json or {}).get("quantity", 1))
        if wanted > self.free:
            return Answer(409, "sold_out", {})
        self.free -= wanted
        seats = [f"s{self.free + i}" for i in range(wanted)]
        return Answer(201, "201", {"hold_id": f"h{len(self.sent)}", "seat_ids": seats})


async def t0_burst(clients: int, seats: int) -> tuple[list[Call], Burst]:
    sale = Sale(seats)
    fans = {f"fan{i}": BuyerApi("e1", f"tok{i}") for i in range(clients)}
    with Progress(disable=True) as progress:
        # T0 is 200 ms away: every client is waiting when the sale opens, as in the demo.
        result = await burst(
            sale.send, fans, 1_000_200, 1_000_000, [f"s{i}" for i in range(seats)], progress
        )
    return sale.sent, result


async def test_parties_are_sent_at_t0_as_often_as_they_are_in_the_crowd() -> None:
    """Who is sent first at T0 must not depend on what they ask for. A timer per client released
    the crowd in the order of the nanoseconds each took to set its timer, a few less for the
    single-seat clients: they went first and took every seat."""
    sent, result = await t0_burst(2_000, 80)
    names = [c.name for c in sent]
    share = names.count("claim a party") / len(names)
    first = names[:200]
    assert 0.12 < share < 0.22
    assert first.count("claim a party") / len(first) > share / 2, (share, first)
    assert result.asked[PARTY] == names.count("claim a party")
    assert 0 < result.won[PARTY] == result.party_holds
    assert result.party_seats >= 2 * result.party_holds
    assert sum(result.parties.values()) == len(result.winners)
    assert sum(n * k for n, k in result.parties.items()) == 80


async def test_the_t0_order_is_the_seeded_shuffle_not_the_timers() -> None:
    first, _ = await t0_burst(1_000, 20)
    again, _ = await t0_burst(1_000, 20)
    assert [c.headers["Idempotency-Key"] for c in first] == [
        c.headers["Idempotency-Key"] for c in again
    ]
