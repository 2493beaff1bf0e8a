"""Quantity stock (ADR 0022): an event that sells counted units of SKUs kept at locations
(general admission, or parts in an East and a West warehouse). Creating one, correcting a
location's count, and reading availability; claims go through `Store.claim(lines=...)` and
every later transition is the seat engine's own (lua/_stock.lua moves the units)."""

import asyncio
from collections.abc import Sequence
from typing import Any

from engine.model import errors, keys
from engine.model.event_config import EventConfig
from engine.model.replies import CORRECTION_REFUSALS, CorrectionCode, StockAddCode, refusal
from engine.model.stock_lines import Correction, SkuSpec, stock_table, valid_stock_id
from engine.store.runner import Runner

SKUS_CHUNK_MAX = 500  # SKUs per stock_add call (<= 1000)


class Stock:
    """The admin side of quantity stock, beside the store (one script call per change)."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    async def create_event(
        self,
        event_id: str,
        locations: Sequence[str],
        skus: Sequence[SkuSpec],
        config: EventConfig,
        *,
        operator: str = "setup",
    ) -> int:
        """A DRAFT stock event with its SKUs; each initial count is a correction
        (`initial:<sku>:<location>`), so the ledger holds the origin of every unit. Returns the
        units on hand."""
        bad = [x for x in (*locations, *(s.sku for s in skus)) if not valid_stock_id(x)]
        if bad or not locations or len(set(locations)) != len(locations):
            raise ValueError(f"invalid or repeated stock ids: {bad or list(locations)}")
        if config.max_party:
            raise ValueError("a stock event has no party size (its lines say their quantities)")
        await self.runner.reads.index.add(event_id)  # first: a create cut short is still walked
        reply = await self.runner.run(
            "event_create", event_id, [event_id, *config.script_args("stock", ",".join(locations))]
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
            reply = await self.runner.run(
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
        reply = await self.runner.run(
            "stock_correct", event_id, [correction_id, sku, location, mode, value, reason, operator]
        )
        code = CorrectionCode(reply[0])
        if code in (CorrectionCode.APPLIED, CorrectionCode.REPLAY):
            return Correction(
                correction_id, int(reply[1]), int(reply[2]), code == CorrectionCode.REPLAY
            )
        if code == CorrectionCode.NOT_OPEN:
            await self.runner.refuse_truthfully(event_id, code)
        raise refusal(CORRECTION_REFUSALS, code, reply)

    async def table(self, event_id: str) -> dict[str, dict[str, Any]]:
        """Availability per SKU and location: one HGETALL of a hash of SKUs x locations x 5
        counters (no scan of holds); raises EventNotFound for no such event."""
        raw = await self.runner.timed(
            self.runner.client.hgetall(self.runner.key(event_id, "stock"))
        )
        if not raw:  # no such event, or a seat event (a stock event has its SKUs from creation)
            a = await self.runner.reads.availability(event_id)
            if a.kind != "stock":
                raise errors.WrongKind(f"stock of event {event_id}", kind=a.kind)
        return stock_table(raw)
