"""The load `onsale chaos` holds while processes die: the demo's T0 burst on one event and its
winners' journeys (loadtest/demo/scenario.py), then buyers arriving at a steady rate on the flow
events, each claiming and going through one of the same journeys (pay, pay again after a
decline, walk away, two tabs, drop and grab, release).

Every request goes through `Crowd.send`, which does what a patient client does during an outage:
no answer, or a 5xx, and it sends the same request again (same Idempotency-Key, so a claim or a
charge that did happen is answered as it was) until it gets an answer or its patience runs out.
Every answer is counted by code, and every hold a buyer read CONFIRMED is remembered with its
seats: the checks look for each of them in the ledger."""

import asyncio
import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace

import aiohttp
from itsdangerous import URLSafeTimedSerializer
from rich.progress import Progress

from loadtest.demo.scenario import (
    Burst,
    DemoConfig,
    aiohttp_send,
    burst,
    buyers,
    logged_in_fans,
    winner_journey,
)
from loadtest.devstack.buyer import Answer, BuyerApi, Call, drive_async

RETRIED = (0, 502, 503, 504)  # no answer, or the server could not answer now
RETRY_PAUSE_S = 0.25
PATIENCE_S = 30.0  # a client sends the same request again for this long
FLOW_BUYERS_MAX = 400  # buyers in their journey at once; an arrival beyond is not let in
PARTY_SHARE = 0.1  # flow buyers asking for two seats


def answer_label(answer: Answer) -> str:
    """How the load table counts an answer: the refusal's code, or a 5xx with its code."""
    error = answer.body.get("error")
    if answer.status >= 500 and isinstance(error, dict) and error.get("code"):
        return f"{answer.status} {error['code']}"
    return answer.code


@dataclass
class Seen:
    """What the clients sent and were told."""

    requests: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    given_up: int = 0  # requests never answered within the client's patience
    told: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)  # CONFIRMED read
    journeys: Counter[str] = field(default_factory=Counter)  # what the buyers did
    arrivals: int = 0  # flow buyers who came
    turned_away: int = 0  # flow arrivals beyond FLOW_BUYERS_MAX

    @property
    def server_errors(self) -> int:
        return sum(n for code, n in self.answers.items() if code[:1] == "5")

    @property
    def internal_errors(self) -> int:
        """5xx other than 503 (a 503 is the engine's truthful "not now", with Retry-After)."""
        return sum(n for code, n in self.answers.items() if code[:1] == "5" and code[:3] != "503")


class Crowd:
    """Every client's transport: one aiohttp session, retries through outages, the counts."""

    def __init__(self, http: aiohttp.ClientSession, patience_s: float = PATIENCE_S) -> None:
        self.raw = aiohttp_send(http)
        self.patience_s = patience_s
        self.seen = Seen()

    async def send(self, call: Call) -> Answer:
        deadline = time.monotonic() + self.patience_s
        while True:
            try:
                answer = await self.raw(call)
            except (aiohttp.ClientError, TimeoutError) as exc:
                answer = Answer.transport_error(exc)
            self.seen.requests += 1
            self.seen.answers[answer_label(answer)] += 1
            if answer.status not in RETRIED:
                break
            if time.monotonic() > deadline:
                self.seen.given_up += 1
                break
            await asyncio.sleep(RETRY_PAUSE_S)
        self._note(call, answer)
        return answer

    def _note(self, call: Call, answer: Answer) -> None:
        """Remember a hold its buyer read CONFIRMED (ADR 0016: told only once in the ledger)."""
        if call.name != "hold status" or answer.status != 200:
            return
        if answer.body.get("state") == "CONFIRMED":
            parts = call.path.split("/")  # /v1/events/{event}/holds/{hold}
            seats = frozenset(str(s) for s in answer.body.get("seat_ids") or ())
            self.seen.told[(parts[3], parts[5])] = seats


