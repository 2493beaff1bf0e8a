"""`onsale stock correct|show`: a stock event's counts (ADR 0022). `correct` sets or adjusts one
location's on-hand count (one script call, idempotent by correction id, recorded in the event's
outbox and mirrored to the ledger); `show` prints availability per SKU and location (one read
of the event's stock hash)."""

import argparse
import asyncio
import os
import sys
import uuid
from typing import TYPE_CHECKING, Any

from redis.exceptions import ConnectionError as RedisConnectionError
from rich.console import Console
from rich.table import Table

from api.validate import LIMITS
from engine.config.settings import Settings
from engine.model import errors
from engine.model.stock_lines import COUNTERS
from onsale.environment import OPERATOR

if TYPE_CHECKING:
    from engine.model.stock_lines import Correction


def add_stock_parser(sub: Any) -> None:
    stock = sub.add_parser(
        "stock",
        help="a stock event's counts: correct one location's count, show availability",
        description=__doc__,
    )
    ops = stock.add_subparsers(dest="stock_command", required=True)
    correct = ops.add_parser(
        "correct",
        help="set or adjust the on-hand count of one SKU at one location",
        description="Refused when available units would go below zero (units held by carts, "
        "blocked by late payments or sold are never corrected away). Exit 0 when applied or "
        "replayed, 1 when refused.",
    )
    correct.add_argument("--event", required=True, help="the stock event's id")
    correct.add_argument("--sku", required=True, help="the SKU")
    correct.add_argument("--location", required=True, help="the location")
    mode = correct.add_mutually_exclusive_group(required=True)
    mode.add_argument("--set", type=int, dest="set_to", metavar="N", help="on hand becomes N")
    mode.add_argument(
        "--adjust", type=int, dest="adjust_by", metavar="N", help="on hand changes by N (signed)"
    )
    correct.add_argument("--reason", required=True, help="why (kept with the correction)")
    correct.add_argument(
        "--operator",
        default=None,
        help=f"who corrects (default: ${OPERATOR.name}, else $USER, else cli)",
    )
    correct.add_argument(
        "--id",
        dest="correction_id",
        default=None,
        help="the correction id: the same id again replays the first answer (default: a new "
        "id, printed; give it to retry safely)",
    )
    show = ops.add_parser("show", help="availability per SKU and location")
    show.add_argument("--event", required=True, help="the stock event's id")


def run_stock(args: argparse.Namespace) -> int:
    settings = Settings.from_env(os.environ)
    try:
        if args.stock_command == "correct":
            return asyncio.run(_correct(settings, args))
        return asyncio.run(_show(settings, args.event))
    except (RedisConnectionError, errors.StoreUnavailable) as exc:
        print(f"onsale: cannot reach Redis at {settings.redis_url}: {exc}", file=sys.stderr)
        return 3
    except errors.EngineError as exc:
        details = ", ".join(f"{k} {v}" for k, v in exc.public_details().items())
        told = f"{exc.code}: {exc.summary}" + (f" ({details})" if details else "")
        print(f"onsale: {args.event}: {told}", file=sys.stderr)
        return 1


def _operator(given: str | None) -> str:
    return given or OPERATOR.read(os.environ) or os.environ.get("USER") or "cli"


def _out_of_bounds(args: argparse.Namespace) -> str | None:
    """What the API would refuse in this correction (api/validate.py LIMITS), or None."""
    value, name = (args.set_to, "set") if args.set_to is not None else (args.adjust_by, "adjust")
    checks = [(value, name), (len(args.reason), "reason")]
    if args.operator is not None:
        checks.append((len(args.operator), "operator"))
    for got, limit in checks:
        bound = LIMITS[limit]
        if not bound.low <= got <= bound.high:
            what = "length" if bound.of == "chars" else "value"
            return f"--{limit}: {what} must be in [{bound.low}, {bound.high}]"
    return None


async def _correct(settings: Settings, args: argparse.Namespace) -> int:
    correction_id = args.correction_id or f"cli-{uuid.uuid4().hex[:16]}"
    refused = _out_of_bounds(args)
    if refused is not None:
        print(f"onsale: {refused}", file=sys.stderr)
        return 2
    try:
        done = await _apply(settings, args, correction_id)
    except ValueError as exc:  # a malformed id: nothing was sent
        print(f"onsale: {exc}", file=sys.stderr)
        return 2
    what = "replayed (applied before)" if done.replay else "applied"
    Console().print(
        f"{args.event}: correction {correction_id} {what}; {args.sku}@{args.location} "
        f"on hand {done.on_hand}, available {done.available}"
    )
    return 0


async def _apply(settings: Settings, args: argparse.Namespace, correction_id: str) -> "Correction":
    from engine.store import Store

    client = settings.redis_client()
    try:
        store = Store(
            client, prefix=settings.key_prefix, timeout_s=settings.redis_timeout_ms / 1000
        )
        await store.scripts.load_all()
        return await store.stock.correct(
            args.event, correction_id, args.sku, args.location,
            set_to=args.set_to, adjust_by=args.adjust_by, reason=args.reason,
            operator=_operator(args.operator),
        )  # fmt: skip
    finally:
        await client.aclose()


async def _show(settings: Settings, event_id: str) -> int:
    from engine.store import Store

    client = settings.redis_client()
    try:
        store = Store(
            client, prefix=settings.key_prefix, timeout_s=settings.redis_timeout_ms / 1000
        )
        table = await store.stock.table(event_id)
    finally:
        await client.aclose()
    if not table:
        print(f"onsale: event {event_id} sells no stock (a seat event)", file=sys.stderr)
        return 1
    t = Table(title=f"{event_id}: stock per SKU and location")
    t.add_column("sku")
    t.add_column("price", justify="right")
    t.add_column("location")
    for name in COUNTERS:
        t.add_column(name.replace("_", " "), justify="right")
    for sku, entry in sorted(table.items()):
        for location, counts in sorted(entry["locations"].items()):
            row = [str(counts.get(name, 0)) for name in COUNTERS]
            t.add_row(sku, str(entry["price_minor"]), location, *row)
    Console().print(t)
    return 0
