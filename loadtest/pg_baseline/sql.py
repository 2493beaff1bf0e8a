"""The PostgreSQL baseline's schema and statements (loadtest/pg_baseline/server.py describes the
design): one statement per claim, the sold-out flag's two reads, and the setup and audit of an
event. Every statement is a template over the schema name, which must be a plain identifier."""

import re
from enum import StrEnum

import asyncpg

from engine.model import keys
from engine.model.replies import CLAIM_REFUSALS

SCHEMA = "onsale_baseline"
SCHEMA_RE = re.compile(r"[a-z_][a-z0-9_]{0,62}")
SEAT_BATCH_MAX = 50_000  # seats per COPY at setup

DDL = """
create schema if not exists {s};
create table if not exists {s}.events (
    event_id text primary key,
    hold_ttl_ms bigint not null check (hold_ttl_ms > 0),
    seats_total integer not null
);
create table if not exists {s}.seats (
    event_id text not null,
    seat_id text not null,
    rank double precision not null,
    hold_id text,
    primary key (event_id, seat_id)
);
create index if not exists seats_free_by_rank on {s}.seats (event_id, rank, seat_id)
    where hold_id is null;
create table if not exists {s}.holds (
    event_id text not null,
    hold_id text not null,
    login text not null,
    seat_id text not null,
    expires_at timestamptz not null,
    created_at timestamptz not null default clock_timestamp(),
    primary key (event_id, hold_id)
);
"""

# $1 event_id, $2 hold_id (the idempotency key), $3 login. The hold goes in first: a concurrent
# attempt with the same key waits on the primary key and then inserts nothing, so `taken` marks
# nothing either; the lock taken on the chosen seat makes the update of `taken` certain. The two
# claims differ only in how the seat is chosen (the `seat` CTE), when it may be held, and what a
# claim that made nothing was refused for.
CLAIM = """
with ev as (
    select hold_ttl_ms from {{s}}.events where event_id = $1
), prior as (
    select login, seat_id, expires_at from {{s}}.holds where event_id = $1 and hold_id = $2
), seat as (
    select seat_id, hold_id from {{s}}.seats
    where event_id = $1 and {choose}
      and exists (select from ev) and not exists (select from prior)
    {lock}
), made as (
    insert into {{s}}.holds (event_id, hold_id, login, seat_id, expires_at)
    select $1, $2, $3, seat.seat_id, clock_timestamp() + ev.hold_ttl_ms * interval '1 millisecond'
    from seat cross join ev
    where seat.hold_id is null
    on conflict (event_id, hold_id) do nothing
    returning seat_id, expires_at
), taken as (
    update {{s}}.seats s set hold_id = $2
    from made
    where s.event_id = $1 and s.seat_id = made.seat_id and s.hold_id is null
    returning s.seat_id
)
select
    case
        when not exists (select from ev) then 'NOT_FOUND'
        when exists (select from prior where login = $3) then 'REPLAY'
        when exists (select from prior) then 'IDEMPOTENCY_KEY_REUSED'
        when exists (select from made) then 'OK'
        {refused}
    end as code,
    h.seat_id,
    (extract(epoch from h.expires_at) * 1000)::bigint as expires_ms,
    h.expires_at > clock_timestamp() as live,
    (select count(*) from taken) as taken
from (select) as one
left join (
    select seat_id, expires_at from made
    union all
    select seat_id, expires_at from prior
) h on true
"""

# Best available: the best free seat that no other claim has locked.
CLAIM_BEST = CLAIM.format(
    choose="hold_id is null",
    lock="order by rank, seat_id\n    limit 1\n    for update skip locked",
    refused="when exists (select from seat) then 'RACE'\n        else 'SOLD_OUT'",
)

# $4 seat_id. The seat is locked whatever its state (FOR UPDATE, no SKIP LOCKED): a concurrent
# claim of it is waited for, and the lock then returns the seat as that claim left it, so a
# retry racing its own first attempt sees its own key on the seat (RACE, run again: REPLAY)
# rather than seat_taken.
CLAIM_SEAT = CLAIM.format(
    choose="seat_id = $4",
    lock="for update",
    refused="when not exists (select from seat) then 'UNKNOWN_SEAT'\n"
    "        when exists (select from seat where hold_id is null or hold_id = $2) then 'RACE'\n"
    "        else 'SEAT_TAKEN'",
)

