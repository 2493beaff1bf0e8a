"""The admin API's access to the merchant webhook tables (ADR 0024): endpoints, and the
delivery log with its replays. The API and the ledger share no code (ADR 0015): these tables,
made by persistence/migrations/0008_webhooks.sql, are the contract between the admin routes,
the ledger writer (which writes deliveries) and the sender (which sends them).

The pool opens no connection before the first request, so `onsale serve` boots with the
database down; while it cannot be reached (or no ONSALE_PG_DSN is set) the webhook routes
answer 503 webhooks_unavailable and every other route is unaffected."""

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import asyncpg

from api.errors import ApiError
from engine.config.settings import PG_DSN, PG_TIMEOUT_MS
from engine.config.variables import Flag, Group, Int, read_all

log = logging.getLogger("onsale.api")

OUTAGES = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)

SQL: Mapping[str, str] = MappingProxyType(
    {
        "create_endpoint": """
            insert into webhook_endpoints (endpoint_id, url, description, event_types, secret)
            select $1, $2, $3, $4, $5
            where (select count(*) from webhook_endpoints where deleted_at is null) < $6
            returning *, now() as now""",
        # A buyer's orders, newest first, from the ledger (api/routes/me.py, ADR 0042): the
        # confirmed holds of one login, with the winning charge's money (less what parts of
        # the order gave back, ADR 0043) and the event's currency and name; $2 an event id or
        # '' (every event), $3/$4 the keyset cursor.
        "my_orders": """
            select h.event_id, h.hold_id, h.seat_id, h.winner, h.decided_at_ms,
              coalesce(nullif(c.captured, 0), c.amount) - coalesce(p.refunded, 0) as amount,
              coalesce(p.refunded, 0) as refunded, e.currency, e.name
            from holds h
            left join lateral (
              select sum(amount)::bigint as refunded from charges
              where event_id = h.event_id and part_of = h.winner and h.winner <> ''
            ) p on true
            left join charges c on c.event_id = h.event_id and c.charge_id = h.winner
            left join event_configs e on e.event_id = h.event_id
            where h.login = $1 and h.state = 'CONFIRMED' and ($2 = '' or h.event_id = $2)
              and (h.decided_at_ms, h.hold_id) < ($3, $4)
            order by h.decided_at_ms desc, h.hold_id desc limit $5""",
        "endpoints": """
            select *, now() as now from webhook_endpoints where deleted_at is null
            order by created_at, endpoint_id""",
        # Each live endpoint's health, for the ops dashboard: failed and pending deliveries,
        # how long the oldest pending one has waited, and the last failure's answer.
        "endpoint_health": """
            select e.endpoint_id,
              count(*) filter (where d.status = 'failed') as failed,
              count(*) filter (where d.status = 'pending') as pending,
              coalesce(extract(epoch from now() - min(d.created_at)
                filter (where d.status = 'pending')) * 1000, 0)::bigint as oldest_pending_ms,
              (array_agg(d.last_error order by d.last_attempt_at desc)
                filter (where d.status <> 'delivered' and d.last_attempt_at is not null))[1]
                as last_error,
              (array_agg(d.last_status order by d.last_attempt_at desc)
                filter (where d.status <> 'delivered' and d.last_attempt_at is not null))[1]
                as last_status
            from webhook_endpoints e left join webhook_deliveries d using (endpoint_id)
            where e.deleted_at is null group by e.endpoint_id""",
        "endpoint": """
            select *, now() as now from webhook_endpoints
            where endpoint_id = $1 and deleted_at is null""",
        "set_enabled": """
            update webhook_endpoints set enabled = $2, updated_at = now(),
              disabled_reason = case when $2 then '' else 'admin' end
            where endpoint_id = $1 and deleted_at is null
            returning *, now() as now""",
        "delete_endpoint": """
            update webhook_endpoints set deleted_at = now(), enabled = false, updated_at = now()
            where endpoint_id = $1 and deleted_at is null
            returning endpoint_id""",
        "rotate_secret": """
            update webhook_endpoints set previous_secret = secret, secret = $2,
              previous_until = now() + $3 * interval '1 second', updated_at = now()
            where endpoint_id = $1 and deleted_at is null
            returning *, now() as now""",
        "deliveries": """
            select * from webhook_deliveries
            where endpoint_id = $1 and ($2::text = '' or status = $2)
              and ($3::bigint = 0 or delivery_id < $3)
            order by delivery_id desc limit $4""",
        "replay_delivery": """
            update webhook_deliveries set status = 'pending', next_attempt_at = now(),
              window_from = now()
            where endpoint_id = $1 and delivery_id = $2
            returning *""",
        "replay_failed": """
            with replayed as (
              update webhook_deliveries set status = 'pending', next_attempt_at = now(),
                window_from = now()
              where endpoint_id = $1 and status = 'failed'
                and created_at >= to_timestamp($2::bigint / 1000.0)
              returning 1)
            select count(*) from replayed""",
    }
)


