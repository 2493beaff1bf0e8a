"""The buyer's side of the checkout API, written once for the demo (asyncio and aiohttp), the
Locust flow (gevent) and the end-to-end tests (httpx): the requests a buyer sends, how it reads an
answer, and its purchase journeys.

The journeys never touch the network: a journey is a generator that yields a `Call` and is sent
back its `Answer`, or yields a `Pause` and is sent back None, and returns what the buyer saw. A
driver of a few lines runs it over one transport (`drive_async`, `drive_sync`), so every caller
runs the same steps, and a unit test runs them against scripted answers."""

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Self, TypeAlias, TypeVar

import orjson

HOLD_ENDED = frozenset({"CONFIRMED", "EXPIRED", "RELEASED"})
GAVE_UP_PAYING = "gave up paying"  # every charge allowed was declined or failed
GAVE_UP_WAITING = "gave up waiting"  # the hold had not ended at the deadline
WALKED_AWAY = "walked away (expires)"
TAB_2_CLAIM = "claim best available (tab 2)"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass(frozen=True)
class Call:
    """One request; `name` is what the load tools count it under."""

    name: str
    method: str
    path: str
    json: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def named(self, name: str) -> Self:
        return replace(self, name=name)


@dataclass(frozen=True)
class BuyerApi:
    """One buyer's requests on one event. A claim or a charge sent without a key of the caller's
    gets one from `mint_key`, or else from the server: the same, but for a request sent twice,
    which only a key of the client's makes a replay."""

    event_id: str
    token: str = ""  # "": not logged in yet
    mint_key: Callable[[], str] | None = field(default=None, compare=False)

    @property
    def path(self) -> str:
        return f"/v1/events/{self.event_id}"

    def _headers(self, key: str | None = None) -> dict[str, str]:
        headers = bearer(self.token) if self.token else {}
        if key:
            headers["Idempotency-Key"] = key
        return headers

    def _key(self, key: str | None) -> str | None:
        return key if key is not None or self.mint_key is None else self.mint_key()

    @staticmethod
    def login(login: str) -> Call:
        return Call("login", "POST", "/v1/login", json={"login": login})

    def claim(self, key: str | None = None, seat_id: str | None = None, party: int = 1) -> Call:
        """The key makes the hold's id: a claim sent again with it is answered as the first
        was. `party` > 1: that many seats in one hold, adjacent when a block is free."""
        body: dict[str, Any] = {"seat_id": seat_id} if seat_id else {}
        if party > 1:
            body = {"quantity": party}
        name = "claim specific seat" if seat_id else "claim best available"
        return Call(
            "claim a party" if party > 1 else name,
            "POST",
            f"{self.path}/holds",
            json=body,
            headers=self._headers(self._key(key)),
        )

    def claim_seats(self, seat_ids: list[str], key: str | None = None) -> Call:
        """These seats in one hold, all or none."""
        path, body = f"{self.path}/holds", {"seat_ids": seat_ids}
        return Call("claim seats", "POST", path, json=body, headers=self._headers(self._key(key)))

    def cart(self, lines: list[dict[str, Any]], key: str | None = None) -> Call:
        """A claim of stock lines ({sku, quantity, location?}), all or nothing (ADR 0022)."""
        path = f"{self.path}/holds"
        body = {"lines": lines}
        return Call("claim a cart", "POST", path, json=body, headers=self._headers(self._key(key)))

    def stock(self) -> Call:
        """A stock event's availability per SKU and location."""
        return Call("stock", "GET", f"{self.path}/stock", headers=self._headers())

    def hold(self, hold_id: str) -> Call:
        return Call("hold status", "GET", f"{self.path}/holds/{hold_id}", headers=self._headers())

    def pay(self, hold_id: str, key: str | None = None) -> Call:
        path = f"{self.path}/holds/{hold_id}/charges"
        return Call("start charge", "POST", path, headers=self._headers(self._key(key)))

    def abandon(self, hold_id: str, charge_id: str) -> Call:
        path = f"{self.path}/holds/{hold_id}/charges/{charge_id}/abandon"
        return Call("abandon charge", "POST", path, headers=self._headers())

    def release(self, hold_id: str) -> Call:
        return Call("release", "DELETE", f"{self.path}/holds/{hold_id}", headers=self._headers())

    def availability(self) -> Call:
        return Call("availability", "GET", self.path, headers=self._headers())

    def free_seats(self, limit: int) -> Call:
        path = f"{self.path}/seats?limit={limit}"
        return Call("free seats", "GET", path, headers=self._headers())


