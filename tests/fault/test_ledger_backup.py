"""The ledger's backup, tested as docs/recovery.md tells it (a base backup and an archive of the
write-ahead log, the tools PostgreSQL ships): a private PostgreSQL archives its WAL, a sale
runs on the whole stack, and then both copies are lost, Redis's event and the ledger's
database. The ledger is restored to a named point (point-in-time recovery) and the ledger
process rebuilds Redis from it by itself; the nightly reconciliation then lists exactly the
sales made after the restore point, found through the provider's money, and nothing else."""

import asyncio
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
import redis.asyncio as redis_asyncio

from engine.store import Store
from loadtest.devstack.stack import LocalStack
from tests.conftest import REDIS_URL
from tests.fault.conftest import PrivatePostgres, _pg_bin, started
from tests.integration.conftest import ADMIN, WEBHOOK_SECRET, Stack, eventually
from tests.integration.test_money_integrity import _nightly, bought

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]

RESTORE_POINT = "before_the_loss"


class ArchivedPostgres(PrivatePostgres):
    """A private cluster that archives every WAL segment (archive_command cp), so a base backup
    and the archive bring it back to any moment after the backup."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.archive = workdir / "wal-archive"
        self.backup = workdir / "base-backup"
        self.archive.mkdir()
        if self.as_postgres:
            shutil.chown(self.archive, "postgres")
        self.conf(
            "wal_level = replica",
            "archive_mode = on",
            f"archive_command = 'test ! -f {self.archive}/%f && cp %p {self.archive}/%f'",
        )

    def conf(self, *lines: str) -> None:
        with (self.data / "postgresql.auto.conf").open("a") as f:
            f.write("\n".join(lines) + "\n")

    def run(self, *args: str) -> None:
        subprocess.run([*self.as_postgres, *args], check=True, capture_output=True, timeout=120)

    def base_backup(self) -> None:
        self.run(_pg_bin("pg_basebackup"), "-D", str(self.backup), "-h", "127.0.0.1", "-p",
                 str(self.port), "-U", "postgres", "-X", "fetch", "-c", "fast")  # fmt: skip

    def restore_to(self, point: str) -> None:
        """Lose the data directory; put the base backup back, replay the archive up to `point`
        and promote (what docs/recovery.md says to do)."""
        shutil.rmtree(self.data)
        self.run("cp", "-a", str(self.backup), str(self.data))
        self.run("touch", str(self.data / "recovery.signal"))
        self.conf(
            f"restore_command = 'cp {self.archive}/%f %p'",
            f"recovery_target_name = '{point}'",
            "recovery_target_action = 'promote'",
        )
        self.start()


@pytest.fixture
def archived() -> Iterator[ArchivedPostgres]:
    with started(ArchivedPostgres) as server:
        yield server


async def sql(dsn: str, query: str) -> object:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        return await conn.fetchval(query)
    finally:
        await conn.close()


def ledger_sold(dsn: str, event_id: str) -> int:
    query = f"select count(*) from holds where event_id = '{event_id}' and state = 'CONFIRMED'"
    return int(asyncio.run(sql(dsn, query)))  # type: ignore[call-overload]


def archived_up_to_now(server: ArchivedPostgres) -> None:
    """Close the WAL segment in use and wait until the archive has it."""
    segment = str(asyncio.run(sql(server.dsn, "select pg_walfile_name(pg_switch_wal())")))
    eventually(lambda: (server.archive / segment).exists(), timeout_s=30)


def in_recovery(dsn: str) -> bool:
    try:
        return bool(asyncio.run(sql(dsn, "select pg_is_in_recovery()")))
    except (OSError, asyncpg.PostgresError):
        return True


async def lose_redis(local: LocalStack, event_id: str) -> None:
    client = redis_asyncio.from_url(REDIS_URL, decode_responses=True)
    try:
        await Store(client, prefix=local.key_prefix).restore.drop_event(event_id)
    finally:
        await client.aclose()


def test_a_ledger_restored_to_a_point_and_redis_rebuilt_from_it_lose_nothing_silently(
    archived: ArchivedPostgres, tmp_path: Path
) -> None:
    prefix = f"onsale:test:{uuid.uuid4().hex[:12]}"
    local = LocalStack(redis_url=REDIS_URL, key_prefix=prefix, log_dir=tmp_path / "stack",
                       admin_token=ADMIN, webhook_secret=WEBHOOK_SECRET,
                       ledger_dsn=archived.dsn)  # fmt: skip
    local.start()
    try:
        stack = Stack(local.api_url, local.sim_url, prefix, local)
        stack.sim_config(decline_rate=0.0, fail_rate=0.0, late_rate=0.0, loss_rate=0.0)
        archived.base_backup()  # the nightly base backup, taken while the sale runs
        event_id = stack.new_event(6)
        kept = [bought(stack, event_id, f"k{i}")[2] for i in range(3)]
        eventually(lambda: ledger_sold(archived.dsn, event_id) == 3)
        asyncio.run(sql(archived.dsn, f"select pg_create_restore_point('{RESTORE_POINT}')::text"))
        archived_up_to_now(archived)
        lost = [bought(stack, event_id, f"l{i}")[2] for i in range(2)]
        eventually(lambda: ledger_sold(archived.dsn, event_id) == 5)

        # Both copies lost: the ledger's database and Redis's event.
        local.kill("ledger")
        archived.crash()
        asyncio.run(lose_redis(local, event_id))
        archived.restore_to(RESTORE_POINT)
        eventually(lambda: not in_recovery(archived.dsn), timeout_s=60)
        assert ledger_sold(archived.dsn, event_id) == 3  # as it was at the restore point

        # The ledger process notices the lost event and rebuilds it: no command.
        started = time.monotonic()
        local.restart("ledger")
        with stack.client() as c:
            back = eventually(
                lambda: (r := c.get(f"/v1/events/{event_id}")).status_code == 200 and r.json(),
                timeout_s=60,
            )
        assert (back["sold"], back["free"]) == (3, 3), back
        assert time.monotonic() - started < 60

        report = asyncio.run(_nightly(stack, archived.dsn, event_id))
        found = {d.entity: d.cls for d in report.discrepancies}
        # Exactly the sales after the restore point, found through their money at the provider.
        assert found == dict.fromkeys(lost, "captured_without_seat_not_refunded"), report
        assert not set(kept) & set(found)
        assert all(d.repaired for d in report.discrepancies), report
        assert report.provider_net == report.expected_net, report
        assert local.alive(), f"a stack process died; logs in {local.log_dir}"
    finally:
        local.stop()
        asyncio.run(drop_keys(prefix))


async def drop_keys(prefix: str) -> None:
    client = redis_asyncio.from_url(REDIS_URL)
    try:
        async for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            await client.delete(key)
    finally:
        await client.aclose()
