"""Locust scenarios against the checkout API; `python -m loadtest.locust.main` runs them headless
against a local stack and checks the invariants afterwards.

    ONSALE_LOCUST_SCENARIO=burst ONSALE_LOCUST_EVENT_ID=e1 \\
        locust -f loadtest/locust/locustfile.py --headless -u 500 -r 500 --run-time 30s --host URL

Scenarios (ONSALE_LOCUST_SCENARIO picks one; the other user class is abstract):
- burst: every user logs in, then waits at a gate that opens once all of them are logged in
  (or, with ONSALE_LOCUST_T0_MS, at that wall-clock instant if it is later); then each sends one
  claim: best available, or a specific seat drawn from the event's best 500 seats. The run ends
  when every user has its answer.
- flow: each user buys one ticket through the whole purchase flow: claim, charge, poll the hold
  to its end state; some abandon a charge and pay again, some use two tabs, some drop the seat
  while paying and grab another, some release, some walk away. Sold-out users come back while
  seats may still return. The run ends when every user is done, or at --run-time.

Clear refusals (409 sold_out, seat_taken, ...) count as successes in Locust's statistics; any
other 4xx, every 5xx and every transport error is a failure. Every answer is counted by request
and code; with ONSALE_LOCUST_REPORT_PATH the counts, spawn timings and what the clients saw are
written there as JSON when Locust quits.

Settings (read once at import): ONSALE_LOCUST_EVENT_ID (required), ONSALE_LOCUST_SCENARIO
(burst), ONSALE_LOCUST_REPORT_PATH (none), ONSALE_LOCUST_SPECIFIC_SHARE (0.3),
ONSALE_LOCUST_T0_MS (0: the gate alone), ONSALE_LOCUST_READY_TIMEOUT_S (120),
ONSALE_LOCUST_POLL_MAX_MS (20000), ONSALE_LOCUST_JOURNEYS_MAX (3), ONSALE_LOCUST_SEED (1)."""

import itertools
import json
import os
import random
import resource
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import gevent
import gevent.event
from locust import FastHttpUser, between, events, task
from locust.env import Environment
from locust.stats import CSV_STATS_INTERVAL_SEC

from loadtest.devstack import buyer
from loadtest.devstack.buyer import Answer, BuyerApi, Call, Journey, Patience, Trip, drive_sync

# Refusals a client can act on: the engine answered, clearly, and changed nothing wrong.
CLEAR_REFUSALS = frozenset(
    {
        "sold_out",
        "not_enough_seats",
        "seat_taken",
        "hold_expired",
        "already_confirmed",
        "charge_in_flight",
    }
)
SEATS_SAMPLE_MAX = 500  # the API's own limit for GET .../seats
POLL_INTERVAL_S = 0.25
CHARGE_TRIES_MAX = 3  # a declined or failed charge is retried with a new charge, this often
REFUSALS_MAX = 20  # a sold-out user comes back this often while seats may still return
# How the report calls an end that the buyer's journeys name otherwise.
OUTCOMES = {buyer.GAVE_UP_WAITING: "still undecided when polling stopped"}


