"""The PostgreSQL-only baseline: the claim endpoint a team would build without Redis, behind the
same HTTP layer, so that a benchmark compares the two designs and nothing else.

    python -m loadtest.pg_baseline [--port 8300] [--workers 2]
    (ONSALE_PG_DSN, ONSALE_TOKEN_SECRET; optional ONSALE_BASELINE_SCHEMA, ONSALE_PG_POOL_MAX,
    ONSALE_PG_TIMEOUT_MS, ONSALE_SOLD_OUT_TTL_MS, ONSALE_TOKEN_TTL_S, ONSALE_HTTP_KEEPALIVE_S)

The contract is the engine's claim, `POST /v1/events/{event_id}/holds`: a bearer token signed
as api/context.py signs it, `Idempotency-Key` = hold id, body `{}` (best available) or
`{"seat_id": ...}`; 201 for a new hold, 200 for a replay by the same login, and the error codes
and envelope of api/errors.py. Served by uvicorn exactly as `onsale serve` serves the API.

A competent design, not a straw man:
- One statement per claim. A CTE reads the event and any hold with this key, locks the best free
  seat by rank (FOR UPDATE SKIP LOCKED) or the wanted seat (FOR UPDATE), inserts the hold, marks
  the seat and returns the outcome. The hold row goes in before the seat is marked: a retry that
  races its own first attempt waits on the hold's primary key, inserts nothing and marks
  nothing; it is then run once more and answers the replay.
- A partial index on the free seats by rank. The asyncpg pool opens every connection at boot and
  runs each statement there once (its statement cache keeps them prepared), so a claim is one
  Bind/Execute round trip; the pool's reset on release is skipped (no connection state changes).
  Sequential scans are off on those connections: every access is by an index, and a plan cached
  while the holds table was empty must not scan it once it is large.
- A sold-out shortcut per process. A best-available claim answered SOLD_OUT raises, in the
  background and on a side connection (not behind the queue of the pool), a flag for the event:
  first a locking read of the free seats waits for every claim still holding a seat lock (SKIP
  LOCKED answers "no free seat I can lock", not "no free seat"), and only if none is left are
  the event's holds loaded into memory. While the flag is up (ONSALE_SOLD_OUT_TTL_MS, 200 ms by
  default) best-available claims are answered without PostgreSQL, before and again after
  waiting for a pooled connection: a key found in the snapshot gets its hold back (200), or
  idempotency_key_reused for another login; any other key gets sold_out. The snapshot is
  complete because no seat can be taken once none is free and a hold is never deleted.
  When it lapses, the next sold_out from PostgreSQL raises it again. Claims of a specific seat
  always go to PostgreSQL.

Simplifications, on purpose: no "one active hold per login" rule; holds never end (expires_at is
stored and a replay reports EXPIRED past it, but no sweeper frees seats); a sale is open once it
is set up. Its own schema (onsale_baseline by default) keeps it apart from the ledger tables.
A best-available retry that races its own first attempt while every free seat is locked may be
told sold_out although the first attempt then commits; the next retry gets the hold (200)."""

import argparse
import asyncio
import contextlib
import logging
import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import IO, Any

import asyncpg
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from api.app import CLAIM_PATH
from api.context import Tokens
from api.errors import ApiError, error_response, from_engine
from api.hotpath import HotRoute
from api.responses import json_response
from api.routes.checkout import claim_input, claimed_response
from engine import errors, keys
from engine.holds import Claimed
from engine.scripts import CLAIM_REFUSALS
from engine.settings import MissingSetting, int_setting
from engine.states import HoldState
from loadtest.stack import spare_port, wait_healthy

log = logging.getLogger("onsale.pg_baseline")

SCHEMA = "onsale_baseline"
_SCHEMA_RE = re.compile(r"[a-z_][a-z0-9_]{0,62}")
RACE_RETRIES_MAX = 3  # a claim that lost its key to a concurrent attempt is run again
SEAT_BATCH_MAX = 50_000  # seats per COPY at setup
PG_UNAVAILABLE = (
    TimeoutError,
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.TooManyConnectionsError,
    asyncpg.CannotConnectNowError,
)


