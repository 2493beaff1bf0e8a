"""A private PostgreSQL database per test module: created on the test server, migrated, dropped."""

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import pytest

PG_DSN = os.environ.get("ONSALE_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


def dsn_for(database: str) -> str:
    base, _, _old = PG_DSN.rpartition("/")
    return f"{base}/{database}"


@asynccontextmanager
async def private_database() -> AsyncIterator[str]:
    name = f"onsale_test_{uuid.uuid4().hex[:10]}"
    try:
        admin = await asyncpg.connect(PG_DSN, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        pytest.fail(f"PostgreSQL at {PG_DSN} not reachable ({exc!r}); run `make test`")
    try:
        await admin.execute(f'create database "{name}"')
        yield dsn_for(name)
    finally:
        await admin.execute(f'drop database if exists "{name}" with (force)')
        await admin.close()