@dataclass(frozen=True)
class LocustSettings:
    event_id: str
    scenario: str
    report_path: str
    specific_share: float
    t0_ms: int
    ready_timeout_s: float
    poll_max_ms: int
    journeys_max: int
    seed: int

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "LocustSettings":
        if not env.get("ONSALE_LOCUST_EVENT_ID"):
            raise RuntimeError("ONSALE_LOCUST_EVENT_ID is required")
        scenario = env.get("ONSALE_LOCUST_SCENARIO", "burst")
        if scenario not in ("burst", "flow"):
            raise RuntimeError(f"ONSALE_LOCUST_SCENARIO must be burst or flow, not {scenario!r}")
        settings = cls(
            event_id=env["ONSALE_LOCUST_EVENT_ID"],
            scenario=scenario,
            report_path=env.get("ONSALE_LOCUST_REPORT_PATH", ""),
            specific_share=float(env.get("ONSALE_LOCUST_SPECIFIC_SHARE", "0.3")),
            t0_ms=int(env.get("ONSALE_LOCUST_T0_MS", "0")),
            ready_timeout_s=float(env.get("ONSALE_LOCUST_READY_TIMEOUT_S", "120")),
            poll_max_ms=int(env.get("ONSALE_LOCUST_POLL_MAX_MS", "20000")),
            journeys_max=int(env.get("ONSALE_LOCUST_JOURNEYS_MAX", "3")),
            seed=int(env.get("ONSALE_LOCUST_SEED", "1")),
        )
        assert 0.0 <= settings.specific_share <= 1.0, "ONSALE_LOCUST_SPECIFIC_SHARE in [0, 1]"
        assert settings.poll_max_ms > 0 and settings.journeys_max > 0
        return settings


SETTINGS = LocustSettings.from_env(os.environ)


@dataclass
class RunState:
    """What this Locust process saw; written to the report when it quits."""

    seat_ids: list[str] = field(default_factory=list)
    answers: dict[str, Counter[str]] = field(default_factory=dict)  # request name -> code -> n
    started_s: float = 0.0  # test start (wall clock)
    spawned_s: float = 0.0  # every user spawned
    users_started: int = 0
    users_arrived: int = 0  # at the gate: logged in, or login failed
    users_done: int = 0
    gate: gevent.event.Event = field(default_factory=gevent.event.Event)
    gate_opening: bool = False
    gate_opened_s: float = 0.0
    sent_after_t0_ms: list[float] = field(default_factory=list)
    answered_after_t0_ms: list[float] = field(default_factory=list)
    journeys: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    confirmed: dict[str, str] = field(default_factory=dict)  # seat -> login that saw it CONFIRMED
    surprises: list[str] = field(default_factory=list)  # the engine accepted what it must refuse
    quitting: bool = False

    def count(self, name: str, code: str) -> None:
        self.answers.setdefault(name, Counter())[code] += 1


RUN = RunState()
USER_NUMBERS = itertools.count()
T = TypeVar("T")


def target_users(environment: Environment) -> int:
    runner = environment.runner
    if runner is not None and runner.target_user_count:
        return int(runner.target_user_count)
    return int(getattr(environment.parsed_options, "num_users", 0) or 0)


def finish(environment: Environment) -> NoReturn:
    """A user is done: it idles until the run ends (a user that stopped would be replaced
    while Locust is still ramping up). The last one to finish ends the run, from a greenlet
    of its own since quitting kills the users."""
    RUN.users_done += 1
    if RUN.users_done >= target_users(environment) and not RUN.quitting:
        RUN.quitting = True
        if environment.runner is not None:
            gevent.spawn_later(0.2, environment.runner.quit)
    gevent.event.Event().wait()  # until the run ends and kills this user
    raise AssertionError("a finished user was woken up")


@events.test_start.add_listener
def load_seats(environment: Environment, **_kwargs: Any) -> None:
    RUN.started_s = time.time()
    url = f"{environment.host}{BuyerApi(SETTINGS.event_id).free_seats(SEATS_SAMPLE_MAX).path}"
    with urllib.request.urlopen(url, timeout=10) as r:
        RUN.seat_ids = list(json.loads(r.read())["seats"])


@events.spawning_complete.add_listener
def spawned(user_count: int, **_kwargs: Any) -> None:
    RUN.spawned_s = time.time()


@events.test_stop.add_listener
def flush_csv(environment: Environment, **_kwargs: Any) -> None:
    """Locust writes its CSV files once a second and not again when it quits: give its writer
    one more turn, or a run's last second is missing from them."""
    if getattr(environment.parsed_options, "csv_prefix", None):
        gevent.sleep(CSV_STATS_INTERVAL_SEC + 0.5)


