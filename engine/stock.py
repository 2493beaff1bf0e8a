"""Quantity stock (ADR 0022): an event that sells counted units of SKUs kept at locations
(general admission, or parts in an East and a West warehouse). Creating one, correcting a
location's count, and reading availability; claims go through `Store.claim(lines=...)` and
every later transition is the seat engine's own (lua/_stock.lua moves the units)."""

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine import errors, keys
from engine.scripts import CORRECTION_REFUSALS, CorrectionCode, StockAddCode, refusal
from engine.states import LatePolicy, ReversalPolicy

if TYPE_CHECKING:
    from engine.store import Store

COUNTERS = ("on_hand", "available", "held", "blocked", "sold")
SKUS_CHUNK_MAX = 500  # SKUs per stock_add call (<= 1000)
# SKU and location ids: the key alphabet without the separators of a hold's lines ('@', '*').
_STOCK_ID_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def valid_stock_id(value: str) -> bool:
    return bool(_STOCK_ID_RE.match(value))


@dataclass(frozen=True, slots=True)
class StockLine:
    """One line of a cart: `quantity` units of `sku`, from `location` ('' : the event's rule)."""

    sku: str
    quantity: int
    location: str = ""

    @property
    def asked(self) -> str:
        at = f"@{self.location}" if self.location else ""
        return f"{self.sku}*{self.quantity}{at}"


def claim_want(seat_id: str | None, seats: Sequence[str], quantity: int,
               lines: Sequence[StockLine]) -> str:  # fmt: skip
    """What hold_claim is asked for (its ARGV[3]): stock lines, seats, a party, or the best."""
    if lines:
        return "+" + ",".join(line.asked for line in lines)
    return ",".join(seats) or seat_id or (f"#{quantity}" if quantity > 1 else "")


@dataclass(frozen=True, slots=True)
class SkuSpec:
    sku: str
    price_minor: int
    on_hand: dict[str, int] = field(default_factory=dict)  # location -> initial count


@dataclass(frozen=True, slots=True)
class HeldLine:
    """A line a hold owns: `quantity` units of `sku` taken from `location`."""

    sku: str
    location: str
    quantity: int


def is_stock_listing(listed: str) -> bool:
    """A hold's `seat` field lists stock lines ('<sku>@<location>*<qty>'), not seats: a seat id
    never contains '*'."""
    return "*" in listed


def lines_of(listed: str) -> tuple[HeldLine, ...]:
    """A stock hold's `seat` field ('<sku>@<location>*<qty>,...') as lines; () for seats."""
    out = []
    for item in listed.split(","):
        where, star, qty = item.partition("*")
        if not star:
            return ()
        sku, _, location = where.partition("@")
        out.append(HeldLine(sku, location, int(qty)))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Correction:
    correction_id: str
    on_hand: int
    available: int
    replay: bool


