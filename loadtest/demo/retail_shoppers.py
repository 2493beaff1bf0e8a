"""The retail demo's shoppers (loadtest/demo/retail.py runs them): when each comes, what it puts
in its cart (1 to 3 lines; most let the location rule choose the warehouse, some name one),
what it does once the cart is held (pays, pays again after a decline, abandons the cart, empties
it, pays in its last moments, pays from two tabs, drops it while paying), and the receipts read
back at the end. Every request goes over HTTP, as the buyer journeys of
loadtest/devstack/buyer.py."""

import asyncio
import random
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from rich.progress import Progress

from loadtest.demo.retail_stock import CATALOGUE, LOCATIONS
from loadtest.devstack import buyer
from loadtest.devstack.buyer import (
    Answer,
    AsyncSend,
    BuyerApi,
    Call,
    Journey,
    Patience,
    Pause,
    Trip,
)

PAYS = "pays (again after a decline)"
ABANDONS = "abandons the cart (it expires)"
EMPTIES = "empties the cart (release)"
LAST_MOMENT = "pays in the cart's last moments"
TWO_TABS = "two tabs: gives up a payment, pays again"
DROPS = "drops the cart while paying, fills another"
RESELLER = "asks for more than the per-login cap"
JOURNEYS = ((0.57, PAYS), (0.12, ABANDONS), (0.06, EMPTIES), (0.11, LAST_MOMENT),
            (0.06, TWO_TABS), (0.05, DROPS), (0.03, RESELLER))  # fmt: skip
CLAIMS_MAX = 3  # a shopper told a line ran out changes the cart and tries again, this often
NAMED_SHARE = 0.2  # lines that name a warehouse

Line = tuple[str, int, str]  # (sku, quantity, location or "": the event's rule)


@dataclass(frozen=True)
class Shopper:
    n: int
    login: str
    api: BuyerApi
    lines: tuple[Line, ...]
    journey: str
    arrive_s: float  # after the sale opened


def cart_lines(rng: random.Random) -> tuple[Line, ...]:
    """1 to 3 lines of distinct parts, by popularity; a fifth of them name a warehouse."""
    count = rng.choices((1, 2, 3), weights=(50, 35, 15))[0]
    parts, weights = list(CATALOGUE), [p.popularity for p in CATALOGUE]
    lines = []
    for _ in range(count):
        part = rng.choices(parts, weights=weights)[0]
        i = parts.index(part)
        del parts[i], weights[i]
        location = rng.choice(LOCATIONS) if rng.random() < NAMED_SHARE else ""
        lines.append((part.sku, rng.choice(part.quantities), location))
    return tuple(lines)


def plan(fans: dict[str, BuyerApi], arrival_s: float, cap: int, seed: int) -> list[Shopper]:
    """Every shopper's cart, journey and arrival, drawn up front from one seeded generator."""
    rng = random.Random(seed)
    shoppers = []
    for n, (login, api) in enumerate(fans.items()):
        journey = rng.choices([j for _s, j in JOURNEYS], weights=[s for s, _j in JOURNEYS])[0]
        lines = ((CATALOGUE[1].sku, cap + 4, ""),) if journey == RESELLER else cart_lines(rng)
        shoppers.append(Shopper(n, login, api, lines, journey, rng.uniform(0, arrival_s)))
    return shoppers


def as_body(lines: tuple[Line, ...]) -> list[dict[str, Any]]:
    return [
        {"sku": sku, "quantity": n, **({"location": loc} if loc else {})} for sku, n, loc in lines
    ]


def relax(lines: tuple[Line, ...], sku: str) -> tuple[Line, ...]:
    """The cart after `sku` ran out: from any warehouse if it named one, else without it."""
    return tuple(
        (s, n, "") if s == sku and loc else (s, n, loc) for s, n, loc in lines if s != sku or loc
    )


@dataclass
class Visit:
    """One shopper's visit: its last claim's answer, the claims it sent, what followed."""

    claim: Answer
    claims: int = 1
    asked: tuple[Line, ...] = ()  # the cart as last asked for
    trip: Trip = field(default_factory=Trip)


def fill_cart(s: Shopper) -> Journey[Visit]:
    """Claim the cart; a line that ran out is asked from any warehouse, or else dropped."""
    lines, tries = s.lines, 0
    while True:
        tries += 1
        claim = yield from buyer.ask(s.api.cart(as_body(lines), key=f"cart-{s.n}-{tries}"))
        sku = str(claim.body.get("error", {}).get("sku", ""))
        if claim.code != "insufficient_stock" or tries == CLAIMS_MAX or not relax(lines, sku):
            return Visit(claim, tries, lines)
        lines = relax(lines, sku)


