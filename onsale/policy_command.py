"""`onsale policy shadow|promote|rollback|report`: an event's deadline policies (ADR 0020).
`shadow`, `promote` and `rollback` change them in Redis, one script call each, recorded in the
event's outbox; none rewrites a decision already recorded. `report` reads the ledger."""

import argparse
import asyncio
import os
import sys
from typing import TYPE_CHECKING, Any

from redis.exceptions import ConnectionError as RedisConnectionError
from rich.console import Console
from rich.table import Table

from engine.config.settings import Settings
from engine.config.variables import MissingSetting
from engine.model.errors import EventNotFound

if TYPE_CHECKING:
    from engine.store.policies import DeadlinePolicy, PolicyChange
    from persistence.policy_report import PolicyReport
    from persistence.settings import LedgerSettings


def add_policy_parser(sub: Any) -> None:
    policy = sub.add_parser(
        "policy",
        help="an event's deadline policies: shadow a candidate, promote, roll back, report",
    )
    ops = policy.add_subparsers(dest="policy_command", required=True)
    shadow = ops.add_parser(
        "shadow", help="run a candidate beside the enforced policy, acting on nothing"
    )
    shadow.add_argument("event_id")
    shadow.add_argument(
        "candidate", help="quarantine, release_refund or grace:<ms>; none stops shadowing"
    )
    ops.add_parser("promote", help="enforce the shadow candidate for new decisions").add_argument(
        "event_id"
    )
    ops.add_parser(
        "rollback", help="enforce again, for new decisions, the policy the last promotion replaced"
    ).add_argument("event_id")
    report = ops.add_parser(
        "report", help="decisions by policy and version, shadow agreements and disagreements"
    )
    report.add_argument("event_id")
    report.add_argument("--json", action="store_true", help="JSON on stdout instead of tables")
    report.add_argument("--examples", type=int, default=3, help="disagreements shown per kind")


def run_policy(args: argparse.Namespace) -> int:
    if args.policy_command == "report":
        return _report_command(args)
    return _change_command(args)


def _change_command(args: argparse.Namespace) -> int:
    from engine.store.policies import DeadlinePolicy

    candidate = None
    try:
        if args.policy_command == "shadow" and args.candidate != "none":
            candidate = DeadlinePolicy.parse(args.candidate)
        settings = Settings.from_env(os.environ)
    except (ValueError, MissingSetting) as exc:
        print(f"onsale: {exc}", file=sys.stderr)
        return 2
    try:
        change = asyncio.run(_change(settings, args.policy_command, args.event_id, candidate))
    except RedisConnectionError as exc:
        print(f"onsale: cannot reach Redis at {settings.redis_url}: {exc}", file=sys.stderr)
        return 3
    except EventNotFound:
        print(f"onsale: no event {args.event_id}", file=sys.stderr)
        return 1
    s = change.state
    shadow = f"{s.shadow} v{s.shadow_version}" if s.shadow else "none"
    Console().print(
        f"{args.event_id}: {change.code}; enforced {s.enforced} v{s.enforced_version}; "
        f"shadow {shadow}; rollback would enforce {s.previous or '-'}"
    )
    return 0 if change.changed else 1


async def _change(
    settings: Settings, op: str, event_id: str, candidate: "DeadlinePolicy | None"
) -> "PolicyChange":
    from engine.store import Store
    from engine.store.policies import Policies

    client = settings.redis_client()
    try:
        store = Store(
            client, prefix=settings.key_prefix, timeout_s=settings.redis_timeout_ms / 1000
        )
        await store.scripts.load_all()
        policies = Policies(store)
        if op == "shadow":
            return await policies.shadow(event_id, candidate)
        if op == "promote":
            return await policies.promote(event_id)
        return await policies.rollback(event_id)
    finally:
        await client.aclose()


def _report_command(args: argparse.Namespace) -> int:
    import orjson

    from persistence.policy_report import as_json
    from persistence.settings import LedgerSettings

    settings = LedgerSettings.from_env(os.environ)
    report = asyncio.run(_read_report(settings, args.event_id, args.examples))
    if args.json:
        sys.stdout.write(orjson.dumps(as_json(report), option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print_report(Console(), report)
    if not report.enforced and not report.changes:
        print(f"onsale: the ledger holds no decision of event {args.event_id}", file=sys.stderr)
        return 1
    return 0


async def _read_report(settings: "LedgerSettings", event_id: str, examples: int) -> "PolicyReport":
    from persistence.database import create_pool
    from persistence.policy_report import policy_report

    pool = await create_pool(settings.pg_dsn, size_max=1, timeout_s=settings.pg_timeout_ms / 1000)
    try:
        async with pool.acquire() as conn:
            return await policy_report(conn, event_id, examples)
    finally:
        await pool.close()


def print_report(console: Console, report: "PolicyReport") -> None:
    t = Table(title=f"{report.event_id}: decisions by the deadline policy enforced")
    for col in ("policy", "version", "decisions", "terminal", "classified by a shadow"):
        t.add_column(col, justify="left" if col == "policy" else "right")
    for e in report.enforced:
        t.add_row(e.policy, str(e.version), str(e.decisions), str(e.terminal), str(e.classified))
    console.print(t)
    _print_shadow(console, report)
    changes = Table(title="policy changes (none rewrites a recorded decision)")
    for col in ("version", "change", "enforced before", "enforced after", "shadow after"):
        changes.add_column(col, justify="right" if col == "version" else "left")
    for c in report.changes:
        shadow = f"{c.shadow_policy} v{c.shadow_version}" if c.shadow_policy else "-"
        after = f"{c.policy} v{c.policy_version}"
        changes.add_row(str(c.version), c.change, c.before, after, shadow)
    console.print(changes)


def _print_shadow(console: Console, report: "PolicyReport") -> None:
    t = Table(title="what a shadow candidate would have decided, beside the real decision")
    for col in ("candidate", "kind", "decided", "shadow would have", "count", "agrees"):
        t.add_column(col, justify="right" if col == "count" else "left")
    for c in report.classified:
        candidate = f"{c.shadow_policy} v{c.shadow_version}"
        t.add_row(candidate, c.kind, c.real, c.shadow, str(c.count), "yes" if c.agrees else "NO")
    console.print(t)
    console.print(f"{report.agreements} agreements, {report.disagreements} disagreements")
    x = Table(title="examples of disagreement")
    for col in ("candidate", "hold", "charge", "what happened", "under", "shadow would have"):
        x.add_column(col)
    for e in report.examples:
        x.add_row(
            f"{e.shadow_policy} v{e.shadow_version}",
            e.hold_id,
            e.charge_id or "-",
            e.happened,
            f"{e.policy} v{e.policy_version}",
            e.shadow,
        )
    console.print(x)
