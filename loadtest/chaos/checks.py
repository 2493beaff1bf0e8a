"""How `onsale chaos` ends: it waits until the sale has settled (no hold live or blocked, no
refund pending, no payment in flight, no callback undelivered, the ledger caught up), runs the
nightly reconciliation twice (`onsale reconcile`: the first repairs what no callback told, the
second must find nothing left), and checks every invariant from the three records: Redis (the
engine's audit), the ledger (PostgreSQL) and the provider's own books. Each check counts its
violations; the run passes when every count is 0."""

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson

from engine.model import errors, keys
from engine.model.ledger_progress import LEDGER_GROUP
from engine.model.states import HoldState
from engine.store import Store
from loadtest.chaos.faults import run_onsale
from loadtest.chaos.load import Seen
from loadtest.demo.run import wait_settled
from loadtest.devstack.stack import LocalStack

SETTLE_TIMEOUT_S = 120.0
SOLD = ("CONFIRMED", "EXCEPTION")


@dataclass(frozen=True)
class Check:
    name: str
    violations: int
    detail: str = ""


@dataclass
class Settled:
    """The sale's end state before the checks."""

    settled: dict[str, bool] = field(default_factory=dict)  # event -> settled in time
    behind: dict[str, int] = field(default_factory=dict)  # event -> outbox entries not mirrored
    reported: dict[str, int] = field(default_factory=dict)  # event -> the lag Redis reports
    nightly: list[dict[str, Any]] = field(default_factory=list)  # the reconcile reports
    provider: dict[str, Any] = field(default_factory=dict)  # the simulator's GET /v1/ledger


async def settle(stack: LocalStack, store: Store, events: list[str], log_dir: Path) -> Settled:
    """Settle, reconcile, settle again, reconcile again; the second report is the verdict."""
    out = Settled()
    async with httpx.AsyncClient(base_url=stack.api_url, timeout=10) as http:
        for round_ in (1, 2):
            deadline = time.monotonic() + SETTLE_TIMEOUT_S
            for event_id in events:
                left = max(1.0, deadline - time.monotonic())
                out.settled[event_id] = await wait_settled(stack, http, event_id, left)
            out.behind = await ledger_caught_up(store, events, deadline)
            out.reported = await reported_lag(store, events)
            if any(out.reported.values()):
                await write_down_ledger_group(store, out.reported, log_dir / "ledger-group.log")
            report = log_dir / f"reconcile-{round_}.json"
            await run_onsale(
                stack,
                log_dir / "reconcile.log",
                "reconcile",
                *(arg for e in events for arg in ("--event", e)),
                *("--json", str(report), "--grace-ms", "0"),
            )
            out.nightly.append(orjson.loads(await asyncio.to_thread(report.read_bytes)))
    async with httpx.AsyncClient(base_url=stack.sim_url, timeout=10) as sim:
        out.provider = (await sim.get("/v1/ledger")).json()
    return out


async def ledger_caught_up(store: Store, events: list[str], deadline: float) -> dict[str, int]:
    """Until the ledger holds every decision of every event's outbox (or the deadline):
    entries still not in it, per event. Counted from the ledger's position (ADR 0016: every
    entry below it is committed), not from the lag Redis reports (see `reported_lag`)."""
    while True:
        behind = {e: await not_in_ledger(store, e) for e in events}
        if not any(behind.values()) or time.monotonic() > deadline:
            return behind
        await asyncio.sleep(0.3)


async def not_in_ledger(store: Store, event_id: str) -> int:
    floor = (await store.read.ledger_progress(event_id)).floor
    stream = keys.event_key(event_id, "outbox", store.prefix)
    newer = await store.client.xrange(stream, min=f"{floor[0]}-{floor[1]}", count=100_000)
    return len(newer or [])


async def reported_lag(store: Store, events: list[str]) -> dict[str, int]:
    """The entries Redis says the ledger group has not read or acknowledged (XINFO GROUPS lag
    plus pending: what `onsale_ledger_behind_entries` exports), per event."""
    return {e: (await store.read.ledger_progress(e)).behind for e in events}


async def write_down_ledger_group(store: Store, behind: dict[str, int], log: Path) -> None:
    """For an event the ledger seems behind on: its outbox's consumer groups and pending
    entries as Redis reports them (XINFO GROUPS, XPENDING), for the person who looks."""
    lines = []
    for event_id, n in behind.items():
        if not n:
            continue
        stream = keys.event_key(event_id, "outbox", store.prefix)
        groups = await store.client.xinfo_groups(stream)
        pending = await store.client.xpending(stream, LEDGER_GROUP)
        last = await store.client.xrevrange(stream, count=1)
        lines.append(f"{event_id}: {n} behind; groups {groups}; pending {pending}; last {last}")
    await asyncio.to_thread(_append, log, "\n".join(lines) + "\n")