def visit(s: Shopper, patience: Patience, rng: random.Random) -> Journey[Visit]:
    v = yield from fill_cart(s)
    if v.claim.status != 201:
        return v
    hold_id, expires_ms = str(v.claim.body["hold_id"]), int(v.claim.body["expires_ms"])
    api = s.api
    if s.journey == ABANDONS:
        v.trip = yield from buyer.walks_away(hold_id)
    elif s.journey == EMPTIES:
        v.trip = yield from buyer.releases(api, hold_id)
    elif s.journey == TWO_TABS:
        v.trip = yield from buyer.abandons_and_pays_again(api, hold_id, patience)
    elif s.journey == DROPS:
        held = tuple((x["sku"], int(x["quantity"]), x["location"]) for x in v.claim.body["lines"])
        again = api.cart(as_body(held), key=f"again-{s.n}")
        v.trip = yield from buyer.drops_and_grabs(api, hold_id, patience, lambda: buyer.ask(again))
    else:
        if s.journey == LAST_MOMENT:  # pays 0.1-1 s before the deadline: a race with it
            yield Pause(max(0.0, expires_ms / 1000 - time.time() - rng.uniform(0.1, 1.0)))
        v.trip = yield from buyer.pays(api, hold_id, patience)
    return v


@dataclass
class Shopping:
    """What the crowd did and was answered."""

    journeys: Counter[str] = field(default_factory=Counter)  # carts held, by what followed
    refused: Counter[str] = field(default_factory=Counter)  # visits whose last claim failed
    retried: int = 0  # visits that changed their cart after a line ran out, and claimed again
    holds: list[tuple[str, str]] = field(default_factory=list)  # (login, hold_id) of every cart
    journey_of: dict[str, str] = field(default_factory=dict)  # login -> what it planned
    lines: Counter[str] = field(default_factory=Counter)  # held lines: named, or rule's choice
    answers: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    latencies_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    def record(self, s: Shopper, v: Visit) -> None:
        self.journey_of[s.login] = s.journey
        self.retried += v.claims > 1
        if v.claim.status != 201:
            self.refused[v.claim.code] += 1
            return
        self.journeys[s.journey] += 1
        named = {sku for sku, _n, loc in v.asked if loc}
        for x in v.claim.body["lines"]:
            self.lines[f"{'named' if x['sku'] in named else 'rule chose'} {x['location']}"] += 1
        ids = [str(v.claim.body["hold_id"])] + [e.hold_id for e in v.trip.ended]
        self.holds += [(s.login, h) for h in dict.fromkeys(ids) if h]

    def timed(self, send: AsyncSend) -> AsyncSend:
        """`send`, counting every answer and its latency by the request's name."""

        async def one(call: Call) -> Answer:
            began = time.monotonic()
            try:
                answer = await send(call)
            except (aiohttp.ClientError, TimeoutError) as exc:
                answer = Answer.transport_error(exc)
            self.latencies_ms[call.name].append((time.monotonic() - began) * 1000)
            self.answers[call.name][answer.code] += 1
            return answer

        return one


async def shop(
    send: AsyncSend, shoppers: list[Shopper], hold_ttl_ms: int, progress: Progress
) -> Shopping:
    """Every shopper comes at its time, fills its cart and does what it planned."""
    tally = Shopping()
    counted = tally.timed(send)
    patience = Patience(tries_max=3, poll_s=0.3, wait_s=2 * hold_ttl_ms / 1000 + 15,
                        keep_waiting=True)  # fmt: skip
    task = progress.add_task("shoppers done", total=len(shoppers))

    async def one(s: Shopper) -> None:
        await asyncio.sleep(s.arrive_s)
        v = await buyer.drive_async(visit(s, patience, random.Random(s.n)), counted)
        tally.record(s, v)
        progress.advance(task)

    await asyncio.gather(*(one(s) for s in shoppers))
    return tally


@dataclass(frozen=True)
class Receipt:
    """A cart as its shopper reads it once the sale settled (GET .../holds/{hold_id})."""

    login: str
    hold_id: str
    state: str
    expires_ms: int
    order: dict[str, Any] | None  # a CONFIRMED cart's lines, amount and winning charge
    charges: list[dict[str, Any]]


async def receipts(
    send: AsyncSend, fans: dict[str, BuyerApi], holds: list[tuple[str, str]], progress: Progress
) -> list[Receipt]:
    task = progress.add_task("receipts read back", total=len(holds))

    async def one(login: str, hold_id: str) -> Receipt:
        answer = await send(fans[login].hold(hold_id))
        progress.advance(task)
        h = answer.body
        return Receipt(
            login,
            hold_id,
            str(h.get("state", answer.code)),
            int(h.get("expires_ms") or 0),
            h.get("order"),
            list(h.get("charges") or []),
        )

    return list(await asyncio.gather(*(one(login, h) for login, h in holds)))
