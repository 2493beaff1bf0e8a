"""The ledger's schema as the migrations leave it, described canonically (tables, columns,
constraints, indexes) from the catalog. `persistence/schema.txt` is that description, kept in
the repository for a reader; a test migrates an empty database and checks the two are equal,
so a migration cannot change the schema without the description changing with it.
`python -m persistence.schema` prints it (from a scratch database on ONSALE_PG_DSN's server)."""

import asyncio
import os
import uuid

import asyncpg

TABLES = """
select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
where n.nspname = 'public' and c.relkind = 'r' order by 1
"""
COLUMNS = """
select a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
  coalesce(pg_get_expr(d.adbin, d.adrelid), '')
from pg_attribute a left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
where a.attrelid = $1::regclass and a.attnum > 0 and not a.attisdropped order by a.attnum
"""
CONSTRAINTS = """
select pg_get_constraintdef(oid) from pg_constraint where conrelid = $1::regclass order by 1
"""
INDEXES = (
    "select indexdef from pg_indexes where schemaname = 'public' and tablename = $1 order by 1"
)


async def describe(conn: asyncpg.Connection) -> str:
    out: list[str] = []
    for (table,) in await conn.fetch(TABLES):
        out.append(f"table {table}")
        for name, kind, not_null, default in await conn.fetch(COLUMNS, table):
            null = " not null" if not_null else ""
            out.append(f"  {name} {kind}{null}{f' default {default}' if default else ''}")
        out += [f"  constraint {c}" for (c,) in await conn.fetch(CONSTRAINTS, table)]
        out += [f"  {i}" for (i,) in await conn.fetch(INDEXES, table)]
    return "\n".join(out) + "\n"


async def _print() -> None:
    from engine.config.settings import PG_DSN
    from persistence.database import scratch_database
    from persistence.migrate import migrate

    server = PG_DSN.raw(os.environ) or "postgresql://postgres@127.0.0.1:5432/postgres"
    async with scratch_database(server, f"onsale_schema_{uuid.uuid4().hex[:8]}") as dsn:
        conn = await asyncpg.connect(dsn)
        try:
            await migrate(conn)
            print(await describe(conn), end="")
        finally:
            await conn.close()


if __name__ == "__main__":
    asyncio.run(_print())
