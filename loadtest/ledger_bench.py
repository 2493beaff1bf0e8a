"""executemany vs COPY for the ledger's decision batches, measured side by side.

    python -m loadtest.ledger_bench [--rows 50000] [--batch 500]

Creates a throwaway database on ONSALE_PG_DSN's server, applies the migrations, and writes the
same synthetic decisions twice (fresh tables each time): (a) what the writer does,
`executemany` of INSERT ... ON CONFLICT DO NOTHING; (b) COPY into a temporary table, then one
INSERT ... SELECT ... ON CONFLICT DO NOTHING. One transaction per batch in both."""

import argparse
import asyncio
import os
import time
import uuid

import asyncpg
from rich.console import Console
from rich.table import Table

from persistence import database
from persistence.migrate import migrate
from persistence.queries import Q

COLUMNS = (
    "event_id",
    "decision_id",
    "stream_ms",
    "stream_seq",
    "kind",
    "entity_id",
    "from_state",
    "to_state",
    "terminal",
    "hold_id",
    "charge_id",
    "seat_id",
    "login",
    "winner",
    "amount",
    "attempt_id",
    "intent_id",
    "policy",
    "reason",
    "decided_at_ms",
    "captured",
    "seq",
    "policy_version",
    "shadow_policy",
    "shadow_version",
    "shadow_outcome",
)


def rows(n: int, event_id: str) -> list[tuple[object, ...]]:
    return [
        (
            event_id,
            f"charge:c{i}:CHARGING",
            1_800_000_000_000 + i,
            0,
            "charge",
            f"c{i}",
            "",
            "CHARGING",
            False,
            f"h{i}",
            f"c{i}",
            f"s{i}",
            f"u{i}",
            "",
            4500,
            "",
            "",
            "quarantine",
            "started",
            1_800_000_000_000 + i,
            0,
            i + 1,
            1,
            "",
            0,
            "",
        )
        for i in range(n)
    ]


async def run_executemany(
    conn: asyncpg.Connection, data: list[tuple[object, ...]], batch: int
) -> float:
    started = time.perf_counter()
    for i in range(0, len(data), batch):
        async with conn.transaction():
            await conn.executemany(Q["insert_decision"], data[i : i + batch])
    return time.perf_counter() - started


async def run_copy(conn: asyncpg.Connection, data: list[tuple[object, ...]], batch: int) -> float:
    cols = ", ".join(COLUMNS)
    started = time.perf_counter()
    for i in range(0, len(data), batch):
        async with conn.transaction():
            await conn.execute(
                "create temp table staging (like decisions including defaults) on commit drop"
            )
            await conn.copy_records_to_table(
                "staging", records=data[i : i + batch], columns=COLUMNS
            )
            await conn.execute(
                f"insert into decisions ({cols}) select {cols} from staging "
                "on conflict (event_id, decision_id) do nothing"
            )
    return time.perf_counter() - started


async def main_async(n: int, batch: int) -> list[tuple[str, float]]:
    admin_dsn = os.environ.get("ONSALE_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
    name = f"onsale_bench_{uuid.uuid4().hex[:8]}"
    dsn = await database.create_database(admin_dsn, name)
    results = []
    try:
        conn = await asyncpg.connect(dsn)
        await migrate(conn)
        for label, fn in (
            ("executemany INSERT ON CONFLICT", run_executemany),
            ("COPY to temp + INSERT SELECT", run_copy),
        ):
            await conn.execute("truncate decisions, events cascade")
            await conn.execute("insert into events (event_id) values ('bench')")
            seconds = await fn(conn, rows(n, "bench"), batch)
            assert await conn.fetchval("select count(*) from decisions") == n
            results.append((label, n / seconds))
        await conn.close()
    finally:
        await database.drop_database(admin_dsn, name)
    return results


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--batch", type=int, default=500)
    args = ap.parse_args()
    results = asyncio.run(main_async(args.rows, args.batch))
    t = Table(title=f"ledger decision writes, {args.rows:,} rows in batches of {args.batch}")
    t.add_column("method")
    t.add_column("rows/s", justify="right")
    t.add_column("vs executemany", justify="right")
    for label, rate in results:
        t.add_row(label, f"{rate:,.0f}", f"{rate / results[0][1]:.2f}")
    Console().print(t)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
