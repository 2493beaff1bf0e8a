"""The ledger's connections, in one place: the pool every ledger process uses (jsonb through
orjson, explicit timeouts), and databases made and dropped on a server (the demo's own ledger,
the tests' private ones, the benchmarks' scratch ones)."""

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import asyncpg
import orjson

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


async def init_connection(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec(
        "jsonb",
        encoder=lambda v: orjson.dumps(v).decode(),
        decoder=orjson.loads,
        schema="pg_catalog",
    )


async def create_pool(dsn: str, *, size_max: int, timeout_s: float) -> asyncpg.Pool:
    pool: asyncpg.Pool = await asyncpg.create_pool(
        dsn,
        min_size=1,
        max_size=size_max,
        init=init_connection,
        timeout=timeout_s,
        command_timeout=timeout_s,
    )
    return pool


def dsn_for(dsn: str, database: str) -> str:
    """`dsn` pointed at another database on the same server."""
    return urlsplit(dsn)._replace(path=f"/{database}").geturl()


async def _admin(server_dsn: str, statement: str) -> None:
    conn = await asyncpg.connect(server_dsn, timeout=10, command_timeout=120)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def create_database(server_dsn: str, name: str, *, exist_ok: bool = False) -> str:
    """Create `name` on the server of `server_dsn` (kept if it exists and `exist_ok`); its DSN."""
    assert _NAME.match(name), f"bad database name {name!r}"
    conn = await asyncpg.connect(server_dsn, timeout=10, command_timeout=120)
    try:
        exists = await conn.fetchval("select 1 from pg_database where datname = $1", name)
        if not (exists and exist_ok):
            await conn.execute(f'create database "{name}"')
    finally:
        await conn.close()
    return dsn_for(server_dsn, name)


async def drop_database(server_dsn: str, name: str) -> None:
    assert _NAME.match(name), f"bad database name {name!r}"
    await _admin(server_dsn, f'drop database if exists "{name}" with (force)')


@asynccontextmanager
async def scratch_database(server_dsn: str, name: str) -> AsyncIterator[str]:
    """A database that lives as long as the block; its DSN."""
    dsn = await create_database(server_dsn, name)
    try:
        yield dsn
    finally:
        await drop_database(server_dsn, name)
