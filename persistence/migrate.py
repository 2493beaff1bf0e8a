"""Forward-only SQL migrations (persistence/migrations/NNNN_name.sql), each applied in one
transaction and recorded with its checksum in schema_migrations, under an advisory lock so two
processes can run `onsale migrate` at once. Running twice applies nothing; an applied file that
was edited afterwards stops the command (its checksum differs)."""

import hashlib
from dataclasses import dataclass
from importlib import resources

import asyncpg

LOCK_KEY = 0x6F6E73616C65  # "onsale"


class MigrationError(RuntimeError):
    pass


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def available() -> list[Migration]:
    folder = resources.files("persistence").joinpath("migrations")
    out = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".sql"):
            version, _, rest = entry.name.partition("_")
            out.append(
                Migration(
                    int(version), rest.removesuffix(".sql"), entry.read_text(encoding="utf-8")
                )
            )
    versions = [m.version for m in out]
    assert versions == sorted(set(versions)), f"duplicate or unordered migrations: {versions}"
    return out


async def migrate(conn: asyncpg.Connection) -> list[str]:
    """Apply every pending migration; returns the names applied."""
    await conn.execute("select pg_advisory_lock($1)", LOCK_KEY)
    try:
        await conn.execute(
            "create table if not exists schema_migrations (version int primary key, "
            "name text not null, checksum text not null, "
            "applied_at timestamptz not null default now())"
        )
        applied = {r["version"]: r for r in await conn.fetch("select * from schema_migrations")}
        known = {m.version for m in available()}
        unknown = sorted(set(applied) - known)
        if unknown:
            raise MigrationError(
                f"the database has migrations this code does not know ({unknown}): it is newer "
                "than the code; run the newer code, never an older one against it"
            )
        done = []
        for m in available():
            row = applied.get(m.version)
            if row is not None:
                if row["checksum"] != m.checksum:
                    raise MigrationError(
                        f"migration {m.version:04d}_{m.name} was edited after it was applied"
                    )
                continue
            async with conn.transaction():
                await conn.execute(m.sql)
                await conn.execute(
                    "insert into schema_migrations (version, name, checksum) values ($1, $2, $3)",
                    m.version,
                    m.name,
                    m.checksum,
                )
            done.append(f"{m.version:04d}_{m.name}")
        return done
    finally:
        await conn.execute("select pg_advisory_unlock($1)", LOCK_KEY)