@dataclass(frozen=True)
class BaselineSettings:
    pg_dsn: str
    token_secret: str  # same secret and salt as the API: the same tokens work on both
    schema: str = SCHEMA
    token_ttl_s: int = 3_600
    pg_pool_max: int = 8  # connections per process, all opened at boot
    pg_timeout_ms: int = 5_000  # the whole claim: pool wait, statement, retries
    sold_out_ttl_ms: int = 200  # how long a process answers sold_out without PostgreSQL
    body_max_bytes: int = 16 * 1024

    def __post_init__(self) -> None:
        if not _SCHEMA_RE.fullmatch(self.schema):
            raise MissingSetting(f"ONSALE_BASELINE_SCHEMA must match {_SCHEMA_RE.pattern}")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "BaselineSettings":
        dsn, secret = env.get("ONSALE_PG_DSN"), env.get("ONSALE_TOKEN_SECRET")
        if not dsn:
            raise MissingSetting("ONSALE_PG_DSN is not set (e.g. postgresql://u@127.0.0.1/db)")
        if not secret:
            raise MissingSetting("ONSALE_TOKEN_SECRET is not set")
        return cls(
            pg_dsn=dsn,
            token_secret=secret,
            schema=env.get("ONSALE_BASELINE_SCHEMA") or cls.schema,
            token_ttl_s=int_setting(env, "ONSALE_TOKEN_TTL_S", cls.token_ttl_s),
            pg_pool_max=int_setting(env, "ONSALE_PG_POOL_MAX", cls.pg_pool_max),
            pg_timeout_ms=int_setting(env, "ONSALE_PG_TIMEOUT_MS", cls.pg_timeout_ms),
            sold_out_ttl_ms=int_setting(env, "ONSALE_SOLD_OUT_TTL_MS", cls.sold_out_ttl_ms),
            body_max_bytes=int_setting(env, "ONSALE_BODY_MAX_BYTES", cls.body_max_bytes),
        )


# -- SQL ---------------------------------------------------------------------------------------

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
    assert _SCHEMA_RE.fullmatch(schema), schema
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


# -- setup and audit ---------------------------------------------------------------------------


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


# -- the claim ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KnownHold:
    login: str
    seat_id: str
    expires_ms: int


@dataclass(frozen=True, slots=True)
class SoldOutFlag:
    until: float  # time.monotonic()
    holds: Mapping[str, KnownHold]  # every hold of the event, by hold id


def _state(live: bool) -> HoldState:
    return HoldState.RESERVED if live else HoldState.EXPIRED


async def _keep_connection_state(conn: asyncpg.Connection) -> None:
    """Pool reset on release: nothing to undo (no SET, LISTEN or advisory lock is ever used), so
    the default RESET ALL round trip is skipped."""


