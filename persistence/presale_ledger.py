"""An event's presale access codes from the ledger (ADR 0049): a rebuild puts every code back
with its window and terms, and each code's uses those of the sales the ledger holds (live holds
did not survive the loss, and their uses went with them)."""

from collections import defaultdict
from typing import Any

import asyncpg

from engine.model.replies import RestoreCode
from engine.store import Store
from persistence.queries import Q


async def restore_presales(store: Store, conn: asyncpg.Connection, event_id: str) -> int:
    """Put the event's codes back while its rebuild holds it a DRAFT; how many (0: none)."""
    rows = await conn.fetch(Q["event_presale_codes"], event_id)
    if not rows:
        return 0
    presales = {r["presale"]: [r["opens_at_ms"], r["closes_at_ms"]] for r in rows}
    codes = {
        r["code"]: {
            "presale": r["presale"],
            "uses": r["uses"],
            "per_login": r["per_login"],
            "expires_ms": r["expires_ms"],
        }
        for r in rows
    }
    used: dict[str, int] = defaultdict(int)
    for s in await conn.fetch(Q["event_code_sales"], event_id):
        used[f"u:{s['code']}"] += s["sales"]
        used[f"l:{s['code']}:{s['login']}"] += s["sales"]
    blob: dict[str, Any] = {"presales": presales, "codes": codes, "used": dict(used)}
    code = await store.presales.restore(event_id, blob)
    if code not in (RestoreCode.RESTORED, RestoreCode.EXISTS):
        raise RuntimeError(f"the presale codes of {event_id}: {code}")
    return len(codes)