# Waits for every claim still holding a free-looking seat, then re-checks it: 0 = truly sold out.
# LIMIT 1 so that, when seats are free, it holds at most one of them for an instant.
FREE_SEATS_SETTLED = """
select count(*) from (
    select 1 from {s}.seats where event_id = $1 and hold_id is null limit 1 for update
) as free
"""

HOLDS_OF_EVENT = """
select hold_id, login, seat_id, (extract(epoch from expires_at) * 1000)::bigint as expires_ms
from {s}.holds where event_id = $1
"""

AUDIT = """
select
    (select count(*) from {s}.seats where event_id = $1) as seats,
    (select count(*) from {s}.seats where event_id = $1 and hold_id is not null) as held,
    (select count(distinct seat_id) from {s}.holds where event_id = $1) as distinct_seats_held,
    (select count(*) from {s}.holds where event_id = $1) as holds,
    (
        select count(*) from {s}.holds h
        join {s}.seats s
          on s.event_id = h.event_id and s.seat_id = h.seat_id and s.hold_id = h.hold_id
        where h.event_id = $1
    ) as holds_matching_seat
"""


def sql(template: str, schema: str) -> str:
    assert SCHEMA_RE.fullmatch(schema), schema
    return template.format(s=schema)


class Code(StrEnum):
    OK = "OK"
    REPLAY = "REPLAY"
    RACE = "RACE"  # a concurrent attempt with the same key won: run the claim again
    SOLD_OUT = "SOLD_OUT"
    SEAT_TAKEN = "SEAT_TAKEN"
    UNKNOWN_SEAT = "UNKNOWN_SEAT"
    NOT_FOUND = "NOT_FOUND"
    IDEMPOTENCY_KEY_REUSED = "IDEMPOTENCY_KEY_REUSED"


# The engine's own refusal table for the claim script: the same codes raise the same errors.
REFUSALS = CLAIM_REFUSALS


async def setup(
    dsn: str, event_id: str, seats: int, *, hold_ttl_ms: int = 600_000, schema: str = SCHEMA
) -> None:
    """Create the schema if needed and (re)load one event with seats s0..s{n-1}, rank = index."""
    assert keys.valid_id(event_id) and seats >= 1, (event_id, seats)
    conn = await asyncpg.connect(dsn, timeout=10, command_timeout=300)
    try:
        async with conn.transaction():
            await conn.execute(sql(DDL, schema))
            for table in ("holds", "seats", "events"):
                await conn.execute(
                    sql(f"delete from {{s}}.{table} where event_id = $1", schema), event_id
                )
            await conn.execute(
                sql("insert into {s}.events values ($1, $2, $3)", schema),
                event_id,
                hold_ttl_ms,
                seats,
            )
            for start in range(0, seats, SEAT_BATCH_MAX):
                await conn.copy_records_to_table(
                    "seats",
                    schema_name=schema,
                    columns=["event_id", "seat_id", "rank"],
                    records=(
                        (event_id, f"s{i}", float(i))
                        for i in range(start, min(seats, start + SEAT_BATCH_MAX))
                    ),
                )
        await conn.execute(sql("analyze {s}.events, {s}.seats, {s}.holds", schema))
    finally:
        await conn.close()


async def audit(dsn: str, event_id: str, *, schema: str = SCHEMA) -> dict[str, int]:
    """Counts over one snapshot: seats, held, distinct_seats_held, holds, holds_matching_seat.
    Clean when held == holds == distinct_seats_held == holds_matching_seat <= seats."""
    conn = await asyncpg.connect(dsn, timeout=10, command_timeout=60)
    try:
        row = await conn.fetchrow(sql(AUDIT, schema), event_id)
    finally:
        await conn.close()
    assert row is not None
    return {k: int(v) for k, v in row.items()}