@dataclass(frozen=True)
class Answer:
    status: int  # 0: no answer came (a transport error)
    code: str  # "201", a refusal such as "sold_out", "503", "transport:<error>"
    body: dict[str, Any]

    @classmethod
    def of(cls, status: int, raw: bytes) -> Self:
        """A refusal (4xx) is known by its error code; a success or a server error by its status,
        whatever its body says (a proxy's 502 page is not JSON)."""
        body: dict[str, Any] = {}
        if raw:
            try:
                parsed = orjson.loads(raw)
            except orjson.JSONDecodeError:
                parsed = None
            body = parsed if isinstance(parsed, dict) else {}
        code = str(status)
        error = body.get("error")
        if 400 <= status < 500 and isinstance(error, dict):
            code = str(error.get("code", status))
        return cls(status, code, body)

    @classmethod
    def transport_error(cls, exc: BaseException | None) -> Self:
        return cls(0, f"transport:{type(exc).__name__}", {})


@dataclass(frozen=True)
class Pause:
    seconds: float


@dataclass(frozen=True)
class Ended:
    """How one hold ended as its buyer saw it: a hold state, or GAVE_UP_* or WALKED_AWAY."""

    state: str
    seat_id: str = ""
    hold_id: str = ""


@dataclass
class Trip:
    """What a buyer saw on one journey: how each hold it had ended, in order, and whatever the
    engine accepted that it must have refused."""

    ended: list[Ended] = field(default_factory=list)
    surprises: list[str] = field(default_factory=list)


T = TypeVar("T")
Journey: TypeAlias = Generator[Call | Pause, Answer | None, T]
Send: TypeAlias = Callable[[Call], Answer]
AsyncSend: TypeAlias = Callable[[Call], Awaitable[Answer]]


def ask(call: Call) -> Journey[Answer]:
    answer = yield call
    if answer is None:
        raise TypeError(f"the driver sent no answer to {call.name!r}")
    return answer


async def drive_async(journey: Journey[T], send: AsyncSend) -> T:
    answer: Answer | None = None
    while True:
        try:
            step = journey.send(answer)
        except StopIteration as end:
            result: T = end.value
            return result
        if isinstance(step, Pause):
            await asyncio.sleep(step.seconds)
            answer = None
        else:
            answer = await send(step)


def drive_sync(journey: Journey[T], send: Send, sleep: Callable[[float], object] = time.sleep) -> T:
    answer: Answer | None = None
    while True:
        try:
            step = journey.send(answer)
        except StopIteration as end:
            result: T = end.value
            return result
        if isinstance(step, Pause):
            sleep(step.seconds)
            answer = None
        else:
            answer = send(step)


def could_come_back(availability: Mapping[str, Any]) -> bool:
    """A seat is free, or held or blocked and so may be free again: worth trying again."""
    return bool(availability.get("free") or availability.get("held") or availability.get("blocked"))


def pay_until_decided(
    api: BuyerApi,
    hold_id: str,
    *,
    deadline: float,
    tries_max: int,
    paying: bool = False,
    poll_s: float,
    keep_waiting: bool = False,
    clock: Callable[[], float] = time.monotonic,
) -> Journey[Ended]:
    """Poll the hold to its end state, paying (again) while it is RESERVED with no charge in
    flight: the last charge was declined or failed. `paying`: a charge of this buyer is already
    in flight. After `tries_max` charges the buyer gives up paying, or with `keep_waiting` waits
    for the hold to expire; at `deadline` (by `clock`) it stops waiting."""
    tries = 1 if paying else 0
    while clock() < deadline:
        h = yield from ask(api.hold(hold_id))
        state = str(h.body.get("state", ""))
        if state in HOLD_ENDED:
            return Ended(state, str(h.body.get("seat_id", "")), hold_id)
        if state == "RESERVED" and not h.body.get("charge_in_flight"):
            if tries < tries_max:
                tries += 1
                yield from ask(api.pay(hold_id))
            elif not keep_waiting:
                return Ended(GAVE_UP_PAYING, hold_id=hold_id)
        yield Pause(poll_s)
    return Ended(GAVE_UP_WAITING, hold_id=hold_id)


@dataclass(frozen=True)
class Patience:
    """How a buyer waits for a hold to end: until one `deadline` for every hold, or else for
    `wait_s` from the moment it starts waiting for each; see `pay_until_decided`."""

    tries_max: int = 3
    poll_s: float = 0.25
    deadline: float | None = None
    wait_s: float = 20.0
    keep_waiting: bool = False
    clock: Callable[[], float] = time.monotonic

    def decide(self, api: BuyerApi, hold_id: str, *, paying: bool = False) -> Journey[Ended]:
        return pay_until_decided(
            api,
            hold_id,
            deadline=self.clock() + self.wait_s if self.deadline is None else self.deadline,
            tries_max=self.tries_max,
            paying=paying,
            poll_s=self.poll_s,
            keep_waiting=self.keep_waiting,
            clock=self.clock,
        )


