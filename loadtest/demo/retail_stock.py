"""The retail demo's shop, from the operator's side (loadtest/demo/retail.py runs it): bicycle
parts in an East and a West warehouse, the stock event that sells them (created through the
admin API), the stock view, and the corrections made by hand in the middle of the sale: a
delivery, damaged units, a write-off refused because sold units are never corrected away, and
a delivery sent twice."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

LOCATIONS = ("east", "west")  # the location rule's preference order
COUNTERS_SHOWN = ("on_hand", "available", "held", "blocked", "sold")


@dataclass(frozen=True)
class Part:
    """One SKU: its price, what each warehouse holds per 1,000 shoppers (never less than
    `floor`), how often a cart line asks for it, and the quantities a line asks for."""

    sku: str
    name: str
    price_minor: int
    per_thousand: tuple[int, int]  # (east, west)
    floor: tuple[int, int]
    popularity: float
    quantities: tuple[int, ...]

    def on_hand(self, shoppers: int) -> dict[str, int]:
        return {
            loc: max(floor, per * shoppers // 1000)
            for loc, per, floor in zip(LOCATIONS, self.per_thousand, self.floor, strict=True)
        }


SCARCE = "RD-DI2"
CATALOGUE = (
    Part("TUBE-700C", "inner tube 700x25c", 690, (650, 450), (10, 8), 0.32, (1, 1, 2, 2, 3, 4)),
    Part("CHAIN-11S", "11-speed chain", 2_990, (420, 280), (6, 4), 0.26, (1, 1, 1, 2, 2, 3)),
    Part("PADS-DISC", "disc brake pads", 1_890, (260, 200), (5, 4), 0.20, (1, 1, 2)),
    Part("TYRE-28C", "folding tyre 700x28c", 4_990, (120, 80), (3, 2), 0.14, (1, 2)),
    Part(SCARCE, "Di2 rear derailleur", 32_900, (0, 0), (4, 2), 0.08, (1,)),
)


def event_body(event_id: str, shoppers: int, *, hold_ttl_ms: int, login_cap: int) -> dict[str, Any]:
    """The admin API's create request of the stock event, open at once. Past its deadline a
    cart's units go back on sale and a capture that comes later is refunded (release_refund):
    payment never takes units a cart no longer owns."""
    return {
        "event_id": event_id,
        "kind": "stock",
        "locations": list(LOCATIONS),
        "skus": [
            {"sku": p.sku, "price_minor": p.price_minor, "on_hand": p.on_hand(shoppers)}
            for p in CATALOGUE
        ],
        "hold_ttl_ms": hold_ttl_ms,
        "quarantine_ms": hold_ttl_ms,  # unused: no cart is quarantined under release_refund
        "policy": "release_refund",
        "login_cap": login_cap,
        "currency": "EUR",
        "opens_at_ms": 0,
    }


def initial_counts(shoppers: int) -> dict[str, int]:
    """'<sku>@<location>' -> units at the start, one initial correction each."""
    return {f"{p.sku}@{loc}": n for p in CATALOGUE for loc, n in p.on_hand(shoppers).items()}


async def create_shop(
    http: httpx.AsyncClient, admin: Mapping[str, str], body: dict[str, Any]
) -> int:
    """Create the event (POST /v1/admin/events); the units on hand."""
    r = await http.post("/v1/admin/events", json=body, headers=admin)
    if r.status_code != 201:
        raise RuntimeError(f"create event {body['event_id']}: {r.status_code} {r.text[:300]}")
    return int(r.json()["units"])


Counters = dict[str, dict[str, int]]  # '<sku>@<location>' -> on_hand, available, held, ...


async def stock_view(http: httpx.AsyncClient, event_id: str) -> Counters:
    """GET /v1/events/{event_id}/stock, flattened per SKU and location."""
    r = await http.get(f"/v1/events/{event_id}/stock")
    r.raise_for_status()
    return {
        f"{s['sku']}@{x['location']}": {k: int(v) for k, v in x.items() if k != "location"}
        for s in r.json()["skus"]
        for x in s["locations"]
    }


@dataclass(frozen=True)
class Corrected:
    """One correction as the operator sent it and as the API answered."""

    label: str
    body: dict[str, Any]
    status: int
    answer: dict[str, Any]

    @property
    def applied(self) -> bool:
        return self.status == 201

    @property
    def code(self) -> str:
        error = self.answer.get("error")
        return str(error.get("code")) if isinstance(error, dict) else str(self.status)

    @property
    def where(self) -> str:
        return f"{self.body['sku']}@{self.body['location']}"

    @property
    def said(self) -> str:
        """The answer in a few words."""
        a = self.answer
        if self.status == 201:
            return f"201 applied: on hand {a['on_hand']}, available {a['available']}"
        if self.status == 200:
            return f"200 replay={str(a['replay']).lower()}: on hand {a['on_hand']}"
        e = a.get("error", {})
        figures = ", ".join(
            f"{k} {e[k]}" for k in ("available", "held", "blocked", "sold") if k in e
        )
        return f"{self.status} {self.code}" + (f" ({figures})" if figures else "")


async def correct(
    http: httpx.AsyncClient,
    admin: Mapping[str, str],
    event_id: str,
    label: str,
    body: dict[str, Any],
) -> Corrected:
    path = f"/v1/admin/events/{event_id}/stock/corrections"
    r = await http.post(path, json=body, headers=admin)
    return Corrected(label, body, r.status_code, r.json())


def write_off_target(view: Counters) -> str:
    """The location whose sales (then holds) own the most units: writing off its whole count
    must be refused, since units a sale or a cart owns are never corrected away."""
    return max(view, key=lambda w: (view[w]["sold"], view[w]["held"] + view[w]["blocked"]))


async def mid_sale_corrections(
    http: httpx.AsyncClient, admin: Mapping[str, str], event_id: str
) -> list[Corrected]:
    """What the warehouses report in the middle of the sale, through the admin API."""
    delivery = {
        "correction_id": "delivery-west-1", "sku": SCARCE, "location": "west", "adjust": 3,
        "reason": "delivery from the supplier", "operator": "west-goods-in",
    }  # fmt: skip
    done = [await correct(http, admin, event_id, "delivery: 3 more at west", delivery)]
    view = await stock_view(http, event_id)
    shelf = max(view, key=lambda w: view[w]["available"])  # 2 of its free units damaged
    sku, _, location = shelf.partition("@")
    damaged = {
        "correction_id": "damaged-1", "sku": sku, "location": location, "adjust": -2,
        "reason": "damaged on the shelf", "operator": f"{location}-floor",
    }  # fmt: skip
    done.append(await correct(http, admin, event_id, "damaged units written off", damaged))
    view = await stock_view(http, event_id)
    target = write_off_target(view)
    sku, _, location = target.partition("@")
    write_off = {
        "correction_id": "write-off-1", "sku": sku, "location": location,
        "adjust": -view[target]["on_hand"], "reason": "whole shelf written off",
        "operator": f"{location}-floor",
    }  # fmt: skip
    label = "write-off of the whole count (sold and held units in it)"
    done.append(await correct(http, admin, event_id, label, write_off))
    done.append(await correct(http, admin, event_id, "the delivery sent again (same id)", delivery))
    return done


def expected_on_hand(initial: Mapping[str, int], corrections: list[Corrected]) -> dict[str, int]:
    """What each location should hold: its initial count and every applied adjustment."""
    out = dict(initial)
    for c in corrections:
        if c.applied:
            out[c.where] = out.get(c.where, 0) + int(c.body["adjust"])
    return out
