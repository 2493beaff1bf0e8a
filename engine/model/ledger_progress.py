"""How far the ledger writer has got in one event's outbox, read from Redis itself (the ledger
group's position in the stream), so a dead writer shows: what is durable below the floor, how
many entries are behind and since when. Stream ids as (ms, seq) pairs."""

from dataclasses import dataclass
from typing import Any

LEDGER_GROUP = "ledger"  # the ledger writer's consumer group on every outbox


def stream_id(value: str) -> tuple[int, int]:
    ms, _, seq = value.partition("-")
    return int(ms), int(seq or 0)


@dataclass(frozen=True, slots=True)
class LedgerProgress:
    """How far the ledger writer has got in one event's outbox, read from Redis itself (so a
    dead writer shows): every entry below `floor` is committed in the ledger."""

    floor: tuple[int, int]
    behind: int  # entries not yet in the ledger (pending or never delivered)
    oldest_ms: int  # stream time of the oldest of them (0: none)


def ledger_group(groups: Any) -> dict[str, Any] | None:
    if not isinstance(groups, list):
        return None
    found: dict[str, Any] | None = next((g for g in groups if g["name"] == LEDGER_GROUP), None)
    return found


def ledger_floor(groups: Any, pending: Any) -> tuple[int, int] | None:
    """Every outbox entry below this id is committed in the ledger: below the oldest entry the
    ledger group holds pending, and past the last one it was delivered (the writer
    acknowledges only after its commit). None without a group: nothing is in the ledger."""
    group = ledger_group(groups)
    if group is None or isinstance(pending, Exception):
        return None
    delivered = stream_id(str(group["last-delivered-id"]))
    floor = (delivered[0], delivered[1] + 1)
    if pending["pending"]:
        floor = min(floor, stream_id(str(pending["min"])))
    return floor


def undelivered(group: dict[str, Any], delivered: tuple[int, int], last: Any) -> int:
    """Entries after the group's last delivered one. The group's own `lag` is used only when
    the stream has such entries: a promoted replica or a restarted server may report a lag for
    a group that has delivered the stream's last entry (its entries-read count is not kept)."""
    if not last or stream_id(str(last[0][0])) <= delivered:
        return 0
    return max(1, int(group.get("lag") or 0))
