"""What the demo (`python -m loadtest.demo.main`) plays: the event (its seat map and price), the
fans logged in before T0 who all press "buy" at T0, what each winner then does, and the fans told
"sold out" who keep trying while seats may come back. The stack, the ledger and the report live in
loadtest/demo/main.py, loadtest/demo/ledger.py and loadtest/demo/report.py."""

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from itsdangerous import URLSafeTimedSerializer
from rich.progress import Progress

from loadtest.devstack import buyer
from loadtest.devstack.buyer import (
    Answer,
    AsyncSend,
    BuyerApi,
    Call,
    Journey,
    Patience,
    Trip,
    drive_async,
)

PRICE = 4500


@dataclass(frozen=True)
class DemoConfig:
    clients: int = 10_000
    seats: int = 80
    hold_ttl_ms: int = 10_000  # long enough for the whole burst to be answered first
    quarantine_ms: int = 4_000
    seed: int = 2026
    connections_max: int = 200  # HTTP connections shared by the simulated clients
    api_workers: int = 2


@dataclass
class Burst:
    statuses: Counter[str] = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)
    last_seat_ms: float = 0.0
    all_answered_ms: float = 0.0
    winners: list[tuple[str, str]] = field(default_factory=list)  # (login, hold_id)
    parties: Counter[int] = field(default_factory=Counter)  # winning holds by seats held
    asked: Counter[str] = field(default_factory=Counter)  # claims by what they ask for
    won: Counter[str] = field(default_factory=Counter)  # winning claims by what they asked for

    @property
    def party_holds(self) -> int:
        """Winning holds of more than one seat."""
        return sum(k for n, k in self.parties.items() if n > 1)

    @property
    def party_seats(self) -> int:
        """Seats the winning parties took."""
        return sum(n * k for n, k in self.parties.items() if n > 1)


# What a client asks for at T0, as the report names it.
ONE_BEST, ONE_PICKED, PARTY = "one seat, best available", "one seat they picked", "a party of 2-4"


@dataclass(frozen=True)
class T0Claim:
    """One client's press of "buy" at T0: a seat it picked, or `party` best seats."""

    n: int
    login: str
    api: BuyerApi
    seat_id: str | None = None
    party: int = 1

    @property
    def kind(self) -> str:
        if self.seat_id:
            return ONE_PICKED
        return PARTY if self.party > 1 else ONE_BEST


def t0_claims(fans: dict[str, BuyerApi], seats: list[str], seed: int) -> list[T0Claim]:
    """What each client asks for at T0, in the order they press "buy": a fifth a seat they
    picked, a sixth a party of 2 to 4, the rest one seat. Decided up front and then shuffled, so
    that a client's place in the crowd does not depend on what it asks for."""
    rng = random.Random(seed)
    plan = []
    for n, (login, api) in enumerate(fans.items()):
        roll = rng.random()
        if roll < 0.2:
            plan.append(T0Claim(n, login, api, seat_id=rng.choice(seats)))
        else:
            plan.append(T0Claim(n, login, api, party=rng.randint(2, 4) if roll < 0.37 else 1))
    rng.shuffle(plan)
    return plan


def seat_map(n: int) -> list[dict[str, Any]]:
    """Rows of 20, best rank first: front rows are section A, the rest B."""
    return [
        {
            "seat_id": f"{'A' if i < 40 else 'B'}-r{i // 20 + 1}-s{i % 20 + 1}",
            "rank": i,
            "section": "A" if i < 40 else "B",
        }
        for i in range(n)
    ]


def logged_in_fans(
    event_id: str, token_secret: str, clients: int, name: str = "fan"
) -> dict[str, BuyerApi]:
    """Clients logged in before T0 (tokens signed as POST /v1/login would sign them), as
    `<name>0` to `<name><clients - 1>`."""
    signer = URLSafeTimedSerializer(token_secret, salt="onsale-login")
    return {
        f"{name}{i}": BuyerApi(event_id, str(signer.dumps({"l": f"{name}{i}"})))
        for i in range(clients)
    }


def aiohttp_send(http: aiohttp.ClientSession) -> AsyncSend:
    """The buyers' transport (aiohttp: httpx's pool cannot feed 10k clients)."""

    async def send(call: Call) -> Answer:
        async with http.request(call.method, call.path, json=call.json, headers=call.headers) as r:
            return Answer.of(r.status, await r.read())

    return send


