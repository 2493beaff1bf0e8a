"""Reads of what the scripts store, each bounded and under the store's timeout: the API's views,
operators, workers and reconciliation. Reads decide nothing: only a script call changes state
(engine/store/transitions.py)."""

import asyncio
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis

from engine.model import errors, keys
from engine.model.audit import AuditReport, audit
from engine.model.event_config import EventConfig
from engine.model.event_details import EventDetails
from engine.model.holds import Alert, Availability, Charge, Hold
from engine.model.ledger_progress import (
    LEDGER_GROUP,
    LedgerProgress,
    ledger_floor,
    ledger_group,
    stream_id,
    undelivered,
)
from engine.store.cluster import is_cluster, is_outage
from engine.store.event_index import EventIndex
from engine.store.pipeline import AutoPipeline
from engine.store.snapshot import snapshot


async def timed(coro: Any, timeout_s: float) -> Any:
    """One Redis read under a timeout; an outage is StoreUnavailable."""
    try:
        async with asyncio.timeout(timeout_s):
            return await coro
    except Exception as exc:
        if is_outage(exc):  # engine/store/cluster.py: on one server or a cluster
            raise errors.StoreUnavailable(repr(exc)) from exc
        raise


PER_EVENT_CHUNK = 1_000  # events one pipelined round trip reads
SEEN_MAX = 100_000  # events this process remembers having answered for


