"""Admin listings of an event (reads only, ADR 0025): events, an event's configuration, and
pages of its holds, charges and orders. A page is a few HSCAN steps of the event's hash,
never one HGETALL: a listing of 100k holds during a burst costs the burst a few short commands
per page. The cursor is opaque to clients; it names the HSCAN cursor and, when a page ended
inside a step, the last hold id it gave (each step's entries are taken in id order). Every
entry present from the first page to the last is listed exactly once while the hash only
grows or keeps its size: a page that ends inside an HSCAN step carries the rest of that step's
ids in its cursor (a hash small enough to come whole in one step is resumed after the last id
given, in id order). Holds are never deleted during a sale; a trim that shrinks the hash by
nine tenths between two pages may repeat entries (Redis's SCAN guarantee), never lose one."""

import base64
import binascii
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from engine.model import errors, keys
from engine.model.event_config import FIELDS as TERMS
from engine.model.event_config import INTEGER_FIELDS as TERM_INTEGERS
from engine.model.event_details import DETAIL_FIELDS, EventDetails
from engine.model.holds import Charge, Hold
from engine.model.states import ChargeState, HoldState
from engine.model.stock_lines import stock_table
from engine.store.reads import Reads

T = TypeVar("T")
# Charges whose money needs an operator's eye: being given back (pending, retrying or parked),
# or moved by the provider after the sale (its own refund, a dispute open or lost).
EXCEPTION_STATES = frozenset(
    (ChargeState.REFUNDING, ChargeState.PROVIDER_REFUNDED, ChargeState.DISPUTED,
     ChargeState.CHARGED_BACK)
)  # fmt: skip
STEPS_MAX = 8  # HSCAN calls one page makes at most (a sparse filter may end a page short)
EVENT_COUNTERS = ("status", "kind", "opens_at_ms", "seats_total", "free", "held", "blocked",
                  "sold", "currency")  # fmt: skip
# An event's row in the admin listing: its terms (engine/model/event_config.py) and the rest of
# its hash that an operator reads; integers answered as numbers.
CONFIG_FIELDS = ("kind", "status", *TERMS, "price_minor", "opens_at_ms", "locations",
                 "seats_total", "policy_grace_ms", "shadow_policy", "closed_at_ms",
                 "cancelled_at_ms")  # fmt: skip