API_PG_POOL_MAX = Int(
    "ONSALE_API_PG_POOL_MAX", "connections per API process to the ledger database", 2,
    doc="`onsale serve`: connections per process to the ledger database (`ONSALE_PG_DSN`) for "
    "the webhook admin routes",
)  # fmt: skip
MERCHANT_WEBHOOK_HTTP = Flag(
    "ONSALE_MERCHANT_WEBHOOK_HTTP", "1: plain http webhook URLs (local runs, tests)", False,
    doc="1: endpoints may be plain `http://` (local runs, tests); otherwise `https://` only",
)  # fmt: skip
WEBHOOK_DB = Group(
    "the ledger database, for the merchant webhook routes",
    (PG_DSN, API_PG_POOL_MAX, PG_TIMEOUT_MS, MERCHANT_WEBHOOK_HTTP),
)


@dataclass(frozen=True)
class WebhookDbSettings:
    pg_dsn: str = ""  # the ledger database ("": the webhook routes answer 503)
    api_pg_pool_max: int = API_PG_POOL_MAX.default
    pg_timeout_ms: int = PG_TIMEOUT_MS.default  # per statement / connection attempt
    merchant_webhook_http: bool = MERCHANT_WEBHOOK_HTTP.default  # plain http URLs allowed

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "WebhookDbSettings":
        return cls(**read_all(env, WEBHOOK_DB))


class WebhookDb:
    def __init__(self, settings: WebhookDbSettings) -> None:
        self.settings = settings
        self._pool: asyncpg.Pool | None = None

    @asynccontextmanager
    async def conn(self, unavailable: str = "webhooks_unavailable") -> AsyncIterator[Any]:
        """A pooled connection; an outage (or no database configured) is 503 `unavailable`."""
        if not self.settings.pg_dsn:
            raise ApiError(503, unavailable, "no ledger database is configured")
        try:
            if self._pool is None:
                timeout_s = self.settings.pg_timeout_ms / 1000
                self._pool = await asyncpg.create_pool(
                    self.settings.pg_dsn,
                    min_size=0,
                    max_size=self.settings.api_pg_pool_max,
                    timeout=timeout_s,
                    command_timeout=timeout_s,
                )
            async with self._pool.acquire() as conn:
                yield conn
        except OUTAGES as exc:
            log.warning("webhook store unavailable: %r", exc)
            raise ApiError(503, unavailable, "the ledger database cannot be reached") from None

    async def fetch(self, name: str, *args: Any) -> list[Any]:
        async with self.conn() as conn:
            rows: list[Any] = await conn.fetch(SQL[name], *args)
            return rows

    async def fetchrow(self, name: str, *args: Any) -> Any:
        async with self.conn() as conn:
            return await conn.fetchrow(SQL[name], *args)

    async def fetchval(self, name: str, *args: Any) -> Any:
        async with self.conn() as conn:
            return await conn.fetchval(SQL[name], *args)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