def pays(api: BuyerApi, hold_id: str, patience: Patience) -> Journey[Trip]:
    return Trip([(yield from patience.decide(api, hold_id))])


def abandons_and_pays_again(api: BuyerApi, hold_id: str, patience: Patience) -> Journey[Trip]:
    """A tab gives up its payment midway, another pays: the abandoned charge, if the provider
    captures it anyway, must be given back."""
    charge = yield from ask(api.pay(hold_id))
    if charge.status == 202:
        yield from ask(api.abandon(hold_id, str(charge.body["charge_id"])))
    return Trip([(yield from patience.decide(api, hold_id))])


def drops_and_grabs(
    api: BuyerApi,
    hold_id: str,
    patience: Patience,
    grab: Callable[[], Journey[Answer]],
) -> Journey[Trip]:
    """Releases the seat while its charge is in flight (a capture must be given back), then
    claims another with `grab` and pays for it."""
    yield from ask(api.pay(hold_id))
    yield from ask(api.release(hold_id))
    trip = Trip([Ended("RELEASED", hold_id=hold_id)])
    again = yield from grab()
    if again.status == 201:
        trip.ended.append((yield from patience.decide(api, str(again.body["hold_id"]))))
    return trip


def releases(api: BuyerApi, hold_id: str) -> Journey[Trip]:
    yield from ask(api.release(hold_id))
    return Trip([Ended("RELEASED", hold_id=hold_id)])


def walks_away(hold_id: str) -> Journey[Trip]:
    """Sends nothing: the hold expires."""
    yield from ()
    return Trip([Ended(WALKED_AWAY, hold_id=hold_id)])


def two_tabs(api: BuyerApi, first_id: str, patience: Patience, rng: random.Random) -> Journey[Trip]:
    """Same login in two tabs. Either tab 2 claims while tab 1 is idle (the engine releases
    tab 1's hold, so paying it must be refused), or while tab 1 pays (the claim is refused
    while the charge is in flight)."""
    if rng.random() < 0.5:
        return (yield from _tab_2_while_tab_1_idle(api, first_id, patience))
    return (yield from _tab_2_while_tab_1_pays(api, first_id, patience))


def _tab_2_while_tab_1_idle(api: BuyerApi, first_id: str, patience: Patience) -> Journey[Trip]:
    second = yield from ask(api.claim().named(TAB_2_CLAIM))
    if second.status != 201:
        return Trip([(yield from patience.decide(api, first_id))])
    trip = Trip()
    if (yield from ask(api.pay(first_id))).status == 202:
        trip.surprises.append(f"charge accepted on hold {first_id}, replaced by tab 2")
    trip.ended.append(Ended("RELEASED", hold_id=first_id))
    trip.ended.append((yield from patience.decide(api, str(second.body["hold_id"]))))
    return trip


def _tab_2_while_tab_1_pays(api: BuyerApi, first_id: str, patience: Patience) -> Journey[Trip]:
    paying = yield from ask(api.pay(first_id))
    second = yield from ask(api.claim().named(TAB_2_CLAIM))
    if second.status != 201:
        return Trip([(yield from patience.decide(api, first_id, paying=paying.status == 202))])
    # Tab 1's charge was decided before tab 2 claimed: a declined one leaves the hold to be
    # replaced, a captured one leaves it sold and tab 2 buys a second seat.
    trip = Trip()
    h = (yield from ask(api.hold(first_id))).body
    if h.get("state") == "CONFIRMED":
        trip.ended.append(Ended("CONFIRMED", str(h.get("seat_id", "")), first_id))
    elif h.get("state") == "RESERVED":
        trip.surprises.append(f"hold {first_id} still RESERVED after tab 2 claimed")
    trip.ended.append((yield from patience.decide(api, str(second.body["hold_id"]))))
    return trip


def claim_any(
    api: BuyerApi, rng: random.Random, specific_share: float, name: str = "claim"
) -> Journey[Answer]:
    """Best available, or a specific seat picked from the free-seat hint (a race)."""
    if rng.random() < specific_share:
        hint = yield from ask(api.free_seats(20))
        seats = hint.body.get("seats") or []
        if seats:
            claim = api.claim(seat_id=str(rng.choice(seats)))
            return (yield from ask(claim.named(f"{name} specific seat")))
    return (yield from ask(api.claim().named(f"{name} best available")))
