"""The ledger side of quantity stock (ADR 0022): what the writer keeps of a stock event, the
record a rebuild puts back for each correction, and the nightly check of Redis's counters
against the ledger.

- Every applied correction (each initial count included) is an outbox record of kind
  `correction`; the writer keeps it in `decisions`, like every record, and in the same
  transaction in `stock_corrections` (idempotent by correction id). It moves no hold or charge.
- A stock event's SKUs and prices are copied into `event_skus` when its config is (they are
  fixed once the sale opens).
- Reconciliation, per SKU and location: Redis's `on_hand` must be the sum of the ledger's
  correction deltas (after - before), and its `sold` the units of the lines, at that location,
  of the ledger's CONFIRMED and EXCEPTION stock holds. Decisions still on their way (in the
  outbox, neither in the ledger nor refused by it) are counted as the ledger will hold them, so
  a sale going on is not a false difference. A difference is reported, never repaired."""

import json
from collections import Counter
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import redis.asyncio as aioredis

from engine.model import keys
from engine.model.ledger_progress import stream_id
from engine.model.records import OutboxRecord, RecordKind
from engine.model.states import HoldState
from engine.model.stock_lines import is_stock_listing, lines_of, stock_table
from engine.store import Store
from persistence.queries import Q

SOLD = (HoldState.CONFIRMED, HoldState.EXCEPTION)
Location = tuple[str, str]  # (sku, location)


async def sku_rows(redis: "aioredis.Redis", prefix: str, event_id: str) -> list[tuple[Any, ...]]:
    """(event, sku, price) of every SKU of a stock event: its stock hash's '<sku>:price' fields."""
    raw: Any = await redis.hgetall(keys.event_key(event_id, "stock", prefix))
    return [
        (event_id, name.removesuffix(":price"), int(value))
        for name, value in sorted(raw.items())
        if name.endswith(":price")
    ]


def recorded_correction(row: asyncpg.Record) -> str:
    """What lua/stock_correct.lua keeps of an applied correction in the event's `corrections`
    hash (json: body, before, after, at_ms; the body is sku, location, mode, value, reason and
    operator joined by NUL), built from its ledger row: a replay of its id stays a replay."""
    body = "\0".join(
        (row["sku"], row["location"], row["mode"], str(row["value"]), row["reason"],
         row["operator"])
    )  # fmt: skip
    return json.dumps(
        {
            "body": body,
            "before": row["on_hand_before"],
            "after": row["on_hand_after"],
            "at_ms": row["decided_at_ms"],
        },
        separators=(",", ":"),
    )


@dataclass
class LedgerStock:
    """What the ledger (and the decisions on their way to it) says a stock event holds."""

    on_hand: Counter[Location] = field(default_factory=Counter)
    # hold id -> (state, line list, stream id of the record that set it)
    holds: dict[str, tuple[str, str, tuple[int, int]]] = field(default_factory=dict)

    def sold(self) -> Counter[Location]:
        out: Counter[Location] = Counter()
        for state, listed, _at in self.holds.values():
            if state in SOLD:
                for line in lines_of(listed):
                    out[(line.sku, line.location)] += line.quantity
        return out

    def add(self, entry_id: str, r: OutboxRecord) -> None:
        """A decision the ledger does not hold yet, as the writer will apply it."""
        if r.kind == RecordKind.CORRECTION:
            sku, _, location = r.seat_id.partition("@")
            self.on_hand[(sku, location)] += int(r.to_state) - int(r.from_state)
        elif r.moves_hold and is_stock_listing(r.seat_id):
            at = stream_id(entry_id)
            known = self.holds.get(r.entity_id)
            if known is None or known[2] < at:  # forward only, as upsert_hold
                self.holds[r.entity_id] = (r.to_state, r.seat_id, at)


async def _ledger_stock(
    store: Store, conn: asyncpg.Connection, event_id: str
) -> tuple[LedgerStock, dict[str, dict[str, Any]], list[tuple[str, OutboxRecord]]]:
    """The ledger's figures, then Redis's stock table and outbox, and of the outbox the
    decisions the ledger neither holds nor refused: the ledger's reads in one snapshot (the
    caller's transaction, if it has one) taken before Redis is read, so a decision mirrored
    meanwhile is counted once (in the outbox, not in the snapshot). Asked by id (`= any($2)`),
    not by loading every decision id of the event."""
    found = LedgerStock()
    snapshot: AbstractAsyncContextManager[Any] = (
        nullcontext()
        if conn.is_in_transaction()
        else conn.transaction(isolation="repeatable_read", readonly=True)
    )
    async with snapshot:
        for r in await conn.fetch(Q["event_stock_on_hand"], event_id):
            found.on_hand[(r["sku"], r["location"])] = r["on_hand"]
        for r in await conn.fetch(Q["event_holds"], event_id):
            if is_stock_listing(r["seat_id"]):
                at = (r["stream_ms"], r["stream_seq"])
                found.holds[r["hold_id"]] = (r["state"], r["seat_id"], at)
        table, outbox = await _redis_stock(store, event_id)
        ids = [fields["decision_id"] for _sid, fields in outbox]
        seen = {r[0] for r in await conn.fetch(Q["decisions_held"], event_id, ids)}
        seen |= {r[0] for r in await conn.fetch(Q["event_refused_decisions"], event_id)}
    news = [(sid, OutboxRecord.from_fields(f)) for sid, f in outbox if f["decision_id"] not in seen]
    return found, table, news


async def _redis_stock(
    store: Store, event_id: str
) -> tuple[dict[str, dict[str, Any]], list[tuple[str, dict[str, str]]]]:
    """The stock table and the outbox, in one MULTI/EXEC (the counters and the decisions that
    moved them, at one instant)."""
    async with store.client.pipeline(transaction=True) as pipe:
        pipe.hgetall(store.key(event_id, "stock"))
        pipe.xrange(store.key(event_id, "outbox"))
        raw, entries = await pipe.execute()
    return stock_table(raw), [(str(sid), fields) for sid, fields in entries]


async def stock_mismatches(
    store: Store, conn: asyncpg.Connection, event_id: str
) -> list[tuple[str, str]]:
    """(sku@location, the figures) of every location whose Redis on hand or sold differs from
    the ledger's; [] for a seat event. The ledger is read first, Redis after: a decision
    mirrored in between is in Redis's outbox and counted once."""
    kind = (await store.read.event_fields(event_id, "kind"))[0]
    if kind is None:  # Redis lost the event: the ledger says what it was
        kind = await conn.fetchval(Q["event_kind"], event_id)
    if kind != "stock":
        return []
    ledger, table, news = await _ledger_stock(store, conn, event_id)
    for entry_id, record in news:
        ledger.add(entry_id, record)
    sold = ledger.sold()
    redis_counts: dict[Location, dict[str, int]] = {
        (sku, location): counters
        for sku, entry in table.items()
        for location, counters in entry["locations"].items()
    }
    out = []
    for where in sorted(redis_counts.keys() | ledger.on_hand.keys() | sold.keys()):
        ours = redis_counts.get(where, {})
        figures = (ours.get("on_hand", 0), ours.get("sold", 0), ledger.on_hand[where], sold[where])
        if figures[:2] != figures[2:]:
            detail = "redis on_hand {} sold {}; ledger corrections add up to {}, sold lines {}"
            out.append((f"{where[0]}@{where[1]}", detail.format(*figures)))
    return out