INTEGER_FIELDS = frozenset(
    (*TERM_INTEGERS, "price_minor", "opens_at_ms", "seats_total", "policy_grace_ms",
     "closed_at_ms", "cancelled_at_ms", "free", "held", "blocked", "sold")
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Page:
    items: list[Any]
    cursor: str | None  # None: the listing is complete


def encode_cursor(scan: int, after: str = "", pending: Sequence[str] = ()) -> str:
    raw = f"{scan}|{after}|{','.join(pending)}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(token: str | None) -> tuple[int, str, list[str]]:
    """(HSCAN cursor, the last id given of a whole-hash step, ids of a step still to give)."""
    if not token:
        return 0, "", []
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        scan, after, pending = raw.split("|")
        ids = [x for x in pending.split(",") if x]
        if scan.isdigit() and all(
            keys.valid_charge_id(x) for x in [*ids, *([after] if after else [])]
        ):
            return int(scan), after, ids
    except (binascii.Error, UnicodeDecodeError, ValueError):
        pass
    raise errors.BadCursor(f"bad cursor {token[:80]!r}")


def _typed(name: str, value: str | None) -> Any:
    if value is None or value == "":
        return None
    return int(value) if name in INTEGER_FIELDS else value


class Listings:
    def __init__(self, read: Reads) -> None:
        self.read = read

    async def _exists(self, event_id: str) -> None:
        if not await self.read.event_exists(event_id):
            await self.read.availability(event_id)  # EventNotFound, or Recovering

    async def _page(
        self, key: str, cursor: str | None, limit: int, parse: Callable[[str], T | None]
    ) -> Page:
        """Up to `limit` entries of hash `key` that `parse` keeps, from `cursor` on."""
        scan, after, pending = decode_cursor(cursor)
        items: list[T] = []
        if pending:  # the rest of a step an earlier page took: read by id
            values = await self.read._read(self.read.client.hmget(key, pending[:limit]))
            items += [x for x in map(parse, filter(None, values)) if x is not None]
            if len(pending) > limit:
                return Page(items, encode_cursor(scan, "", pending[limit:]))
            if scan == 0:
                return Page(items, None)
        for _ in range(STEPS_MAX):
            room = limit - len(items)
            if room <= 0:
                break
            nxt, found = await self.read._read(self.read.client.hscan(key, scan, count=room))
            whole = scan == 0 and int(nxt) == 0  # a small hash: all of it in one step
            ids = [i for i in sorted(found) if not after or i > after]
            items += [x for x in (parse(found[i]) for i in ids[:room]) if x is not None]
            if len(ids) > room:  # a step larger than the room left: the page ends inside it
                if whole:
                    return Page(items, encode_cursor(0, ids[room - 1]))
                return Page(items, encode_cursor(int(nxt), "", ids[room:]))
            scan, after = int(nxt), ""
            if scan == 0:
                return Page(items, None)
        return Page(items, encode_cursor(scan))

    async def holds(
        self, event_id: str, cursor: str | None, limit: int, states: frozenset[str] = frozenset()
    ) -> Page:
        return await self._in_states(event_id, "holds", Hold.from_json, cursor, limit, states)

    async def charges(
        self, event_id: str, cursor: str | None, limit: int, states: frozenset[str] = frozenset()
    ) -> Page:
        return await self._in_states(event_id, "charges", Charge.from_json, cursor, limit, states)

    async def _in_states(
        self,
        event_id: str,
        name: str,
        decode: Callable[[str], Hold | Charge],
        cursor: str | None,
        limit: int,
        states: frozenset[str],
    ) -> Page:
        """A page of the event's holds or charges (`name`), those in `states` (empty: all)."""
        await self._exists(event_id)

        def parse(raw: str) -> Hold | Charge | None:
            record = decode(raw)
            return record if not states or record.state in states else None

        return await self._page(self.read._key(event_id, name), cursor, limit, parse)

    async def orders(
        self, event_id: str, cursor: str | None, limit: int
    ) -> tuple[Page, dict[str, Charge]]:
        """CONFIRMED holds, with their winning charges."""
        page = await self.holds(event_id, cursor, limit, frozenset((HoldState.CONFIRMED,)))
        winners = await self.read.charges(event_id, [h.winner for h in page.items if h.winner])
        return page, {c.charge_id: c for c in winners}

    async def exceptions(
        self, event_id: str, cursor: str | None, limit: int, states: frozenset[str] = frozenset()
    ) -> tuple[Page, dict[str, Hold]]:
        """Charges in an exception state (EXCEPTION_STATES, or those of `states`), with their
        holds: a seat whose money left is its winner's PROVIDER_REFUNDED, DISPUTED or
        CHARGED_BACK; money without a seat is REFUNDING."""
        page = await self.charges(event_id, cursor, limit, states or EXCEPTION_STATES)
        ids = sorted({c.hold_id for c in page.items if c.hold_id})
        if not ids:
            return page, {}
        rows = await self.read._read(self.read.client.hmget(self.read._key(event_id, "holds"), ids))
        holds = [Hold.from_json(r) for r in rows if r is not None]
        return page, {h.hold_id: h for h in holds}

    async def events(self, cursor: str | None, limit: int) -> Page:
        """A page of the events, in id order after the cursor's last id (the per-slot indexes,
        engine/store/event_index.py), each with its status and counters."""
        _, after, _ = decode_cursor(cursor)
        every = await self.read.event_ids()
        ids = [e for e in every if e > after][:limit]
        async with self.read.client.pipeline(transaction=False) as pipe:
            for event_id in ids:
                pipe.hmget(self.read._key(event_id, "event"), list(EVENT_COUNTERS))
            rows = await self.read._read(pipe.execute()) if ids else []
        items = [
            {
                "event_id": event_id,
                **{n: _typed(n, v) for n, v in zip(EVENT_COUNTERS, row, strict=True)},
            }
            for event_id, row in zip(ids, rows, strict=True)
            if row[0] is not None
        ]
        more = bool(ids) and ids[-1] != every[-1]
        return Page(items, encode_cursor(0, ids[-1]) if more else None)

    async def config(self, event_id: str) -> dict[str, Any]:
        """What the event was created with, and where its sale stands."""
        await self._exists(event_id)
        values = await self.read.event_fields(event_id, *CONFIG_FIELDS, *DETAIL_FIELDS)
        out: dict[str, Any] = {"event_id": event_id}
        out |= {n: _typed(n, v) for n, v in zip(CONFIG_FIELDS, values, strict=False)}
        out |= EventDetails.of(
            dict(zip(DETAIL_FIELDS, values[len(CONFIG_FIELDS) :], strict=True))
        ).view()
        out["kind"] = out["kind"] or "seats"
        out["locations"] = [x for x in (out["locations"] or "").split(",") if x]
        if out["kind"] == "stock":
            raw = await self.read._read(self.read.client.hgetall(self.read._key(event_id, "stock")))
            table = stock_table(raw)
            out["skus"] = [
                {"sku": sku, "price_minor": e["price_minor"]} for sku, e in sorted(table.items())
            ]
        return out
