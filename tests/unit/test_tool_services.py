"""The tools find the shared Redis and PostgreSQL server in one place
(loadtest/devstack/services.py): the variables when set, else the usual local ports. A tool run
by hand outside make then finds the servers a make target would, instead of failing on a
missing variable (sweep_lag and trim_pass did)."""

import re
from pathlib import Path

import pytest

from loadtest.devstack import services

ROOT = Path(__file__).resolve().parents[2]
# The demo is the exception by design: it reads the engine's settings whole and stops with a
# clear error naming a missing one (tests/integration/test_demo.py), never a default server.
READ = re.compile(
    r"""(environ\.get\(|getenv\(|environ\[)["']ONSALE_(REDIS_URL|PG_DSN)["'](?!\]\s*=[^=])"""
)


def test_the_variables_when_set_else_the_local_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ONSALE_REDIS_URL", raising=False)
    monkeypatch.delenv("ONSALE_PG_DSN", raising=False)
    assert services.redis_url() == "redis://127.0.0.1:6379/0"
    assert services.pg_server_dsn() == "postgresql://postgres@127.0.0.1:5432/postgres"
    assert services.engine_settings().redis_url == "redis://127.0.0.1:6379/0"
    monkeypatch.setenv("ONSALE_REDIS_URL", "redis://10.0.0.9:7000/3")
    monkeypatch.setenv("ONSALE_PG_DSN", "postgresql://u@10.0.0.9:6543/x")
    assert services.redis_url() == "redis://10.0.0.9:7000/3"
    assert services.pg_server_dsn() == "postgresql://u@10.0.0.9:6543/x"


def test_no_tool_reads_them_itself() -> None:
    readers = [
        str(p.relative_to(ROOT))
        for p in sorted((ROOT / "loadtest").rglob("*.py"))
        if p.name != "services.py" and READ.search(p.read_text())
    ]
    assert readers == []


def test_the_check_sees_a_read_not_a_write() -> None:
    assert READ.search('url = os.environ.get("ONSALE_REDIS_URL", "x")')
    assert READ.search('dsn = os.environ["ONSALE_PG_DSN"]')
    assert READ.search("url = os.getenv('ONSALE_REDIS_URL')")
    assert not READ.search('os.environ["ONSALE_REDIS_URL"] = url')