def stock_table(raw: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The stock hash as sku -> {price_minor, locations: {location -> counters}}."""
    out: dict[str, dict[str, Any]] = {}
    for name, value in raw.items():
        where, _, counter = name.rpartition(":")
        sku, at, location = where.partition("@")
        entry = out.setdefault(sku, {"price_minor": 0, "locations": {}})
        if not at and counter == "price":
            entry["price_minor"] = int(value)
        elif at and counter in COUNTERS:
            entry["locations"].setdefault(location, {})[counter] = int(value)
    return out


def stock_problems(table: dict[str, dict[str, Any]]) -> list[str]:
    """Per SKU and location: no counter below zero, available + held + blocked + sold = on
    hand."""
    problems = []
    for sku, entry in table.items():
        for location, c in entry["locations"].items():
            parts = [c.get(name, 0) for name in COUNTERS]
            if min(parts) < 0:
                problems.append(f"stock {sku}@{location} has a counter below zero: {c}")
            if sum(parts[1:]) != parts[0]:
                problems.append(f"stock {sku}@{location}: counters do not add up to on hand: {c}")
    return problems


class Stock:
    """The admin side of quantity stock, beside the store (one script call per change)."""

    def __init__(self, store: "Store") -> None:
        self.store = store

    async def create_event(
        self,
        event_id: str,
        locations: Sequence[str],
        skus: Sequence[SkuSpec],
        *,
        hold_ttl_ms: int,
        quarantine_ms: int,
        policy: LatePolicy = LatePolicy.QUARANTINE,
        currency: str = "EUR",
        reversal_policy: ReversalPolicy = ReversalPolicy.MANUAL,
        login_cap: int | None = None,
        operator: str = "setup",
    ) -> int:
        """A DRAFT stock event with its SKUs; each initial count is a correction
        (`initial:<sku>:<location>`), so the ledger holds the origin of every unit. Returns the
        units on hand."""
        bad = [x for x in (*locations, *(s.sku for s in skus)) if not valid_stock_id(x)]
        if bad or not locations or len(set(locations)) != len(locations):
            raise ValueError(f"invalid or repeated stock ids: {bad or list(locations)}")
        args = [event_id, hold_ttl_ms, quarantine_ms, str(policy), currency, str(reversal_policy)]
        cap = "" if login_cap is None else login_cap
        await self.store.read.index.add(event_id)  # first: a create cut short is still walked
        reply = await self.store._run(
            "event_create", event_id, [*args, "stock", ",".join(locations), 0, cap]
        )
        if reply[0] == "EXISTS":
            raise errors.EventExists(f"event {event_id} exists")
        await self.add_skus(event_id, skus)
        initial = [(s.sku, loc, n) for s in skus for loc, n in s.on_hand.items()]
        for first in range(0, len(initial), SKUS_CHUNK_MAX):  # concurrent: one round trip each
            await asyncio.gather(
                *(
                    self.correct(
                        event_id,
                        f"initial:{sku}:{loc}",
                        sku,
                        loc,
                        set_to=n,
                        reason="initial count",
                        operator=operator,
                    )
                    for sku, loc, n in initial[first : first + SKUS_CHUNK_MAX]
                )
            )
        return sum(n for _s, _loc, n in initial)

    async def add_skus(self, event_id: str, skus: Sequence[SkuSpec]) -> None:
        for first in range(0, len(skus), SKUS_CHUNK_MAX):
            chunk = skus[first : first + SKUS_CHUNK_MAX]
            reply = await self.store._run(
                "stock_add", event_id, [x for s in chunk for x in (s.sku, s.price_minor)]
            )
            code = StockAddCode(reply[0])
            if code == StockAddCode.DUPLICATE_SKU:
                raise ValueError(f"duplicate sku {reply[1]!r}")
            if code != StockAddCode.ADDED:
                raise errors.EventNotFound(f"cannot add skus to {event_id}: {code}")

    async def correct(
        self,
        event_id: str,
        correction_id: str,
        sku: str,
        location: str,
        *,
        set_to: int | None = None,
        adjust_by: int | None = None,
        reason: str,
        operator: str,
    ) -> Correction:
        """Set (`set_to`) or adjust (`adjust_by`) a location's on-hand count; idempotent by
        `correction_id`. Refused (StockBelowZero) when it would leave available below zero."""
        if (set_to is None) == (adjust_by is None):
            raise ValueError("give exactly one of set_to and adjust_by")
        if not keys.valid_id(correction_id) or (set_to is not None and set_to < 0):
            raise ValueError("a valid correction id and a count of at least 0 are required")
        mode, value = ("set", set_to) if set_to is not None else ("adjust", adjust_by)
        reply = await self.store._run(
            "stock_correct", event_id, [correction_id, sku, location, mode, value, reason, operator]
        )
        code = CorrectionCode(reply[0])
        if code in (CorrectionCode.APPLIED, CorrectionCode.REPLAY):
            return Correction(
                correction_id, int(reply[1]), int(reply[2]), code == CorrectionCode.REPLAY
            )
        if code == CorrectionCode.NOT_OPEN:
            await self.store._refuse_truthfully(event_id, code)
        raise refusal(CORRECTION_REFUSALS, code, reply)

    async def table(self, event_id: str) -> dict[str, dict[str, Any]]:
        """Availability per SKU and location: one HGETALL of a hash of SKUs x locations x 5
        counters (no scan of holds); raises EventNotFound for no such event."""
        raw = await self.store._read(self.store.client.hgetall(self.store.key(event_id, "stock")))
        if not raw:  # no such event, or a seat event (a stock event has its SKUs from creation)
            a = await self.store.read.availability(event_id)
            if a.kind != "stock":
                raise errors.WrongKind(f"stock of event {event_id}", kind=a.kind)
        return stock_table(raw)