def keyed(api: BuyerApi) -> BuyerApi:
    """The buyer sends an Idempotency-Key of its own with every claim and charge, so that a
    request sent again after an outage is a replay, never a second claim or charge."""
    return replace(api, mint_key=lambda: uuid.uuid4().hex)


@dataclass(frozen=True)
class Sale:
    """The burst event and what its crowd is told; the flow events and their buyers' pace."""

    burst_event: str
    burst_seats: list[str]
    clients: int
    flow_events: list[str]
    flow_rate_per_s: float
    hold_ttl_ms: int
    quarantine_ms: int
    token_secret: str
    seed: int


async def t0_burst(
    crowd: Crowd, sale: Sale, t0_ms: int, server_now_ms: int, progress: Progress
) -> Burst:
    """The demo's T0 burst (every client presses "buy" at T0), then its winners' journeys."""
    fans = {
        login: keyed(api)
        for login, api in logged_in_fans(sale.burst_event, sale.token_secret, sale.clients).items()
    }
    result = await burst(
        crowd.send, fans, t0_ms, server_now_ms, sale.burst_seats, progress, sale.seed
    )
    cfg = DemoConfig(seed=sale.seed, hold_ttl_ms=sale.hold_ttl_ms, quarantine_ms=sale.quarantine_ms)
    kinds = await buyers(crowd.send, fans, result.winners, cfg, progress)
    crowd.seen.journeys.update({f"T0 winner: {k}": n for k, n in kinds.items()})
    return result


def flow_buyer_api(event_id: str, token_secret: str, login: str) -> BuyerApi:
    """A buyer logged in as `login` (a token signed as POST /v1/login signs it)."""
    signer = URLSafeTimedSerializer(token_secret, salt="onsale-login")
    return keyed(BuyerApi(event_id, str(signer.dumps({"l": login}))))


async def flow_buyer(crowd: Crowd, sale: Sale, n: int, rng: random.Random) -> None:
    """One arrival: claims on its flow event (best available, or two seats), then one of the
    winners' journeys."""
    event_id = sale.flow_events[n % len(sale.flow_events)]
    api = flow_buyer_api(event_id, sale.token_secret, f"flow{n}")
    party = 2 if rng.random() < PARTY_SHARE else 1
    roll = rng.random()
    claim = await crowd.send(api.claim(f"flow-{n}", party=party))
    if claim.status not in (200, 201):  # 200: the replay of a claim whose answer was lost
        crowd.seen.journeys[f"flow: claim answered {claim.code}"] += 1
        return
    deadline = time.monotonic() + (sale.hold_ttl_ms + sale.quarantine_ms) / 1000 + 20
    kind, journey = winner_journey(api, str(claim.body["hold_id"]), roll, deadline)
    await drive_async(journey, crowd.send)
    crowd.seen.journeys[f"flow: {kind}"] += 1


async def flow(crowd: Crowd, sale: Sale, until: float, progress: Progress) -> None:
    """Buyers arrive (Poisson, `flow_rate_per_s`) until `until` (monotonic); then the journeys
    in hand are finished."""
    rng = random.Random(sale.seed * 7919 + 1)
    started = time.monotonic()
    task_id = progress.add_task("purchase flow: seconds of load", total=round(until - started))
    tasks: set[asyncio.Task[None]] = set()
    next_at = started
    while time.monotonic() < until:
        crowd.seen.arrivals += 1
        if len(tasks) < FLOW_BUYERS_MAX:
            task = asyncio.create_task(flow_buyer(crowd, sale, crowd.seen.arrivals, rng))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        else:
            crowd.seen.turned_away += 1
        next_at += rng.expovariate(sale.flow_rate_per_s)
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        progress.update(task_id, completed=round(time.monotonic() - started))
    progress.update(task_id, completed=round(until - started))
    if tasks:
        ending = progress.add_task("purchase flow: journeys finishing", total=len(tasks))
        for done in asyncio.as_completed(list(tasks)):
            await done
            progress.advance(ending)
