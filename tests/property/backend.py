"""The engine side of the state machine (tests/property/test_stateful.py): one event on one
Redis (fakeredis or real), its script calls and claims, and the views compared with the model's
(tests/property/model.py) after every step."""

from collections import Counter
from typing import Any

from engine.model import errors
from engine.model.holds import Charge, Hold
from engine.model.keys import EVENT_KEYS as KEY_NAMES
from engine.store import Store
from tests.property.model import Model, Reply, seat_list

COUNTERS = ("free", "held", "blocked", "sold")


def normalize(op: str, raw: list[Any]) -> Reply:
    """The parts of a script reply the model predicts."""
    code = str(raw[0])
    if op == "charge_start":
        if code == "OK":
            return ("OK", raw[1])
        if code in ("REPLAY",):
            return (code, raw[2])
        if code in ("HOLD_NOT_LIVE", "CHARGE_IN_FLIGHT"):
            return (code, raw[1])
        return (code,)
    if op in ("charge_outcome_v2", "charge_reversal", "hold_revoke"):
        return tuple(str(x) for x in raw)
    if op in ("hold_release", "charge_abandon", "charge_refund"):
        if code in ("RELEASED", "ALREADY_TERMINAL", "NOT_IN_FLIGHT", "NOT_REFUNDING"):
            return (code, raw[1])
        return (code,)
    raise AssertionError(op)


class Backend:
    def __init__(self, store: Store, event_id: str) -> None:
        self.store = store
        self.event_id = event_id
        self.k = dict(zip(KEY_NAMES, store.keys(event_id)[: len(KEY_NAMES)], strict=True))
        # The outbox is read once per step from where the last read stopped (exclusive).
        self.outbox_from = "-"
        self.terminal: Counter[tuple[str, str]] = Counter()

    async def call(self, op: str, args: list[Any]) -> list[Any]:
        return await self.store.scripts.call(op, self.store.keys(self.event_id), args)

    async def claim(
        self, hold_id: str, login: str, seats: tuple[str, ...], quantity: int, ttl: int
    ) -> Reply:
        """A claim through Store.claim, as the model answers it: OK seats replaced, REPLAY
        state seats, or the refusal's code."""
        try:
            got = await self.store.claim(
                self.event_id, login, hold_id, seats=seats, quantity=quantity
            )
        except errors.EngineError as refused:
            return (refused.code.upper(),)
        if got.replay:
            return ("REPLAY", got.state, seat_list(got.seat_ids))
        now = int(str(await self.store.client.hget(self.k["event"], "test_now_ms")))
        assert got.hold_id == hold_id and got.expires_ms == now + ttl, got
        return ("OK", seat_list(got.seat_ids), got.replaced)

    async def set_now(self, now: int) -> None:
        await self.store.client.hset(self.k["event"], "test_now_ms", now)

    async def snapshot(self) -> dict[str, Any]:
        """The engine's state as the model sees it, and the outbox records new since the last
        snapshot (`records`)."""
        k = self.k
        async with self.store.client.pipeline(transaction=True) as pipe:
            pipe.hvals(k["holds"])
            pipe.hvals(k["charges"])
            pipe.hgetall(k["owners"])
            pipe.zrange(k["free"], 0, -1)
            pipe.hgetall(k["logins"])
            pipe.zrange(k["refunds"], 0, -1)
            pipe.xrange(k["outbox"], min=self.outbox_from)
            pipe.hkeys(k["alerts"])
            pipe.hmget(k["event"], *COUNTERS)
            pipe.hgetall(k["quota"])
            replies = await pipe.execute()
        holds, charges, owners, free, logins, refunds, outbox, alerts, counters, quota = replies
        if outbox:
            self.outbox_from = f"({outbox[-1][0]}"
        records = [fields for _id, fields in outbox]
        self.terminal.update((f["kind"], f["id"]) for f in records if f["terminal"] == "1")
        return {
            "holds": hold_view(holds),
            "charges": charge_view(charges),
            "owners": {s: (v[0], v[2:]) for s, v in owners.items()},
            "free": set(free),
            "counters": {name: int(n or 0) for name, n in zip(COUNTERS, counters, strict=True)},
            "logins": logins,
            "bought": {
                f.removeprefix("bought:"): int(n)
                for f, n in quota.items()
                if f.startswith("bought:") and int(n)
            },
            "refunds": set(refunds),
            "terminal": self.terminal,
            "alerts": set(alerts),
            "records": records,  # new since the last snapshot
        }

    async def written(self) -> dict[str, Any]:
        """Everything a refused claim must leave as it was: the event's hashes and sets, and
        how many records its outbox holds."""
        k = self.k
        hashes = ("event", "owners", "holds", "charges", "logins", "quota", "callbacks")
        zsets = ("free", "deadlines", "quarantines", "refunds", "ended", "watch")
        async with self.store.client.pipeline(transaction=True) as pipe:
            for name in hashes:
                pipe.hgetall(k[name])
            for name in zsets:
                pipe.zrange(k[name], 0, -1, withscores=True)
            pipe.xlen(k["outbox"])
            return dict(zip((*hashes, *zsets, "outbox"), await pipe.execute(), strict=True))

    async def charges(self) -> list[str]:
        return [str(r) for r in await self.store.client.hvals(self.k["charges"])]


def hold_view(holds: list[str]) -> dict[str, tuple[Any, ...]]:
    """hold -> (state, its seats, charge in flight, blocking charge, winner)."""
    view = {}
    for raw in holds:
        h = Hold.from_json(raw)
        seats = seat_list(h.listing.split(","))
        view[h.hold_id] = (h.state, seats, h.charge_in_flight, h.blocking_charge, h.winner)
    return view


def charge_view(charges: list[str]) -> dict[str, tuple[Any, ...]]:
    """charge -> (state, resolve-by-refund, hold, amount asked, amount captured)."""
    view = {}
    for raw in charges:
        c = Charge.from_json(raw)
        view[c.charge_id] = (c.state, c.refund_only, c.hold_id, c.amount, c.captured)
    return view


def changes(was: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    """What differs between two `Backend.written` views: the fields of a hash, else the key."""
    out: dict[str, Any] = {}
    for name, value in now.items():
        if value == was[name]:
            continue
        if isinstance(value, dict):
            keys = set(value) | set(was[name])
            value = {
                k: (was[name].get(k), value.get(k))
                for k in keys
                if was[name].get(k) != value.get(k)
            }
        out[name] = value
    return out


def model_snapshot(m: Model) -> dict[str, Any]:
    return {
        "holds": {
            h.hold_id: (h.state, seat_list(h.seats), h.charge, h.blocking, h.winner)
            for h in m.holds.values()
        },
        "charges": {
            c.charge_id: (c.state, c.refund_only, c.hold_id, c.amount, c.captured)
            for c in m.charges.values()
        },
        "owners": dict(m.owners),
        "free": set(m.free),
        "counters": m.counters(),
        "logins": dict(m.logins),
        "bought": {login: n for login, n in m.bought.items() if n},
        "refunds": set(m.refunds),
        "terminal": Counter(m.terminal_records),
        "alerts": set(m.alerts),
    }
