"""The PostgreSQL baseline's claim (loadtest/pg_baseline/server.py describes the design): its
settings, the pool it runs on, the statement with its retries, and the per-process sold-out flag
that answers best-available claims without PostgreSQL while the event is sold out."""

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from api.identity import DemoTokens
from engine.config.variables import Int, MissingSetting
from engine.model import errors, keys
from engine.model.holds import Claimed
from engine.model.states import HoldState
from loadtest.pg_baseline.sql import (
    CLAIM_BEST,
    CLAIM_SEAT,
    FREE_SEATS_SETTLED,
    HOLDS_OF_EVENT,
    REFUSALS,
    SCHEMA,
    SCHEMA_RE,
    Code,
    sql,
)

log = logging.getLogger("onsale.pg_baseline")

RACE_RETRIES_MAX = 3  # a claim that lost its key to a concurrent attempt is run again
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
        if not SCHEMA_RE.fullmatch(self.schema):
            raise MissingSetting(f"ONSALE_BASELINE_SCHEMA must match {SCHEMA_RE.pattern}")

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


def int_setting(env: Mapping[str, str], name: str, default: int) -> int:
    """The baseline's own integer variables, read as the product reads one."""
    return Int(name, "", default).read(env)


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
        self.tokens = DemoTokens(
            self.settings.token_secret, self.settings.token_ttl_s
        )  # as the API

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
            # Every commit synced, whatever the server's default: the durability it is compared at.
            server_settings={"enable_seqscan": "off", "synchronous_commit": "on"},
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
                row = await self._run(conn, event_id, login, hold_id, seat_id)
        except PG_UNAVAILABLE as exc:
            raise errors.StoreUnavailable(f"PostgreSQL: {type(exc).__name__}") from exc
        return self._answer(event_id, hold_id, row)

    async def _run(
        self,
        conn: asyncpg.Connection,
        event_id: str,
        login: str,
        hold_id: str,
        seat_id: str | None,
    ) -> asyncpg.Record:
        """The claim statement's row, run again while a concurrent attempt with the same key
        races it (at most RACE_RETRIES_MAX times)."""
        for _attempt in range(RACE_RETRIES_MAX):
            if seat_id is None:
                row = await conn.fetchrow(self.claim_best_sql, event_id, hold_id, login)
            else:
                row = await conn.fetchrow(self.claim_seat_sql, event_id, hold_id, login, seat_id)
            if Code(row["code"]) != Code.RACE:
                break
        return row

    def _answer(self, event_id: str, hold_id: str, row: asyncpg.Record) -> Claimed:
        """The claim's outcome from the statement's row: the hold, or the refusal raised."""
        code = Code(row["code"])
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
