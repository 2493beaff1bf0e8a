"""The quantity-stock model (ADR 0022), pure: stock and location ids, a claim's lines, a SKU's
spec, a hold's lines as stored, a correction's result, and the stock table with its sanity
checks. No Redis here: the facet that changes stock is engine/store/stock.py."""

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

COUNTERS = ("on_hand", "available", "held", "blocked", "sold")
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


class Goods(TypedDict, total=False):
    """What a claim asks for besides one named seat, declared once for every claim front
    (engine/store/transitions.py Store.claim, engine/gate/claims.py GatedClaims.claim): those
    seats (all of them), a quantity of the best seats, or stock lines; and a presale's access
    code. None of them: the one seat named, or the best free one."""

    seats: Sequence[str]
    quantity: int
    lines: Sequence[StockLine]
    access_code: str


GOODS = Goods.__optional_keys__


def claim_want(seat_id: str | None, goods: Goods) -> str:
    """What hold_claim is asked for (its ARGV[3]): stock lines, seats, a party, or the best."""
    lines = goods.get("lines", ())
    if lines:
        return "+" + ",".join(line.asked for line in lines)
    quantity = goods.get("quantity", 1)
    return ",".join(goods.get("seats", ())) or seat_id or (f"#{quantity}" if quantity > 1 else "")


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