@events.quitting.add_listener
def write_report(environment: Environment, **_kwargs: Any) -> None:
    if not SETTINGS.report_path:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    report = {
        "scenario": SETTINGS.scenario,
        "event_id": SETTINGS.event_id,
        "users_target": target_users(environment),
        "users_started": RUN.users_started,
        "users_arrived": RUN.users_arrived,
        "users_done": RUN.users_done,
        "cpu_s": usage.ru_utime + usage.ru_stime,  # this Locust process, the whole run
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "spawn_s": RUN.spawned_s - RUN.started_s if RUN.spawned_s else None,
        "gate_opened_s": RUN.gate_opened_s - RUN.started_s if RUN.gate_opened_s else None,
        "last_sent_after_t0_ms": max(RUN.sent_after_t0_ms, default=None),
        "last_answer_after_t0_ms": max(RUN.answered_after_t0_ms, default=None),
        "answers": {name: dict(codes) for name, codes in RUN.answers.items()},
        "journeys": dict(RUN.journeys),
        "outcomes": dict(RUN.outcomes),
        "confirmed_seats": sorted(RUN.confirmed),
        "surprises": RUN.surprises,
    }
    Path(SETTINGS.report_path).write_text(json.dumps(report, indent=2))


def new_key() -> str:
    return uuid.uuid4().hex


class Buyer(FastHttpUser):
    """One logged-in buyer: the calls of the checkout API, each counted by its answer."""

    abstract = True
    network_timeout = 30.0
    connection_timeout = 30.0
    concurrency = 1  # one connection per buyer, opened by its login and kept alive

    def on_start(self) -> None:
        RUN.users_started += 1
        self.number = next(USER_NUMBERS)
        self.rng = random.Random(SETTINGS.seed * 1_000_003 + self.number)
        self.login = f"u{self.number}-{uuid.uuid4().hex[:6]}"
        self.token = ""
        self.api = BuyerApi(SETTINGS.event_id, mint_key=new_key)
        answer = self.send(self.api.login(self.login))
        if answer.status == 200:
            self.token = str(answer.body["token"])
            self.api = replace(self.api, token=self.token)

    def send(self, call: Call) -> Answer:
        with self.client.request(
            call.method,
            call.path,
            name=call.name,
            json=call.json,
            headers=dict(call.headers),
            catch_response=True,
        ) as r:
            status = int(r.status_code or 0)
            if status:
                answer = Answer.of(status, r.content or b"")
            else:
                answer = Answer.transport_error(getattr(r, "error", None))
            RUN.count(call.name, answer.code)
            if status and (status < 300 or answer.code in CLEAR_REFUSALS):
                r.success()
            else:
                r.failure(f"{answer.code} ({status})")
        return answer

    def drive(self, journey: Journey[T]) -> T:
        return drive_sync(journey, self.send, gevent.sleep)


class BurstBuyer(Buyer):
    """Logs in, waits for T0 with everybody else, sends one claim."""

    abstract = SETTINGS.scenario != "burst"
    wait_time = between(0, 0)

    def on_start(self) -> None:
        super().on_start()
        RUN.users_arrived += 1
        if RUN.users_arrived >= target_users(self.environment):
            open_gate()
        if not RUN.gate.wait(timeout=SETTINGS.ready_timeout_s):
            open_gate()  # some users never arrived: go with those that did
            RUN.gate.wait()

    @task
    def claim_at_t0(self) -> None:
        specific = bool(RUN.seat_ids) and self.rng.random() < SETTINGS.specific_share
        RUN.sent_after_t0_ms.append((time.time() - RUN.gate_opened_s) * 1000)
        if not self.token:
            RUN.count("claim", "login_failed")
        elif specific:
            self.send(self.api.claim(seat_id=self.rng.choice(RUN.seat_ids)))
        else:
            self.send(self.api.claim())
        RUN.answered_after_t0_ms.append((time.time() - RUN.gate_opened_s) * 1000)
        finish(self.environment)


