"""What one batch of outbox records writes into the ledger, in two ways (ADR 0031).

- `bulk=True`, the writer's fast path for a batch of BULK_MIN records or more: COPY of the
  batch's `decisions` rows, and of the latest `holds` row of each hold in it, into this
  session's staging tables, then one INSERT ... SELECT of each into the ledger, in stream order
  (`charges`: one upsert of their latest rows, from arrays). A handful of statements for a
  batch of any size instead of one per row: under a burst of expiries the ledger's pace is
  PostgreSQL's work per row, not the protocol's per statement.
- Otherwise one statement per row (executemany), every intermediate state of a hold or charge
  written in turn: a small batch (the live trickle: no staging to pay for), and the slow path,
  where the writer replays a refused batch record by record to find and park the refused row
  (persistence/writer.py).

Both write the same final rows: a hold's or charge's upsert only moves it forward in stream
order, so writing its latest row alone ends where writing each in turn ends. Refunds, stock
corrections, a waiting room's changes and merchant webhook deliveries go row by row either
way (a room's joins come at the pace of its buyers' first looks, not of a burst of expiries)."""

from typing import Any, NamedTuple

import asyncpg

from engine.model.ledger_progress import stream_id
from engine.model.records import OutboxRecord
from persistence.ledger_rows import DECISION_COLUMNS, HOLD_COLUMNS, Rows, to_row
from persistence.notify import fan_out
from persistence.queries import Q

# Where a `holds` / `charges` row keeps its key and its stream position (ms, then seq).
HOLD_KEY, HOLD_AT = 1, 8
CHARGE_KEY, CHARGE_AT = 1, 10
BULK_MIN = 100  # a smaller batch goes row by row: staging costs a few statements of its own


def latest(rows: list[tuple[Any, ...]], key: int, at: int) -> list[tuple[Any, ...]]:
    """One row per key, its latest in stream order, ordered by that position."""
    last: dict[Any, tuple[Any, ...]] = {}
    for row in sorted(rows, key=lambda r: (r[at], r[at + 1])):
        last.pop(row[key], None)
        last[row[key]] = row
    return list(last.values())


def columns(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows -> one tuple per column (the statement's array parameters)."""
    return list(zip(*rows, strict=True))


class Batch(NamedTuple):
    """A batch's rows, built before its transaction: the writer builds the next batch's while
    PostgreSQL writes this one's (persistence/writer.py)."""

    records: list[tuple[str, OutboxRecord]]
    decisions: list[tuple[Any, ...]]
    rows: Rows
    holds: list[tuple[Any, ...]]  # each hold's latest row, in stream order (the fast path's)
    charges: list[tuple[Any, ...]]  # each charge's latest row, likewise


class Ahead(NamedTuple):
    """An event's next batch, read (pending for the writer) while the one before it was
    written, and its rows built then too, when read that way (None: built at its write)."""

    entries: list[tuple[str, Any]]
    batch: Batch | None


def records_of(entries: list[tuple[str, dict[str, str]]]) -> list[tuple[str, OutboxRecord]]:
    return [(sid, OutboxRecord.from_fields(fields)) for sid, fields in entries]


def batch_of(records: list[tuple[str, OutboxRecord]]) -> Batch:
    rows = Rows()
    for sid, r in records:
        rows.add(sid, r)
    return Batch(
        records,
        [to_row(r.event_id, sid, r) for sid, r in records],
        rows,
        latest(rows.holds, HOLD_KEY, HOLD_AT),
        latest(rows.charges, CHARGE_KEY, CHARGE_AT),
    )


async def apply_records(conn: asyncpg.Connection, b: Batch, *, bulk: bool) -> None:
    """A batch's records (batch_of): decisions appended; holds and charges moved forward in
    stream order; refunds and stock corrections kept; merchant notifications' deliveries
    written (ADR 0024)."""
    if not b.records:
        return
    rows = b.rows
    if bulk and len(b.records) >= BULK_MIN:
        await conn.execute(Q["stage_decisions"])
        await conn.copy_records_to_table(
            "staged_decisions", records=b.decisions, columns=DECISION_COLUMNS
        )
        await conn.execute(Q["insert_staged_decisions"])
        if b.holds:
            await conn.execute(Q["stage_holds"])
            await conn.copy_records_to_table("staged_holds", records=b.holds, columns=HOLD_COLUMNS)
            await conn.execute(Q["upsert_staged_holds"])
        if b.charges:
            await conn.execute(Q["bulk_upsert_charges"], *columns(b.charges))
    else:
        await conn.executemany(Q["insert_decision"], b.decisions)
        for query, rows_of in (("upsert_hold", rows.holds), ("upsert_charge", rows.charges)):
            if rows_of:
                await conn.executemany(Q[query], rows_of)
    for query, more in (
        ("insert_refund", rows.refunds),
        ("insert_stock_correction", rows.corrections),
        ("upsert_waiting_room", rows.rooms),
        ("insert_waiting_move", rows.waiting),
        ("insert_presale_code", rows.codes),
        ("insert_code_use", rows.code_uses),
    ):
        if more:
            await conn.executemany(Q[query], more)
    await fan_out(conn, b.records[0][1].event_id, [r for _s, r in b.records])


async def apply_raw_callbacks(
    pool: asyncpg.Pool, event_id: str, entries: list[tuple[str, dict[str, Any]]]
) -> int:
    """Verified callbacks (the event's raw_callbacks stream), byte for byte, the first
    delivery of each provider event kept; returns how many were offered."""
    rows = [
        (f["provider_event_id"], event_id, _bytes(f["body"]), stream_id(entry_id)[0])
        for entry_id, f in entries
    ]
    async with pool.acquire() as conn, conn.transaction():
        await conn.executemany(Q["insert_raw_callback"], rows)
    return len(rows)


def _bytes(body: str | bytes) -> bytes:
    return body.encode() if isinstance(body, str) else body