@dataclass
class Baseline:
    settings: BaselineSettings
    pool: Any = None  # asyncpg.Pool
    side: Any = None  # asyncpg.Connection of the sold-out refresh, outside the pool's queue
    flags: dict[str, SoldOutFlag] = field(default_factory=dict)
    refreshing: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    side_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def __post_init__(self) -> None:
        s = self.settings.schema
        self.claim_best_sql = sql(CLAIM_BEST, s)
        self.claim_seat_sql = sql(CLAIM_SEAT, s)
        self.timeout_s = self.settings.pg_timeout_ms / 1000
        self.tokens = Tokens(self.settings.token_secret, self.settings.token_ttl_s)  # as the API

    async def start(self) -> None:
        async def warm(conn: asyncpg.Connection) -> None:
            # No event has the empty id: both statements run, write nothing and stay prepared.
            await conn.fetchrow(self.claim_best_sql, "", "", "")
            await conn.fetchrow(self.claim_seat_sql, "", "", "", "")

        self.pool = await asyncpg.create_pool(
            self.settings.pg_dsn,
            min_size=self.settings.pg_pool_max,
            max_size=self.settings.pg_pool_max,
            timeout=self.timeout_s,
            command_timeout=self.timeout_s,
            statement_cache_size=64,
            max_inactive_connection_lifetime=0,
            # Plans are cached per connection while the holds table grows from empty: a generic
            # plan made when it was one page would scan it whole on every claim thereafter.
            server_settings={"enable_seqscan": "off"},
            init=warm,
            reset=_keep_connection_state,
        )

    async def stop(self) -> None:
        for task in list(self.refreshing.values()):
            task.cancel()
        await asyncio.gather(*self.refreshing.values(), return_exceptions=True)
        if self.side is not None:
            await self.side.close()
        if self.pool is not None:
            await self.pool.close()

    async def claim(
        self, event_id: str, login: str, hold_id: str, seat_id: str | None = None
    ) -> Claimed:
        """Claim `seat_id`, or the best free seat when None. `hold_id` is the idempotency key."""
        assert keys.valid_id(hold_id) and login, (hold_id, login)
        if seat_id is None and (known := self._from_flag(event_id, login, hold_id)):
            return known
        try:
            async with asyncio.timeout(self.timeout_s), self.pool.acquire() as conn:
                # The flag may have gone up while this claim queued for a connection.
                if seat_id is None and (known := self._from_flag(event_id, login, hold_id)):
                    return known
                for _attempt in range(RACE_RETRIES_MAX):
                    if seat_id is None:
                        row = await conn.fetchrow(self.claim_best_sql, event_id, hold_id, login)
                    else:
                        row = await conn.fetchrow(
                            self.claim_seat_sql, event_id, hold_id, login, seat_id
                        )
                    code = Code(row["code"])
                    if code != Code.RACE:
                        break
        except PG_UNAVAILABLE as exc:
            raise errors.StoreUnavailable(f"PostgreSQL: {type(exc).__name__}") from exc
        if code == Code.OK:
            assert row["taken"] == 1, f"hold {hold_id} inserted but its seat was not marked"
            return Claimed(hold_id, row["seat_id"], row["expires_ms"], False, HoldState.RESERVED)
        if code == Code.REPLAY:
            return Claimed(hold_id, row["seat_id"], row["expires_ms"], True, _state(row["live"]))
        if code == Code.RACE:
            raise errors.StoreUnavailable(f"claim {hold_id}: concurrent attempts kept racing")
        if code == Code.SOLD_OUT:
            self._sold_out_seen(event_id)
        raise REFUSALS[code](f"claim {hold_id}: {code}")

    def _from_flag(self, event_id: str, login: str, hold_id: str) -> Claimed | None:
        """The answer of a best-available claim while the sold-out flag is up, else None."""
        flag = self.flags.get(event_id)
        if flag is None or time.monotonic() >= flag.until:
            return None
        known = flag.holds.get(hold_id)
        if known is None:
            raise errors.SoldOut(f"claim {hold_id}: SOLD_OUT (flag)")
        if known.login != login:
            raise errors.IdempotencyKeyReused(f"claim {hold_id}: IDEMPOTENCY_KEY_REUSED (flag)")
        live = known.expires_ms > time.time() * 1000
        return Claimed(hold_id, known.seat_id, known.expires_ms, True, _state(live))

    def _sold_out_seen(self, event_id: str) -> None:
        flag = self.flags.get(event_id)
        if event_id in self.refreshing or (flag and time.monotonic() < flag.until):
            return
        task = asyncio.create_task(self._raise_flag(event_id))
        self.refreshing[event_id] = task
        task.add_done_callback(lambda _t: self.refreshing.pop(event_id, None))

    async def _raise_flag(self, event_id: str) -> None:
        s = self.settings.schema
        try:
            async with asyncio.timeout(self.timeout_s), self.side_lock:
                if self.side is None or self.side.is_closed():
                    self.side = await asyncpg.connect(
                        self.settings.pg_dsn,
                        timeout=self.timeout_s,
                        command_timeout=self.timeout_s,
                        statement_cache_size=8,
                    )
                if await self.side.fetchval(sql(FREE_SEATS_SETTLED, s), event_id):
                    return  # a seat came back (a claim rolled back): not sold out
                rows = await self.side.fetch(sql(HOLDS_OF_EVENT, s), event_id)
        except PG_UNAVAILABLE as exc:
            log.warning("sold-out flag of %s not raised: %r", event_id, exc)
            return
        self.flags[event_id] = SoldOutFlag(
            until=time.monotonic() + self.settings.sold_out_ttl_ms / 1000,
            holds={
                r["hold_id"]: KnownHold(r["login"], r["seat_id"], r["expires_ms"]) for r in rows
            },
        )


