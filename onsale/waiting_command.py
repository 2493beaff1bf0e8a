"""`onsale waiting verify EVENT`: check a waiting room's draw from what the API publishes, as
anyone can (ADR 0040). It reads `GET /v1/events/{event}/queue/draw` a page at a time (no login),
checks that the seed revealed at T0 is the one committed to before it (the commitment you noted
then, with --commitment), recomputes every place
from the seed and the anonymous entries, and compares with the order published. Exit 0 when the
draw checks out, 1 when it does not, 2 when it cannot be read (or the draw is not made yet)."""

import argparse
import os
from typing import Any

import httpx
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from engine.waiting.draw import Arrival, verify
from onsale.environment import API_URL

PAGE = 500  # entries per request (the API's largest page)


def add_waiting_parser(sub: Any) -> None:
    waiting = sub.add_parser(
        "waiting", help="a waiting room's draw: verify it", description=__doc__
    )
    ops = waiting.add_subparsers(dest="waiting_command", required=True)
    check = ops.add_parser(
        "verify",
        help="recompute every place of a room's draw from its seed and check the published order",
        description=__doc__,
        epilog=f"Reads {API_URL.name} (default {API_URL.default}) unless --api is given.",
    )
    check.add_argument("event_id", help="the event whose room's draw to check")
    check.add_argument("--api", default=None, help=f"the API's base URL (default ${API_URL.name})")
    check.add_argument(
        "--commitment",
        default=None,
        help="the commitment you noted before T0 (without it, the one the API serves now: a "
        "server that changed its seed could serve a matching new one)",
    )


def fetch_draw(api: str, event_id: str, console: Console) -> tuple[str, str | None, list[Arrival]]:
    """The commitment, the seed (None before T0) and every published entry in place order."""
    arrivals: list[Arrival] = []
    offset: int | None = 0
    with httpx.Client(base_url=api, timeout=10) as client, Progress(console=console) as bar:
        task = bar.add_task("reading the draw", total=None)
        commitment, seed = "", None
        while offset is not None:
            r = client.get(f"/v1/events/{event_id}/queue/draw",
                           params={"offset": offset, "limit": PAGE})  # fmt: skip
            r.raise_for_status()
            page = r.json()
            commitment, seed = page["commitment"], page["seed"]
            arrivals += [Arrival(e["entry"], int(e["seq"])) for e in page["entries"]]
            offset = page["next_offset"]
            bar.update(task, completed=len(arrivals))
    return commitment, seed, arrivals


def run_waiting(args: argparse.Namespace) -> int:
    console = Console()
    api = (args.api or API_URL.read(os.environ)).rstrip("/")
    try:
        commitment, seed, arrivals = fetch_draw(api, args.event_id, console)
    except (httpx.HTTPError, KeyError, ValueError) as exc:
        console.print(f"[red]cannot read the draw of {args.event_id} from {api}: {exc}")
        return 2
    if seed is None:
        console.print(f"the draw of {args.event_id} is made at T0; its commitment: {commitment}")
        return 2
    noted = args.commitment or commitment
    problems = verify(noted, seed, arrivals)
    if args.commitment and args.commitment != commitment:
        problems.insert(0, "the API now serves another commitment than the one noted before T0")
    table = Table(title=f"the draw of {args.event_id}")
    table.add_column("check")
    table.add_column("result")
    table.add_row("entries drawn before T0", f"{len(arrivals):,}")
    table.add_row("commitment", noted + ("" if args.commitment else " (as served now)"))
    table.add_row("seed", seed)
    table.add_row("verdict", "[green]verified" if not problems else "[red]" + "; ".join(problems))
    console.print(table)
    return 0 if not problems else 1