class Reads:
    def __init__(
        self, client: "aioredis.Redis", *, prefix: str, timeout_s: float, window_ms: int = 0
    ) -> None:
        self.client, self.prefix, self.timeout_s = client, prefix, timeout_s
        self.window_ms = window_ms  # the claims' idempotency window: a hold id's suffix
        self.index = EventIndex(client, prefix=prefix, read=self._read)  # which events exist
        # Events this process answered for: one Redis no longer has is being recovered, from
        # the first moment (before the ledger writer's look marks it lost).
        self.seen: set[str] = set()
        self.pipeline: AutoPipeline | None = None  # the store's, once it has one (`_command`)

    def _command(self, *args: Any) -> Any:
        """A read whose raw reply is its value (HGET, HMGET), with its tick's script calls."""
        if self.pipeline is not None:
            return self.pipeline.command(*args)
        return self.client.execute_command(*args)  # type: ignore[no-untyped-call]

    def saw(self, event_id: str) -> None:
        if len(self.seen) < SEEN_MAX:
            self.seen.add(event_id)

    async def _read(self, coro: Any) -> Any:
        return await timed(coro, self.timeout_s)

    def _key(self, event_id: str, name: str) -> str:
        return keys.event_key(event_id, name, self.prefix)

    async def status(self, event_id: str) -> str | None:
        """The event's status as its hash holds it, whatever state it is in (None: none)."""
        found: str | None = await self._read(
            self.client.hget(self._key(event_id, "event"), "status")
        )
        return found

    async def event_exists(self, event_id: str) -> bool:
        return bool(await self._read(self.client.exists(self._key(event_id, "event"))))

    async def event_ids(self) -> list[str]:
        return await self.index.ids()

    async def availability(self, event_id: str) -> Availability:
        raw = await self._read(self.client.hgetall(self._key(event_id, "event")))
        if "status" not in raw:  # none, or only a rebuild's first marks: not an event yet
            if await self.recovering(event_id):
                raise errors.Recovering(f"event {event_id} is being recovered; retry later")
            raise errors.EventNotFound(event_id)
        if raw.get("rebuilding") == "1":  # half built: its counters are not the sale's yet
            raise errors.Recovering(f"event {event_id} is being recovered; retry later")
        self.saw(event_id)
        return Availability(
            event_id=event_id,
            status=raw["status"],
            opens_at_ms=int(raw["opens_at_ms"]),
            config=EventConfig.of(raw),
            seats_total=int(raw["seats_total"]),
            free=int(raw["free"]),
            held=int(raw["held"]),
            blocked=int(raw["blocked"]),
            sold=int(raw["sold"]),
            price_minor=int(raw.get("price_minor", 0)),
            kind=raw.get("kind", "seats"),
            details=EventDetails.of(raw),
        )

    async def hold(self, event_id: str, hold_id: str) -> Hold:
        raw = await self._read(self._command("HGET", self._key(event_id, "holds"), hold_id))
        if raw is None:
            if await self.recovering(event_id):
                raise errors.Recovering(f"event {event_id} is being recovered; retry later")
            if await self.lost_in_recovery(event_id, hold_id):
                raise errors.HoldLost(f"hold {hold_id} predates the rebuild of {event_id}")
            raise errors.HoldNotFound(f"hold {hold_id}")
        self.saw(event_id)
        return Hold.from_json(raw)

    async def live_hold(self, event_id: str, login: str) -> str | None:
        """The login's live hold in the event (RESERVED, or QUARANTINED while its payment
        resolves), if any: the one checkout a login has at a time."""
        found: str | None = await self._read(
            self._command("HGET", self._key(event_id, "logins"), login)
        )
        return found

    async def lost_in_recovery(self, event_id: str, hold_id: str) -> bool:
        """A hold id made before the event was rebuilt from the ledger (its window, the suffix
        lua/hold_claim.lua gives it, began before the rebuild), which the rebuild does not
        have: it was RESERVED without money when Redis lost it (ADR 0037)."""
        base, sep, window = hold_id.rpartition(":")
        if not (self.window_ms and sep and base and window.isdigit()):
            return False
        (restored,) = await self.event_fields(event_id, "restored_at_ms")
        return restored is not None and int(window) * self.window_ms < int(restored)

    async def sale_status(self, event_id: str, hold_id: str, record: str) -> str:
        """What may be said of a decided sale whose last outbox record is `record`, in one
        round trip (ADR 0016, 0017): "pending" (the ledger does not hold it yet), "fenced" (this
        Redis went back in time), "refused" (the ledger holds another decision for it), or
        "told"."""
        stream = self._key(event_id, "outbox")
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.xinfo_groups(stream)
            pipe.xpending(stream, LEDGER_GROUP)
            pipe.hget(self._key(event_id, "event"), "status")
            # Sent raw: the cluster client's MULTI hands a typed HEXISTS its routing keys as
            # arguments of its reply parser, which then fails (an int comes back instead).
            pipe.execute_command("HEXISTS", self._key(event_id, "refused"), hold_id)
            groups, pending, status, refused = await self._read(pipe.execute(raise_on_error=False))
        floor = ledger_floor(groups, pending)
        if floor is None or stream_id(record) >= floor:
            return "pending"
        return "fenced" if status == "fenced" else "refused" if int(refused) else "told"

    async def event_fields(self, event_id: str, *names: str) -> list[str | None]:
        fields: list[str | None] = await self._read(
            self._command("HMGET", self._key(event_id, "event"), *names)
        )
        return fields

    async def recovering(self, event_id: str) -> bool:
        """Whether this Redis cannot answer truthfully for the event (ADR 0017): it lost it
        (restarted empty), went back in time (fenced), or is being rebuilt. Asked only on the
        way to a refusal, never on the hot path."""
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.hmget(self._key(event_id, "event"), ["status", "rebuilding"])
            pipe.hexists(keys.lost_events(self.prefix), event_id)
            (status, rebuilding), lost = await self._read(pipe.execute())
        gone = status is None and (bool(lost) or event_id in self.seen)
        return gone or status == "fenced" or rebuilding == "1"

    async def charge(self, event_id: str, charge_id: str) -> Charge:
        raw = await self._read(self._command("HGET", self._key(event_id, "charges"), charge_id))
        if raw is None:
            raise errors.ChargeNotFound(f"charge {charge_id}")
        return Charge.from_json(raw)

    async def charges(self, event_id: str, charge_ids: Sequence[str]) -> list[Charge]:
        if not charge_ids:
            return []
        rows = await self._read(self._command("HMGET", self._key(event_id, "charges"), *charge_ids))
        return [Charge.from_json(r) for r in rows if r is not None]

    async def scan_charges(
        self, event_id: str, count: int = 500, limit: int = 1_000_000
    ) -> list[Charge]:
        """The event's charges, at most `limit` (HSCAN pages of `count`, each page under the
        store's timeout): for operators and reconciliation, never for the request path."""
        out: list[Charge] = []
        key = self._key(event_id, "charges")
        cursor: int = 0
        while True:
            cursor, page = await self._read(self.client.hscan(key, cursor, count=count))
            out += [Charge.from_json(raw) for raw in page.values()]
            if cursor == 0 or len(out) >= limit:
                return out[:limit]

    async def watched(
        self, event_id: str, since_ms_max: int, offset: int = 0, limit: int = 1000
    ) -> tuple[int, list[Charge]]:
        """One page of the watch index (charges CHARGING since, or DECLINED/FAILED since, at
        most `since_ms_max`), oldest first: what provider reconciliation asks about. Returns how
        many index entries the page covered, and their charges."""
        ids = await self._read(
            self.client.zrangebyscore(
                self._key(event_id, "watch"), "-inf", since_ms_max, start=offset, num=limit
            )
        )
        return len(ids), await self.charges(event_id, ids)

    async def indexed(self, kind: str, upto_ms: int, limit: int = 10_000) -> list[str]:
        """The events whose score in the index across events `kind` (engine/model/keys.py
        INDEXES) is at most `upto_ms`: one ZRANGEBYSCORE on a single server; on a
        cluster, one per slot that has events, pipelined. At most `limit` per index read (the
        rest: the next pass)."""
        if is_cluster(self.client):
            names = {keys.index_key(kind, e, self.prefix, cluster=True)
                     for e in await self.event_ids()}  # fmt: skip
        else:
            names = {keys.index_key(kind, "", self.prefix)}
        async with self.client.pipeline(transaction=False) as pipe:
            for name in sorted(names):
                pipe.zrangebyscore(name, "-inf", upto_ms, start=0, num=limit)
            replies = await self._read(pipe.execute())
        return [str(e) for reply in replies for e in reply]

    async def with_entries_upto(
        self, event_ids: Sequence[str], index: str, upto_ms: int
    ) -> list[str]:
        """The events whose timed index `index` (watch, refunds, ...) has an entry scored at
        most `upto_ms` (one ZCOUNT each, read for every event at once)."""
        counts = await self._per_event(
            event_ids, lambda pipe, e: pipe.zcount(self._key(e, index), "-inf", upto_ms)
        )
        return [e for e, n in zip(event_ids, counts, strict=True) if int(n)]

    async def ledger_progress(self, event_id: str) -> LedgerProgress:
        """The ledger group's position in the event's outbox: below the oldest entry it holds
        pending, and past the last one it was delivered; nothing is durable without a group."""
        stream = self._key(event_id, "outbox")
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.xinfo_groups(stream)
            pipe.xpending(stream, LEDGER_GROUP)
            pipe.xrange(stream, count=1)
            pipe.xrevrange(stream, count=1)
            replies = await self._read(pipe.execute(raise_on_error=False))
        groups, pending, first, last = replies
        floor = ledger_floor(groups, pending)
        if floor is None:
            oldest = stream_id(first[0][0])[0] if first else 0
            length = int(await self._read(self.client.xlen(stream)))
            return LedgerProgress((0, 0), length, oldest)
        group = ledger_group(groups)
        assert group is not None
        delivered = stream_id(str(group["last-delivered-id"]))
        behind = undelivered(group, delivered, last) + int(pending["pending"])
        oldest_ms = 0
        if pending["pending"]:
            oldest_ms = floor[0]
        elif behind:
            after = await self._read(
                self.client.xrange(stream, min=f"({delivered[0]}-{delivered[1]}", count=1)
            )
            oldest_ms = stream_id(after[0][0])[0] if after else 0
        return LedgerProgress(floor, behind, oldest_ms)

    async def quarantined(self, event_id: str) -> list[Hold]:
        """Holds whose seat is BLOCKED (quarantined, or released with money in flight)."""
        ids = await self._read(self.client.zrange(self._key(event_id, "quarantines"), 0, -1))
        if not ids:
            return []
        rows = await self._read(self.client.hmget(self._key(event_id, "holds"), ids))
        return [Hold.from_json(r) for r in rows if r is not None]

    async def free_seats(self, event_id: str, limit: int = 100) -> list[str]:
        """The best `limit` free seats by rank (a hint: only a claim makes one yours)."""
        members: list[str] = await self._read(
            self.client.zrange(self._key(event_id, "free"), 0, max(0, limit - 1))
        )
        return members

    async def alerts(self, event_id: str, limit: int = 500) -> list[Alert]:
        """The event's alerts (provider messages refused or only partly applied), newest first."""
        raw: Any = await self._read(self.client.hvals(self._key(event_id, "alerts")))
        found = sorted((Alert.from_json(r) for r in raw), key=lambda a: -a.at_ms)
        return found[:limit]

    async def attempts(self, event_id: str) -> dict[str, str]:
        """Provider attempt id -> charge id (reconciliation only)."""
        raw: Any = await self._read(self.client.hgetall(self._key(event_id, "attempts")))
        return dict(raw)

    async def raw_callbacks(self, event_id: str, count: int = 1000) -> list[dict[str, str]]:
        entries = await self._read(
            self.client.xrange(self._key(event_id, "raw_callbacks"), count=count)
        )
        return [fields for _id, fields in entries]

    async def due_refunds(self, event_id: str, now_ms: int, limit: int = 100) -> list[str]:
        """Charges whose refund is due (REFUNDING, or a re-refund after REFUNDED)."""
        members: list[str] = await self._read(
            self.client.zrangebyscore(
                self._key(event_id, "refunds"), "-inf", now_ms, start=0, num=limit
            )
        )
        return members

    async def due_refunds_of(
        self, event_ids: Sequence[str], now_ms: int, limit: int = 100
    ) -> dict[str, list[str]]:
        """Each event's due refunds (as due_refunds), read for every event at once; only the
        events with something due are in the answer."""
        replies = await self._per_event(
            event_ids,
            lambda pipe, e: pipe.zrangebyscore(
                self._key(e, "refunds"), "-inf", now_ms, start=0, num=limit
            ),
        )
        return {e: list(r) for e, r in zip(event_ids, replies, strict=True) if r}

    async def _per_event(self, event_ids: Sequence[str], read: Any) -> list[Any]:
        """One read per event (`read(pipe, event_id)` queues it), pipelined a thousand events a
        round trip: a pass over many events with nothing due costs a few round trips."""
        replies: list[Any] = []
        for start in range(0, len(event_ids), PER_EVENT_CHUNK):
            async with self.client.pipeline(transaction=False) as pipe:
                for event_id in event_ids[start : start + PER_EVENT_CHUNK]:
                    read(pipe, event_id)
                replies += await self._read(pipe.execute())
        return replies

    async def server_time_ms(self) -> int:
        seconds, micros = await self._read(self.client.time())
        return int(seconds) * 1000 + int(micros) // 1000

    async def outbox_entries(
        self, event_id: str, count: int = 1_000_000, *, newest: bool = False
    ) -> list[tuple[str, dict[str, str]]]:
        """(stream id, record) pairs, oldest first (or the `count` newest, newest first)."""
        stream = self._key(event_id, "outbox")
        read = (
            self.client.xrevrange(stream, count=count)
            if newest
            else self.client.xrange(stream, count=count)
        )
        entries: Any = await self._read(read)
        return [(str(sid), fields) for sid, fields in entries]

    async def holds(self, event_id: str) -> dict[str, Hold]:
        """Every hold of the event (operators and reconciliation only)."""
        raw: Any = await self._read(self.client.hgetall(self._key(event_id, "holds")))
        return {hid: Hold.from_json(v) for hid, v in raw.items()}

    async def outbox(self, event_id: str, count: int = 100_000) -> list[dict[str, str]]:
        entries = await self._read(self.client.xrange(self._key(event_id, "outbox"), count=count))
        return [fields for _id, fields in entries]

    async def audit(self, event_id: str) -> AuditReport:
        """Check docs/invariants.md over one atomic snapshot (engine/store/snapshot.py)."""
        cluster = is_cluster(self.client)
        index = {k: keys.index_key(k, event_id, self.prefix, cluster=cluster) for k in keys.INDEXES}
        return audit(await self._read(snapshot(self.client, self.prefix, event_id, index)))
