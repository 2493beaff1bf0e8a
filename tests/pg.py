"""A private PostgreSQL database per test module: created on the test server, dropped after."""

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import pytest

from persistence import database

PG_DSN = os.environ.get("ONSALE_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


@asynccontextmanager
async def private_database() -> AsyncIterator[str]:
    name = f"onsale_test_{uuid.uuid4().hex[:10]}"
    try:
        dsn = await database.create_database(PG_DSN, name)
    except (OSError, asyncpg.PostgresError) as exc:  # an environment problem: say so, never skip
        pytest.fail(f"PostgreSQL at {PG_DSN} not reachable ({exc!r}); run `make test`")
    try:
        yield dsn
    finally:
        await database.drop_database(PG_DSN, name)


@asynccontextmanager
async def migrated_pool() -> AsyncIterator[asyncpg.Pool]:
    """A pool on a private database with every migration applied."""
    from persistence.database import create_pool
    from persistence.migrate import migrate

    async with private_database() as dsn:
        conn = await asyncpg.connect(dsn)
        await migrate(conn)
        await conn.close()
        pool = await create_pool(dsn, size_max=2, timeout_s=5)
        try:
            yield pool
        finally:
            await pool.close()
