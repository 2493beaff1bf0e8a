"""Where the tools find the shared Redis and PostgreSQL server: `ONSALE_REDIS_URL` and
`ONSALE_PG_DSN` when set (make and CI set them from .services/env), else the usual local ports,
where `make up` starts them. Every tool reads them here, so a tool run by hand outside make finds
the same servers a make target would."""

import os
from typing import Any

from engine.config.settings import Settings

REDIS_URL = "redis://127.0.0.1:6379/0"
PG_SERVER_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


def redis_url() -> str:
    return os.environ.get("ONSALE_REDIS_URL") or REDIS_URL


def pg_server_dsn() -> str:
    """A server on which the tools create (and drop) databases of their own."""
    return os.environ.get("ONSALE_PG_DSN") or PG_SERVER_DSN


def named_pg_server_dsn() -> str:
    """The PostgreSQL server only when one is named ("": none; the demo then runs without a
    ledger)."""
    return os.environ.get("ONSALE_PG_DSN", "")


def engine_settings() -> Settings:
    """The engine's settings from the environment, the shared Redis where none is named."""
    return Settings.from_env({**os.environ, "ONSALE_REDIS_URL": redis_url()})


def redis_client() -> Any:
    """A client of the shared Redis, as the engine makes one (decoded replies)."""
    return engine_settings().redis_client()
