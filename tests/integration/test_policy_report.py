"""Shadow rollout end to end (ADR 0020): policy changes through `onsale policy`, decisions on real
Redis, the ledger writer into real PostgreSQL, and `onsale policy report` reading it back: the
counts, an example of disagreement, and the ledger rows a rollback leaves untouched; a rebuild
gives the event back the policies its records left."""

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import orjson
import pytest

from engine.model.replies import PolicyCode
from engine.model.states import HoldState
from engine.store import Store
from engine.store.policies import DeadlinePolicy, Policies
from onsale.cli import main
from persistence.database import create_pool
from persistence.migrate import migrate
from persistence.rebuild import rebuild
from persistence.writer import LedgerWriter
from tests.conftest import REDIS_URL, Sale, open_sale
from tests.helpers import callback
from tests.pg import private_database

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

T0 = 1_900_000_000_000
TTL, Q = 480_000, 300_000
E = T0 + TTL


@pytest.fixture
async def ledger(real_store: Store, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[asyncpg.Pool]:
    """A migrated private database, and the environment `onsale` reads pointed at it and at the
    test store's keys."""
    async with private_database() as dsn:
        conn = await asyncpg.connect(dsn)
        await migrate(conn)
        await conn.close()
        monkeypatch.setenv("ONSALE_REDIS_URL", REDIS_URL)
        monkeypatch.setenv("ONSALE_KEY_PREFIX", real_store.prefix)
        monkeypatch.setenv("ONSALE_PG_DSN", dsn)
        pool = await create_pool(dsn, size_max=2, timeout_s=5)
        try:
            yield pool
        finally:
            await pool.close()


async def onsale(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """Run the command line (its own event loop, in a thread) and return (exit code, stdout)."""
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(argv))
    return code, capsys.readouterr().out


async def drain(store: Store, pool: asyncpg.Pool, event_id: str) -> None:
    writer = LedgerWriter(store.client, pool, prefix=store.prefix, consumer="policy")
    while await writer.step(event_id):
        pass


async def ledger_decisions(pool: asyncpg.Pool, event_id: str) -> list[tuple[Any, ...]]:
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "select * from decisions where event_id = $1 order by stream_ms, stream_seq", event_id
        )
    return [tuple(r) for r in rows]


async def three_holds(store: Store) -> Sale:
    """h0 and h2 paying when their deadlines pass (E, E + 2); h1 idle (deadline E + 1)."""
    sale = await open_sale(store, 3, hold_ttl_ms=TTL, quarantine_ms=Q, now_ms=T0)
    for i, login in enumerate(("ann", "bob", "cy")):
        await sale.at(T0 + i)
        await store.claim(sale.event_id, login, f"h{i}")
        if i != 1:
            await store.start_charge(sale.event_id, f"h{i}", login, f"c{i}", 4500)
    return sale


async def test_shadow_report_counts_disagreements_and_rollback_rewrites_nothing(
    real_store: Store, ledger: asyncpg.Pool, capsys: pytest.CaptureFixture[str]
) -> None:
    store = real_store
    sale = await three_holds(store)
    ev = sale.event_id
    code, out = await onsale(capsys, "policy", "shadow", ev, "release_refund")
    assert (code, "SHADOWED" in out) == (0, True), out
    await sale.at(E + 1)
    await store.sweep(ev)  # h0 QUARANTINED (shadow: EXPIRED); h1 EXPIRED (shadow agrees)
    await callback(sale, "c0", "CAPTURED")  # wins in quarantine (shadow: would refund it)
    code, out = await onsale(capsys, "policy", "promote", ev)
    assert (code, "enforced release_refund v3" in out) == (0, True), out
    await sale.at(E + 2)
    await store.sweep(ev)  # h2 released and refunded under the promoted policy, no shadow
    await drain(store, ledger, ev)
    before = await ledger_decisions(ledger, ev)

    code, out = await onsale(capsys, "policy", "rollback", ev)
    assert (code, "enforced quarantine v4" in out) == (0, True), out
    code, _out = await onsale(capsys, "policy", "rollback", ev)
    assert code == 1  # nothing promoted since
    await drain(store, ledger, ev)
    after = await ledger_decisions(ledger, ev)
    assert after[: len(before)] == before and len(after) == len(before) + 1
    assert (await store.read.hold(ev, "h0")).state == HoldState.CONFIRMED
    assert (await store.read.hold(ev, "h2")).state == HoldState.EXPIRED

    code, out = await onsale(capsys, "policy", "report", ev, "--json")
    assert code == 0
    report = orjson.loads(out)
    by_version = {(e["policy"], e["version"]): e for e in report["enforced"]}
    assert set(by_version) == {("quarantine", 1), ("release_refund", 3)}
    assert by_version[("quarantine", 1)]["classified"] == 3  # two deadlines and a capture
    assert by_version[("release_refund", 3)]["classified"] == 0  # no shadow since the promote
    assert (report["shadow"]["agreements"], report["shadow"]["disagreements"]) == (1, 2)
    classified = {
        (c["kind"], c["real"], c["shadow"]): c["count"] for c in report["shadow"]["classified"]
    }
    assert classified == {
        ("hold", "QUARANTINED", "EXPIRED"): 1,
        ("hold", "EXPIRED", "EXPIRED"): 1,
        ("charge", "CAPTURED", "REFUNDING"): 1,
    }
    example = next(x for x in report["shadow"]["examples"] if x["kind"] == "hold")
    assert (example["hold_id"], example["shadow"], example["policy"]) == (
        "h0",
        "EXPIRED",
        "quarantine",
    )
    assert example["happened"] == "RESERVED -> QUARANTINED (deadline_charge_in_flight)"
    assert [c["change"] for c in report["changes"]] == [
        "SHADOW_SET",
        "POLICY_PROMOTED",
        "POLICY_ROLLED_BACK",
    ]

    code, out = await onsale(capsys, "policy", "report", ev)
    assert code == 0
    assert "1 agreements, 2 disagreements" in out and "QUARANTINED" in out, out


async def test_a_rebuild_restores_the_recorded_policies(
    real_store: Store, ledger: asyncpg.Pool
) -> None:
    store = real_store
    sale = await open_sale(store, 2, hold_ttl_ms=TTL, quarantine_ms=Q, now_ms=T0)
    policies = Policies(store)
    await policies.shadow(sale.event_id, DeadlinePolicy.parse("grace:30000"))
    await policies.promote(sale.event_id)  # v3: grace enforced, quarantine to roll back to
    await policies.shadow(sale.event_id, DeadlinePolicy.parse("release_refund"))  # v4
    await drain(store, ledger, sale.event_id)
    async with ledger.acquire() as conn:
        await rebuild(store, conn, sale.event_id, force=True)
    again = await policies.rollback(sale.event_id)  # v5, as if Redis had never lost it
    assert again.code == PolicyCode.ROLLED_BACK
    assert (again.state.enforced, again.state.enforced_version) == ("quarantine", 5)
    assert (again.state.shadow, again.state.shadow_version) == ("release_refund", 4)
    availability = await store.read.availability(sale.event_id)
    assert availability.config.policy == "quarantine"
