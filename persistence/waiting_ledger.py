"""An event's waiting room from the ledger (ADR 0029): a rebuild puts it back as the ledger's
`waiting_rooms` and `waiting_moves` hold it (engine/waiting/restore.py replays them)."""

import asyncpg

from engine.model import keys
from engine.model.records import Marker
from engine.model.replies import QueueRestoreCode
from engine.store import Store
from engine.waiting.restore import Move, RoomSetup, replay, restore_room
from persistence.queries import Q

# A `waiting_moves` row's columns in Move's order, after its `move`.
MOVE_COLUMNS = ("login", "place", "place_from", "admissions", "hold_id", "at_ms")


async def restore_waiting_room(
    store: Store, conn: asyncpg.Connection, event_id: str
) -> tuple[QueueRestoreCode, int]:
    """Put the event's room back, while its rebuild holds it a DRAFT, and say how many places
    it has (0 when the ledger has no room for it: the keys are left as they are, so a room set
    up before the ledger recorded rooms stays as this Redis has it)."""
    row = await conn.fetchrow(Q["event_waiting_room"], event_id)
    if row is None:
        return QueueRestoreCode.RESTORED, 0
    setup = RoomSetup(
        row["admit_per_s"], row["admit_factor_pct"], row["admission_ttl_ms"], row["auto"],
        row["secret"],
    )  # fmt: skip
    rows = await conn.fetch(Q["event_waiting_moves"], event_id)
    line = replay(Move(Marker(r["move"]), *(r[c] for c in MOVE_COLUMNS)) for r in rows)
    on = keys.queue_keys(event_id, store.prefix)
    return await restore_room(store.runner, on, event_id, setup, line), len(line.entries)