def open_gate() -> None:
    """Release every waiting buyer at once (at ONSALE_LOCUST_T0_MS if that is later)."""
    if RUN.gate_opening:
        return
    RUN.gate_opening = True
    delay_s = SETTINGS.t0_ms / 1000 - time.time()
    if delay_s > 0:
        gevent.sleep(delay_s)
    RUN.gate_opened_s = time.time()
    RUN.gate.set()


class FlowBuyer(Buyer):
    """Buys one ticket through the whole purchase flow, in one of several ways."""

    abstract = SETTINGS.scenario != "flow"
    wait_time = between(0.2, 1.0)

    # (journey, share): what a buyer does once it holds a seat.
    JOURNEYS = (
        ("pays", 0.55),
        ("abandons the charge, pays again", 0.15),
        ("two tabs", 0.10),
        ("drops the seat while paying, grabs another", 0.08),
        ("releases, comes back", 0.07),
        ("walks away", 0.05),
    )

    def on_start(self) -> None:
        super().on_start()
        self.journeys_left = SETTINGS.journeys_max
        self.refusals = 0
        self.bought = False
        self.patience = Patience(
            tries_max=CHARGE_TRIES_MAX, poll_s=POLL_INTERVAL_S, wait_s=SETTINGS.poll_max_ms / 1000
        )

    def done(self) -> NoReturn:
        finish(self.environment)

    def claim_any(self, name: str = "claim") -> Journey[Answer]:
        return buyer.claim_any(self.api, self.rng, SETTINGS.specific_share, name)

    def trip(self, kind: str, hold_id: str) -> Journey[Trip]:
        api, wait = self.api, self.patience
        if kind == "pays":
            return buyer.pays(api, hold_id, wait)
        if kind == "abandons the charge, pays again":
            return buyer.abandons_and_pays_again(api, hold_id, wait)
        if kind == "two tabs":
            return buyer.two_tabs(api, hold_id, wait, self.rng)
        if kind == "drops the seat while paying, grabs another":
            return buyer.drops_and_grabs(api, hold_id, wait, lambda: self.claim_any("claim again"))
        if kind == "releases, comes back":
            return buyer.releases(api, hold_id)
        return buyer.walks_away(hold_id)

    def ended(self, state: str, seat_id: str) -> None:
        RUN.outcomes[state] += 1
        if state == "CONFIRMED":
            self.bought = True
            other = RUN.confirmed.setdefault(seat_id, self.login)
            if other != self.login:
                RUN.surprises.append(f"seat {seat_id} confirmed to {other} and to {self.login}")

    @task
    def journey(self) -> None:
        if not self.token or self.journeys_left <= 0:
            self.done()
        first = self.drive(self.claim_any())
        if first.status != 201:
            self.after_refusal(first)
            return
        self.journeys_left -= 1
        hold_id = str(first.body["hold_id"])
        kind = self.rng.choices(
            [k for k, _ in self.JOURNEYS], weights=[w for _, w in self.JOURNEYS]
        )[0]
        RUN.journeys[kind] += 1
        trip = self.drive(self.trip(kind, hold_id))
        RUN.surprises.extend(trip.surprises)
        for end in trip.ended:
            self.ended(OUTCOMES.get(end.state, end.state), end.seat_id)
        if kind == "walks away" or self.bought:
            self.done()

    def after_refusal(self, answer: Answer) -> None:
        """Sold out or seat taken: come back later while seats may still return; anything
        else (a failure, already counted, or a charge of ours still in flight): stop."""
        self.refusals += 1
        if answer.code not in ("sold_out", "not_enough_seats", "seat_taken") or (
            self.refusals > REFUSALS_MAX
        ):
            RUN.outcomes[f"stopped after {answer.code}"] += 1
            self.done()
        if answer.code == "sold_out":
            if not buyer.could_come_back(self.send(self.api.availability()).body):
                RUN.outcomes["sold out"] += 1
                self.done()
            gevent.sleep(self.rng.uniform(0.5, 1.5))
