"""`onsale presale add|codes|show`: a presale's access codes from the command line (ADR 0049),
a thin client of the admin API (onsale/admin_client.py: the token from ONSALE_ADMIN_TOKEN, the
API's own checks and answers, exit 0, 1 refused, 2 unreachable). `add` makes or sends any
number of codes in batches of the API's largest, with progress, each batch under its own
Idempotency-Key (`--run` names them: running the same command again with the same --run makes
no code twice), and writes the codes out, one a line."""

import argparse
import os
import sys
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from onsale.admin_client import Admin, admin_group, run_admin
from onsale.event_command import when_ms

BATCH_MAX = 1_000  # codes one request adds (api/validate.py LIMITS["codes"])


def add_presale_parser(sub: Any) -> None:
    ops = admin_group(sub, "presale", help="a presale's access codes: add, list, show",
                      description=__doc__)  # fmt: skip
    add = ops.add_parser("add", help="add codes to a presale (made, or from a file)")
    add.add_argument("event_id", help="the event")
    add.add_argument("presale", help="the presale's name (its window is set by its first codes)")
    add.add_argument("--opens-at", required=True, help="the window opens: ms or ISO 8601")
    add.add_argument("--closes-at", required=True, help="the window closes: ms or ISO 8601")
    add.add_argument("--expires-at", default=None, help="no use after it (default: closes)")
    add.add_argument("--uses", type=int, default=1, help="holds a code may be spent by (1)")
    add.add_argument("--per-login", type=int, default=1, help="... by one login (1; 0: none)")
    made = add.add_mutually_exclusive_group(required=True)
    made.add_argument("--count", type=int, help="make this many codes")
    made.add_argument("--codes-file", help="a file of codes, one a line")
    add.add_argument("--run", default=None, help="names this run's batches (default: random)")
    add.add_argument("--out", default=None, help="write the codes here (default: stdout)")
    codes = ops.add_parser("codes", help="an event's codes with their uses")
    codes.add_argument("event_id", help="the event")
    codes.add_argument("--presale", default=None, help="one presale's codes")
    ops.add_parser("show", help="an event's presale windows").add_argument(
        "event_id", help="the event"
    )


def batches(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    """The request bodies of `add`: the window and terms, and each batch's codes or count."""
    terms: dict[str, Any] = {
        "opens_at_ms": when_ms(args.opens_at),
        "closes_at_ms": when_ms(args.closes_at),
        "uses": args.uses,
        "uses_per_login": args.per_login,
    }
    if args.expires_at is not None:
        terms["expires_at_ms"] = when_ms(args.expires_at)
    if args.codes_file:
        with open(args.codes_file, encoding="utf-8") as f:
            given = [line.strip() for line in f if line.strip()]
        for start in range(0, len(given), BATCH_MAX):
            yield {**terms, "codes": given[start : start + BATCH_MAX]}
        return
    for start in range(0, args.count, BATCH_MAX):
        yield {**terms, "count": min(BATCH_MAX, args.count - start)}


def add(admin: Admin, console: Console, args: argparse.Namespace) -> None:
    run = args.run or os.urandom(6).hex()
    path = f"/v1/admin/events/{args.event_id}/presales/{args.presale}/codes"
    bodies = list(batches(args))
    total = sum(len(b.get("codes", ())) or b["count"] for b in bodies)
    written: list[str] = []
    added = 0
    with Progress(console=Console(stderr=True)) as bar:
        task = bar.add_task(f"{args.presale}: adding codes", total=total)
        for n, body in enumerate(bodies):
            key = {"Idempotency-Key": f"{run}-{n}"}
            answer = admin.call("POST", path, body, ok=(200, 201), headers=key)
            written += answer["codes"]
            added += answer["added"]
            bar.update(task, advance=len(answer["codes"]))
    out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout  # noqa: SIM115
    try:
        out.write("".join(f"{code}\n" for code in written))
    finally:
        if args.out:
            out.close()
    said = f"{args.presale}: {added} codes added, {len(written) - added} there already (run {run})"
    Console(stderr=True).print(said)


def codes(admin: Admin, console: Console, event_id: str, presale: str | None) -> None:
    table = Table("code", "presale", "used", "uses", "per login", "expires (ms)")
    after = ""
    while True:
        query = f"?limit=500&after={after}" + (f"&presale={presale}" if presale else "")
        page = admin.call("GET", f"/v1/admin/events/{event_id}/codes{query}")
        for c in page["codes"]:
            table.add_row(c["code"], c["presale"], str(c["used"]), str(c["uses"]),
                          str(c["uses_per_login"]), str(c["expires_at_ms"]))  # fmt: skip
        after = page["next_after"]
        if not after:
            break
    console.print(table)


def show(admin: Admin, console: Console, event_id: str) -> None:
    table = Table("presale", "opens (ms)", "closes (ms)")
    for w in admin.call("GET", f"/v1/events/{event_id}/presales")["presales"]:
        table.add_row(w["name"], str(w["opens_at_ms"]), str(w["closes_at_ms"]))
    console.print(table)


def run_presale(args: argparse.Namespace) -> int:
    def step(admin: Admin, console: Console) -> None:
        if args.presale_command == "add":
            add(admin, console, args)
        elif args.presale_command == "codes":
            codes(admin, console, args.event_id, args.presale)
        else:
            show(admin, console, args.event_id)

    return run_admin(args.api, step)