def _append(log: Path, text: str) -> None:
    with log.open("a") as out:
        out.write(text)


@dataclass(frozen=True)
class LedgerSales:
    """What the ledger holds as sold: hold -> (event, seats), and the provider attempts that
    paid for them."""

    holds: dict[str, tuple[str, list[str]]]
    paying_attempts: set[str]


async def ledger_sales(dsn: str, events: list[str]) -> LedgerSales:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        rows = await conn.fetch(
            "select h.event_id, h.hold_id, h.seat_id, c.attempt_id from holds h"
            " left join charges c on c.event_id = h.event_id and c.charge_id = h.winner"
            " where h.event_id = any($1::text[]) and h.state = any($2::text[])",
            events,
            list(SOLD),
        )
    finally:
        await conn.close()
    return LedgerSales(
        {r["hold_id"]: (r["event_id"], r["seat_id"].split(",")) for r in rows},
        {r["attempt_id"] for r in rows if r["attempt_id"]},
    )


def seats_sold_twice(sales: LedgerSales) -> list[str]:
    count = Counter((event, seat) for event, seats in sales.holds.values() for seat in seats)
    return sorted(f"{event}/{seat}" for (event, seat), n in count.items() if n > 1)


def told_not_in_ledger(seen: Seen, sales: LedgerSales) -> list[str]:
    """Holds a buyer read CONFIRMED that the ledger does not hold sold with the same seats."""
    missing = []
    for (event_id, hold_id), seats in sorted(seen.told.items()):
        sold = sales.holds.get(hold_id)
        if sold is None or sold[0] != event_id or frozenset(sold[1]) != seats:
            missing.append(f"{event_id}/{hold_id}")
    return missing


async def told_not_confirmed(store: Store, seen: Seen) -> list[str]:
    """Holds a buyer read CONFIRMED that Redis no longer holds CONFIRMED."""
    lost = []
    for event_id, hold_id in sorted(seen.told):
        try:
            state = (await store.read.hold(event_id, hold_id)).state
        except errors.EngineError as exc:
            lost.append(f"{event_id}/{hold_id}: {exc}")
            continue
        if state != HoldState.CONFIRMED:
            lost.append(f"{event_id}/{hold_id}: {state}")
    return lost


def captures_kept_without_sale(
    provider: dict[str, Any], events: list[str], sales: LedgerSales
) -> list[str]:
    """Captures at the provider that neither paid for a sale in the ledger nor were refunded:
    every late, abandoned, contradicting or losing capture must have been given back."""
    entries = [e for e in provider["entries"] if e.get("event_id") in events]
    refunded = {e["attempt_id"] for e in entries if e["kind"] == "refund"}
    return sorted(
        e["attempt_id"]
        for e in entries
        if e["kind"] == "capture"
        and e["attempt_id"] not in refunded
        and e["attempt_id"] not in sales.paying_attempts
    )


def money_by_event(
    provider: dict[str, Any], events: list[str], sales: LedgerSales, price: int
) -> list[str]:
    """Per event, the money the provider kept against the seats the ledger sold x price."""
    wrong = []
    for event_id in events:
        kept = sum(
            e["amount"] if e["kind"] == "capture" else -e["amount"]
            for e in provider["entries"]
            if e.get("event_id") == event_id and e["kind"] in ("capture", "refund")
        )
        seats = sum(len(s) for ev, s in sales.holds.values() if ev == event_id)
        if kept != seats * price:
            wrong.append(f"{event_id}: provider kept {kept}, ledger sold {seats} x {price}")
    return wrong


def nightly_left(report: dict[str, Any]) -> list[str]:
    """What the final reconciliation left: unrepaired discrepancies, and events where the
    provider's net is not what our charges say."""
    left = [
        f"{d['cls']}: {d['entity']} ({d['detail'][:80]})"
        for rows in report["by_class"].values()
        for d in rows
        if not d["repaired"]
    ]
    for event_id, e in report["events"].items():
        if e["provider_net"] != e["expected_net"]:
            left.append(f"{event_id}: provider {e['provider_net']} != ours {e['expected_net']}")
    return left


def check(name: str, found: list[str]) -> Check:
    return Check(name, len(found), "; ".join(found[:3]) + (" ..." if len(found) > 3 else ""))