# -- HTTP --------------------------------------------------------------------------------------

Handler = Callable[[Request], Awaitable[Response]]


def endpoint(handler: Handler) -> Handler:
    """Every failure becomes a JSON error with a stable code, as api/context.py endpoint does."""

    async def run(request: Request) -> Response:
        try:
            return await handler(request)
        except ApiError as exc:
            return error_response(request, exc.code, exc.message, exc.status)
        except errors.EngineError as exc:
            return from_engine(request, exc)
        except Exception:
            log.exception("unexpected error")
            return error_response(request, "internal", "unexpected error", 500)

    return run


def baseline_of(request: Request) -> Baseline:
    b: Baseline = request.app.state.baseline
    return b


@endpoint
async def healthz(request: Request) -> Response:
    return json_response({"ok": True})


@endpoint
async def claim(request: Request) -> Response:
    b = baseline_of(request)
    login = b.tokens.login_of(request)
    event_id, seat_id, hold_id = await claim_input(request, b.settings.body_max_bytes)
    return claimed_response(await b.claim(event_id, login, hold_id, seat_id))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request")
    return error_response(request, code, str(exc.detail), exc.status_code)


def create_app(settings: BaselineSettings | None = None) -> HotRoute:
    """The uvicorn factory (`--factory loadtest.pg_baseline:create_app`): settings from env."""
    resolved = settings or BaselineSettings.from_env(os.environ)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        baseline = Baseline(resolved)
        await baseline.start()  # a statement that does not compile fails boot
        app.state.baseline = baseline
        yield
        await baseline.stop()

    app = Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route(CLAIM_PATH, claim, methods=["POST"]),
        ],
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error},
    )
    return HotRoute(app, "POST", CLAIM_PATH, claim)  # the same HTTP lane as the engine's API


# -- serving -----------------------------------------------------------------------------------


@dataclass
class BaselineServer:
    """The baseline under uvicorn in a subprocess on a spare port (as engine/stack.py runs the
    API): ONSALE_* from the parent environment, overridden by the fields."""

    pg_dsn: str
    log_dir: Path
    workers: int = 1
    extra_env: dict[str, str] = field(default_factory=dict)
    token_secret: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    port: int = field(default_factory=spare_port)
    proc: subprocess.Popen[bytes] | None = None
    out: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> None:
        env = {
            **os.environ,
            "ONSALE_PG_DSN": self.pg_dsn,
            "ONSALE_TOKEN_SECRET": self.token_secret,
            **self.extra_env,
        }
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.out = open(self.log_dir / "pg-baseline.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "loadtest.pg_baseline",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
            ],
            env=env,
            stdout=self.out,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_healthy(self.url, self.proc, timeout_s)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
            self.proc = None
        if self.out is not None:
            self.out.close()
            self.out = None


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    from onsale.cli import serve_options

    ap = argparse.ArgumentParser(
        prog="python -m loadtest.pg_baseline",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8300)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args(argv)
    try:
        BaselineSettings.from_env(os.environ)  # fail fast, naming the missing variable
    except MissingSetting as exc:
        print(f"pg_baseline: {exc}", file=sys.stderr)
        return 2
    uvicorn.run(
        "loadtest.pg_baseline:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        **serve_options(),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
