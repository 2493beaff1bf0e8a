"""`onsale event create|show|open|close|cancel|list`: the merchant's day from the command line,
each a thin client of the admin API (onsale/admin_client.py: the token from ONSALE_ADMIN_TOKEN,
the API's own checks and answers, exit 0, 1 refused, 2 unreachable)."""

import argparse
from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from onsale.admin_client import Admin, admin_group, run_admin

CANCEL_CALLS_MAX = 1_000  # requests one cancel makes before it stops and says what remains


def add_event_parser(sub: Any) -> None:
    ops = admin_group(sub, "event", help="create, show, open, close, cancel or list events",
                      description=__doc__)  # fmt: skip
    create = ops.add_parser("create", help="create a seat event (a DRAFT unless --opens-at)")
    create.add_argument("event_id", help="the new event's id")
    seats = create.add_mutually_exclusive_group(required=True)
    seats.add_argument("--seats", type=int, help="that many seats, s0 .. s<n-1>, best first")
    seats.add_argument("--seat-map", help="a JSON file: the create's `seats` list")
    create.add_argument("--price-minor", type=int, default=0, help="a seat's price (cents)")
    create.add_argument("--currency", default="EUR", help="ISO 4217 (default EUR)")
    create.add_argument("--hold-ttl-ms", type=int, default=None, help="a hold's life")
    create.add_argument("--opens-at", default=None, help="T0: now, ms, or an ISO 8601 time")
    for name in ("name", "venue", "description", "image-url", "time-zone", "locale"):
        create.add_argument(f"--{name}", default=None, help=f"the event's {name.replace('-', ' ')}")
    create.add_argument("--starts-at", default=None, help="the show's start: ms or ISO 8601")
    for name, text in (("show", "the event's configuration and counters"),
                       ("close", "stop new claims and charges (holds run to their deadlines)"),
                       ("cancel", "close, end every hold, refund every sold seat")):  # fmt: skip
        ops.add_parser(name, help=text).add_argument("event_id", help="the event")
    opener = ops.add_parser("open", help="open the sale at T0 (now unless --at)")
    opener.add_argument("event_id", help="the event")
    opener.add_argument("--at", default="now", help="T0: now, ms, or an ISO 8601 time")
    opener.add_argument("--reschedule", action="store_true", help="move a T0 still to come")
    ops.add_parser("list", help="every event, its status and counters")


def when_ms(text: str) -> int:
    """now (0), milliseconds since the epoch, or an ISO 8601 time with its offset."""
    if text == "now":
        return 0
    if text.isdigit():
        return int(text)
    stamp = datetime.fromisoformat(text)
    if stamp.tzinfo is None:
        raise ValueError(f"{text!r} needs its offset (e.g. 2026-12-24T20:00+01:00)")
    return int(stamp.timestamp() * 1000)


DETAILS = ("hold_ttl_ms", "name", "venue", "description", "image_url", "time_zone", "locale")


def create_body(args: argparse.Namespace) -> dict[str, Any]:
    if args.seat_map:
        with open(args.seat_map, "rb") as f:
            seats = orjson.loads(f.read())
    else:
        seats = [{"seat_id": f"s{i}", "rank": i} for i in range(args.seats)]
    body: dict[str, Any] = {"event_id": args.event_id, "seats": seats,
                            "price_minor": args.price_minor, "currency": args.currency}  # fmt: skip
    for name in DETAILS:
        if getattr(args, name) is not None:
            body[name] = getattr(args, name)
    if args.starts_at is not None:
        body["starts_at_ms"] = when_ms(args.starts_at)
    if args.opens_at is not None:
        body["opens_at_ms"] = when_ms(args.opens_at)
    return body


def show(admin: Admin, console: Console, event_id: str) -> None:
    config = admin.call("GET", f"/v1/admin/events/{event_id}")
    counts = admin.call("GET", f"/v1/events/{event_id}")
    table = Table(title=config.get("name") or event_id, show_header=False)
    for name in ("event_id", "status", "kind", "opens_at_ms", "currency", "price_minor", "venue",
                 "starts_at_ms", "time_zone", "locale"):  # fmt: skip
        table.add_row(name, str(config.get(name)))
    for name in ("seats_total", "free", "held", "blocked", "sold"):
        table.add_row(name, str(counts.get(name)))
    console.print(table)


def cancel(admin: Admin, console: Console, event_id: str) -> None:
    """Cancel, a bounded share per request, until nothing is held, blocked or sold."""
    with Progress(console=console) as bar:
        task = bar.add_task(f"cancelling {event_id}", total=None)
        for _ in range(CANCEL_CALLS_MAX):
            answer = admin.call("POST", f"/v1/admin/events/{event_id}/cancel", {}, ok=(200, 202))
            remaining = int(answer.get("remaining", 0))
            bar.update(task, advance=int(answer.get("done", 0)), description=f"{remaining} left")
            if remaining == 0:
                console.print(f"{event_id}: cancelled")
                return
    console.print(f"{event_id}: still {remaining} to cancel; run it again")


def listing(admin: Admin, console: Console) -> None:
    table = Table("event", "status", "kind", "free", "held", "blocked", "sold")
    cursor = None
    while True:
        page = admin.call("GET", "/v1/admin/events" + (f"?cursor={cursor}" if cursor else ""))
        for e in page["events"]:
            table.add_row(*(str(e.get(k)) for k in ("event_id", "status", "kind", "free", "held",
                                                     "blocked", "sold")))  # fmt: skip
        cursor = page["next_cursor"]
        if not cursor:
            break
    console.print(table)


def run_event(args: argparse.Namespace) -> int:
    e = getattr(args, "event_id", "")

    def step(admin: Admin, console: Console) -> None:
        steps: dict[str, Callable[[], Any]] = {
            "create": lambda: console.print(
                admin.call("POST", "/v1/admin/events", create_body(args), ok=(201,))
            ),
            "open": lambda: console.print(
                admin.call(
                    "POST",
                    f"/v1/admin/events/{e}/open",
                    {"opens_at_ms": when_ms(args.at), "reschedule": args.reschedule},
                )
            ),
            "close": lambda: console.print(admin.call("POST", f"/v1/admin/events/{e}/close")),
            "show": lambda: show(admin, console, e),
            "cancel": lambda: cancel(admin, console, e),
            "list": lambda: listing(admin, console),
        }
        steps[args.event_command]()

    return run_admin(args.api, step)