@dataclass(frozen=True)
class Run:
    """What the checks read besides the three records: the run's own account of itself."""

    events: list[str]
    price: int
    seen: Seen
    end: Settled
    faults_planned: int
    faults_done: int  # faults whose process was back
    recoveries: int  # events rebuilt from the ledger
    single_redis: bool  # one Redis with AOF always: nothing may be lost
    alive: bool  # every process and server running at the end
    lost_redis: bool = False  # Redis came back empty: the ledger process rebuilt (ADR 0037)
    unhealed: tuple[str, ...] = ()  # events seen lost that never sold again
    sizes: tuple[tuple[str, int], ...] = ()  # each event's seats as created


async def verdict(store: Store, dsn: str, run: Run, log_dir: Path) -> list[Check]:
    """Every check, each with its count of violations (the audit's, in full, in audit.log)."""
    sales = await ledger_sales(dsn, run.events)
    audit = []
    for event_id in run.events:
        report = await store.read.audit(event_id)
        audit += [f"{event_id}: {v}" for v in report.violations]
    if audit:
        await asyncio.to_thread(_append, log_dir / "audit.log", "\n".join(audit) + "\n")
    end = run.end
    checks = [
        check("engine audit of every event (docs/invariants.md)", audit),
        check(
            "nightly reconciliation: nothing left, provider net = ours",
            nightly_left(end.nightly[-1]),
        ),
        check("no seat sold twice in the ledger", seats_sold_twice(sales)),
        check("every confirmation told is in the ledger", told_not_in_ledger(run.seen, sales)),
        check(
            "every confirmation told is CONFIRMED in Redis",
            await told_not_confirmed(store, run.seen),
        ),
        check(
            "every capture at the provider paid for a sale or was refunded",
            captures_kept_without_sale(end.provider, run.events, sales),
        ),
        check(
            "money kept = seats sold x price, per event",
            money_by_event(end.provider, run.events, sales, run.price),
        ),
        check("everything settled", [e for e, ok in end.settled.items() if not ok]),
        check("the ledger caught up", [f"{e}: {n} behind" for e, n in end.behind.items() if n]),
        check(
            "every scheduled fault injected and healed",
            [f"{run.faults_done} of {run.faults_planned}"]
            * (run.faults_done != run.faults_planned),
        ),
        check("every process and server running at the end", [] if run.alive else ["no"]),
    ]
    if run.lost_redis:
        checks += [
            check(
                f"Redis lost {run.recoveries} events: each rebuilt by itself and selling again",
                list(run.unhealed),
            ),
            check(
                "every event whole after its rebuilds (its seats as created, none fenced)",
                await not_whole(store, dict(run.sizes)),
            ),
        ]
    elif run.single_redis:
        checks.append(
            check(
                "one Redis with AOF always lost nothing (no event fenced or lost)",
                [f"{run.recoveries} rebuilds"] * (run.recoveries > 0),
            )
        )
    return checks


async def not_whole(store: Store, sizes: dict[str, int]) -> list[str]:
    """Events not open with every seat they were created with (a rebuild left half done, or
    fenced)."""
    found = []
    for event_id, seats in sizes.items():
        a = await store.read.availability(event_id)
        if a.status != "open" or a.seats_total != seats:
            found.append(f"{event_id}: {a.status}, {a.seats_total} of {seats} seats")
    return found


def findings(run: Run, unplanned: Counter[str]) -> list[Check]:
    """What went wrong without breaking an invariant, counted beside the checks (the exit code
    does not depend on them; docs/reliability.md says what past runs found)."""
    seen, end = run.seen, run.end
    errors_5xx = {c: n for c, n in seen.answers.items() if c[:1] == "5" and c[:3] != "503"}
    lag = {e: n for e, n in end.reported.items() if n and not end.behind.get(e)}
    return [
        Check(
            "answers 5xx other than 503 (an outage is answered 503 with Retry-After)",
            sum(errors_5xx.values()),
            ", ".join(f"{c}: {n}" for c, n in errors_5xx.items()),
        ),
        Check(
            "processes that died unasked (restarted by the supervisor)",
            sum(unplanned.values()),
            ", ".join(f"{k}: {n}" for k, n in unplanned.items()),
        ),
        Check("requests never answered within a client's patience", seen.given_up),
        Check(
            "Redis reports a ledger lag while the ledger holds every decision",
            sum(lag.values()),
            ", ".join(f"{e}: {n} entries" for e, n in lag.items()),
        ),
    ]
