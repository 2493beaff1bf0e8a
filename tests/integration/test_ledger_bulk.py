"""The ledger writer's fast path (staged COPY, latest row per hold and charge) against its
row-by-row path, on real PostgreSQL: for any stream of records, replays and batch cuts, both
leave the same decisions, holds, charges and refunds (persistence/ledger_apply.py, ADR 0031)."""

import asyncio
import itertools
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.model.records import OUTBOX_FIELDS, OutboxRecord
from persistence import ledger_apply
from persistence.ledger_apply import apply_records, batch_of
from persistence.migrate import migrate
from tests.pg import private_database

pytestmark = [pytest.mark.postgres]

# Each entity's possible lives, in order (the last one of a path is its terminal decision).
HOLD_PATHS = [
    ["QUARANTINED", "CONFIRMED"],
    ["EXPIRED"],
    ["QUARANTINED", "RELEASED"],
    ["CONFIRMED", "REVOKED"],
    ["CONFIRMED"],
]
CHARGE_PATHS = [
    ["CHARGING", "CAPTURED"],
    ["CHARGING", "DECLINED"],
    ["CHARGING", "CAPTURED", "REFUNDING", "REFUNDED"],
    ["CHARGING", "CAPTURED", "PROVIDER_REFUNDED"],
]


def record(
    event_id: str, n: int, kind: str, i: int, was: str, to: str, last: bool
) -> dict[str, str]:
    """The outbox fields of decision number n (what lua/_lib.lua `emit` writes)."""
    f = dict.fromkeys(OUTBOX_FIELDS, "")
    f.update(
        decision_id=f"{kind}:{kind[0]}{i}:{to}",
        event=event_id,
        kind=kind,
        id=f"{kind[0]}{i}",
        to=to,
        terminal="1" if last and kind == "hold" else "0",
        hold=f"h{i}",
        charge=f"c{i}" if kind == "charge" else "",
        seat=f"s{i}",
        login=f"u{i}",
        amount="4500",
        policy="quarantine",
        reason="test",
        now_ms=str(1_800_000_000_000 + n),
        captured="4500" if to not in ("CHARGING", "DECLINED") else "0",
        seq=str(n),
        policy_version="1",
        shadow_version="0",
    )
    f["from"] = was
    return f


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[tuple[str, ...]], list[int], list[int]]:
    """Interleaved lives of a few holds and charges (as (kind, i, from, to, last) steps in a
    stream order that keeps each entity's own order), the positions replayed, and the cuts."""
    entities = []
    for i in range(draw(st.integers(1, 4))):
        entities.append(("hold", i, "RESERVED", draw(st.sampled_from(HOLD_PATHS))))
        if draw(st.booleans()):
            entities.append(("charge", i, "", draw(st.sampled_from(CHARGE_PATHS))))
    queues = [
        [
            (kind, i, path[j - 1] if j else first, to, j == len(path) - 1)
            for j, to in enumerate(path)
        ]
        for kind, i, first, path in entities
    ]
    steps: list[tuple[Any, ...]] = []
    while any(queues):
        q = draw(st.sampled_from([q for q in queues if q]))
        steps.append(q.pop(0))
    replays = draw(st.lists(st.integers(0, len(steps) - 1), max_size=4))
    cuts = sorted(draw(st.lists(st.integers(1, len(steps) + 4), max_size=3)))
    return steps, replays, cuts


@pytest.fixture(scope="module")
def ledger_conn() -> Any:
    """One migrated private database for the module, and a loop to drive it."""
    loop = asyncio.new_event_loop()
    cm = private_database()
    dsn = loop.run_until_complete(cm.__aenter__())
    conn = loop.run_until_complete(asyncpg.connect(dsn))
    loop.run_until_complete(migrate(conn))
    yield loop, conn
    loop.run_until_complete(conn.close())
    loop.run_until_complete(cm.__aexit__(None, None, None))
    loop.close()


async def write(
    conn: asyncpg.Connection, event_id: str, entries: list[Any], cuts: list[int], bulk: bool
) -> None:
    await conn.execute("insert into events (event_id) values ($1)", event_id)
    bounds = [0, *cuts, len(entries)]
    for a, b in itertools.pairwise(bounds):
        batch = [(sid, OutboxRecord.from_fields(f)) for sid, f in entries[a:b]]
        async with conn.transaction():
            await apply_records(conn, batch_of(batch), bulk=bulk)


async def ledger(conn: asyncpg.Connection, event_id: str) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    for table, key in (
        ("decisions", "stream_ms, stream_seq"),
        ("holds", "hold_id"),
        ("charges", "charge_id"),
        ("refunds", "charge_id"),
    ):
        rows = await conn.fetch(
            f"select * from {table} where event_id = $1 order by {key}", event_id
        )
        out[table] = [
            tuple(v for k, v in r.items() if k not in ("event_id", "recorded_at")) for r in rows
        ]
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(stream=streams())
def test_the_fast_path_leaves_the_ledger_the_row_path_leaves(
    ledger_conn: Any,
    stream: tuple[list[tuple[Any, ...]], list[int], list[int]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop, conn = ledger_conn
    monkeypatch.setattr(ledger_apply, "BULK_MIN", 1)  # every batch staged, however small
    steps, replays, cuts = stream
    tag = loop.run_until_complete(conn.fetchval("select count(*) from events"))
    results = []
    for bulk in (False, True):
        event_id = f"e{tag}-{'bulk' if bulk else 'rows'}"
        entries = [
            (f"{1_800_000_000_000 + n}-0", record(event_id, n, *step))
            for n, step in enumerate(steps, start=1)
        ]
        for at in replays:  # a batch delivered again (say, after a crash before the ack)
            entries.append(entries[at])
        loop.run_until_complete(write(conn, event_id, entries, cuts, bulk))
        results.append(loop.run_until_complete(ledger(conn, event_id)))
    assert results[0] == results[1]
    assert len(results[1]["decisions"]) == len(steps)  # replays wrote nothing twice
