"""One event's whole state in one atomic read (MULTI/EXEC on the event's slot): what the audit of
docs/invariants.md checks (engine/model/audit.py), taken by operators, reconciliation and tests,
never on a buyer's path."""

from typing import Any

import redis.asyncio as aioredis

from engine.model import keys
from engine.model.audit import Snapshot
from engine.model.holds import Charge, Hold

# The event's keys read whole, in the order of the snapshot's fields; `due` is read apart.
WHOLE = (
    ("hgetall", "event"), ("zrange", "seats"), ("zrange", "free"), ("hgetall", "owners"),
    ("hvals", "holds"), ("hvals", "charges"), ("xrange", "outbox"), ("zrange", "deadlines"),
    ("zrange", "quarantines"), ("zrange", "refunds"), ("zrange", "watch"), ("zrange", "ended"),
    ("hgetall", "logins"), ("hgetall", "quota"), ("hgetall", "stock"),
)  # fmt: skip


async def snapshot(
    client: "aioredis.Redis", prefix: str, event_id: str, index_keys: dict[str, str]
) -> Snapshot:
    """The event's keys, its score in the due index and its earliest deadline and quarantine
    end, and its score in each other index across events (`index_keys`, by kind) with the
    first entry of the zset it follows, all as of one moment."""
    async with client.pipeline(transaction=True) as pipe:
        for command, name in WHOLE:
            key = keys.event_key(event_id, name, prefix)
            getattr(pipe, command)(*((key, 0, -1) if command == "zrange" else (key,)))
        pipe.zscore(index_keys[keys.DUE], event_id)
        pipe.zrange(keys.event_key(event_id, "deadlines", prefix), 0, 0, withscores=True)
        pipe.zrange(keys.event_key(event_id, "quarantines", prefix), 0, 0, withscores=True)
        for kind, own in keys.FOLLOWS.items():
            pipe.zscore(index_keys[kind], event_id)
            pipe.zrange(keys.event_key(event_id, own, prefix), 0, 0, withscores=True)
        replies: list[Any] = await pipe.execute()
    ev, seats, free, owners, holds, charges, outbox, deadlines = replies[:8]
    quarantines, refunds, watch, ended, logins, quota, stock = replies[8:15]
    due, first_deadline, first_end = replies[15:18]
    indexed = {
        kind: (
            float(replies[18 + 2 * i]) if replies[18 + 2 * i] is not None else None,
            float(replies[19 + 2 * i][0][1]) if replies[19 + 2 * i] else None,
        )
        for i, kind in enumerate(keys.FOLLOWS)
    }
    earliest = [float(x[0][1]) for x in (first_deadline, first_end) if x]
    return Snapshot(
        event_id,
        ev,
        seats,
        free,
        owners,
        [Hold.from_json(r) for r in holds],
        [Charge.from_json(r) for r in charges],
        [f for _i, f in outbox],
        timers=(set(deadlines), set(quarantines), set(refunds), set(watch)),
        ended=set(ended),
        logins=dict(logins),
        bought={k[7:]: int(v) for k, v in quota.items() if k.startswith("bought:")},
        stock=stock or None,
        due=(float(due) if due is not None else None, min(earliest, default=None)),
        indexed=indexed,
    )
