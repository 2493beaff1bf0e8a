"""What an in-process benchmark of the engine and its ledger stands on: a store on a fresh key
prefix of the configured Redis (ONSALE_REDIS_URL) and a migrated scratch database on
ONSALE_PG_DSN's server; both gone afterwards."""

import secrets
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from engine.store import Store
from loadtest.devstack import services
from persistence import database
from persistence.migrate import migrate


@asynccontextmanager
async def store_and_ledger(
    name: str, pool_max: int = 4
) -> AsyncIterator[tuple[Store, asyncpg.Pool]]:
    client = services.redis_client()
    store = Store(client, prefix=f"onsale:{name}:{uuid.uuid4().hex[:8]}")
    await store.scripts.load_all()
    server = services.pg_server_dsn()
    try:
        async with database.scratch_database(
            server, f"onsale_{name}_{uuid.uuid4().hex[:8]}"
        ) as dsn:
            conn = await asyncpg.connect(dsn)
            await migrate(conn)
            await conn.close()
            pool = await database.create_pool(dsn, size_max=pool_max, timeout_s=30)
            try:
                yield store, pool
            finally:
                await pool.close()
    finally:
        async for key in client.scan_iter(match=f"{store.prefix}:*"):
            await client.delete(key)
        await client.aclose()


# The per-login limits switched off: for tests and workloads in which one login claims again
# and again, which the limits would refuse.
NO_LOGIN_LIMITS = {"ONSALE_CLAIMS_PER_S": "0", "ONSALE_LOGIN_CAP": "0"}


def api_env(redis_url: str, *, limits: bool = False, **extra: str) -> dict[str, str]:
    """The environment of an API made in process for a benchmark or a test: demo logins, fresh
    secrets, decisions told at once (no ledger), a provider nowhere, and no per-login limits
    unless `limits` (then their production defaults: a benchmark whose every claim is a new
    login's measures what production runs)."""
    return {
        "ONSALE_REDIS_URL": redis_url,
        "ONSALE_TOKEN_SECRET": secrets.token_urlsafe(32),
        "ONSALE_ADMIN_TOKEN": secrets.token_urlsafe(32),
        "ONSALE_WEBHOOK_SECRET": secrets.token_urlsafe(32),
        "ONSALE_DEMO_LOGIN": "1",
        **({} if limits else NO_LOGIN_LIMITS),
        "ONSALE_PROVIDER_URL": "http://127.0.0.1:9",
        "ONSALE_CONFIRM_AFTER": "redis",
        **extra,
    }