async def burst(
    send: AsyncSend,
    fans: dict[str, BuyerApi],
    t0_ms: int,
    server_now_ms: int,
    seats: list[str],
    progress: Progress,
    seed: int = 1,
) -> Burst:
    """Every client presses "buy" at T0, in the order of `t0_claims`: all wait behind one gate
    that opens at T0 and lets them through in the order they reached it. (A timer per client
    released them in the order of the nanoseconds each took to set its timer, a few less for
    those asking for one seat: the single seats went first and the parties found the event sold
    out.)"""
    res = Burst()
    task_id = progress.add_task("T0 burst: clients answered", total=len(fans))
    gate = asyncio.Event()
    start_at = time.monotonic() + (t0_ms - server_now_ms) / 1000  # T0 by this process's clock

    async def one(c: T0Claim) -> None:
        res.asked[c.kind] += 1
        await gate.wait()
        began = time.monotonic()
        try:
            r = await send(c.api.claim(f"t0-{c.n}", c.seat_id, c.party))
            if r.status == 201:
                res.winners.append((c.login, r.body["hold_id"]))
                res.parties[len(r.body["seat_ids"])] += 1
                res.won[c.kind] += 1
                res.last_seat_ms = max(res.last_seat_ms, (time.monotonic() - start_at) * 1000)
        except (aiohttp.ClientError, TimeoutError) as exc:
            r = Answer.transport_error(exc)
        ended = time.monotonic()
        res.statuses[r.code] += 1
        res.latencies_ms.append((ended - began) * 1000)
        res.all_answered_ms = max(res.all_answered_ms, (ended - start_at) * 1000)
        progress.advance(task_id)

    # Tasks run their first step in the order they are made: each queues at the gate in turn.
    clients = [asyncio.create_task(one(c)) for c in t0_claims(fans, seats, seed)]
    await asyncio.sleep(max(0.0, start_at - time.monotonic()))
    gate.set()
    await asyncio.gather(*clients)
    return res


def winner_journey(
    api: BuyerApi, hold_id: str, roll: float, deadline: float
) -> tuple[str, Journey[Trip]]:
    """(what the report calls it, the journey) for a winner who rolled `roll`."""
    wait = Patience(tries_max=3, poll_s=0.2, deadline=deadline, keep_waiting=True)
    if roll < 0.62:
        return "pays (pays again after a decline)", buyer.pays(api, hold_id, wait)
    if roll < 0.72:
        return "walks away", buyer.walks_away(hold_id)
    if roll < 0.82:
        return "two tabs: tab 1 gives up, tab 2 pays", buyer.abandons_and_pays_again(
            api, hold_id, wait
        )
    if roll < 0.92:
        return "drops the seat while paying, grabs another", buyer.drops_and_grabs(
            api, hold_id, wait, lambda: buyer.ask(api.claim(f"regrab-{hold_id}"))
        )
    return "releases", buyer.releases(api, hold_id)


async def buyers(
    send: AsyncSend,
    fans: dict[str, BuyerApi],
    winners: list[tuple[str, str]],
    cfg: DemoConfig,
    progress: Progress,
) -> Counter[str]:
    rng = random.Random(cfg.seed)
    deadline = time.monotonic() + (cfg.hold_ttl_ms + cfg.quarantine_ms) / 1000 + 15
    kinds: Counter[str] = Counter()
    task_id = progress.add_task("winners paying", total=len(winners))

    async def one(login: str, hold_id: str) -> None:
        kind, journey = winner_journey(fans[login], hold_id, rng.random(), deadline)
        await drive_async(journey, send)
        kinds[kind] += 1
        progress.advance(task_id)

    await asyncio.gather(*(one(login, hold_id) for login, hold_id in winners))
    return kinds


async def second_wave(send: AsyncSend, fans: list[BuyerApi], deadline: float) -> int:
    """Fans told "sold out" keep trying while seats may still come back, and pay."""
    wait = Patience(tries_max=3, poll_s=0.2, deadline=deadline, keep_waiting=True)
    sold, n = 0, 0
    while time.monotonic() < deadline and n < len(fans):
        fan = fans[n]
        a = (await send(fan.availability())).body
        if not a["free"]:
            if not buyer.could_come_back(a):
                break  # nothing left that could come back
            await asyncio.sleep(0.1)
            continue
        n += 1
        r = await send(fan.claim(f"wave-{n}"))
        if r.status == 201:
            end = await drive_async(wait.decide(fan, r.body["hold_id"]), send)
            if end.state == "CONFIRMED":
                sold += 1
    return sold
