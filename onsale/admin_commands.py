"""The rest of the merchant's day from the command line, each a thin client of the admin API
(onsale/admin_client.py): `onsale webhooks` (merchant endpoints: list, create, show, disable,
enable, delete, rotate-secret, deliveries, replay), `onsale logins revoke LOGIN`, and
`onsale orders refund EVENT HOLD` (part of an order, or all that is left, given back: ADR
0043)."""

import argparse
import uuid
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from onsale.admin_client import Admin, admin_group, run_admin

EP = "/v1/admin/webhooks/endpoints"


def add_admin_parsers(sub: Any) -> None:
    ops = admin_group(
        sub,
        "webhooks",
        help="the merchant's webhook endpoints and deliveries",
        description="Register, list, disable, enable, delete merchant webhook endpoints, rotate "
        "their secrets, read their delivery logs and replay failed deliveries, through the "
        "admin API (ONSALE_ADMIN_TOKEN).",
    )
    ops.add_parser("list", help="every endpoint, enabled or not")
    create = ops.add_parser("create", help="register an endpoint (its secret is shown once)")
    create.add_argument("url", help="the HTTPS URL deliveries are POSTed to")
    create.add_argument("--description", default="", help="what it is, for people")
    create.add_argument("--type", action="append", dest="event_types", default=None,
                        help="an event type it wants (repeat; default: every type)")  # fmt: skip
    for name, text in (("show", "one endpoint"), ("disable", "stop sending to it"),
                       ("enable", "send to it again"), ("delete", "remove it"),
                       ("rotate-secret", "a new secret (the old one accepted a while)"),
                       ("deliveries", "its delivery log, newest first")):  # fmt: skip
        op = ops.add_parser(name, help=text)
        op.add_argument("endpoint_id", help="the endpoint")
        if name == "deliveries":
            op.add_argument("--status", default="", help="pending, delivered or failed")
    replay = ops.add_parser("replay", help="send its failed deliveries again")
    replay.add_argument("endpoint_id", help="the endpoint")
    replay.add_argument("--since-ms", type=int, default=0, help="those created from then on")

    lops = admin_group(sub, "logins", help="revoke a login's tokens",
                       description="Every token of a login issued up to now stops working on "
                       "every API process, through the admin API.")  # fmt: skip
    lops.add_parser("revoke", help="every token of the login issued up to now stops working"
                    ).add_argument("login", help="the login")  # fmt: skip

    oops = admin_group(sub, "orders", help="give back part of an order, or all of it",
                       description="Refund some seats of a confirmed order (or units of its "
                       "cart's lines), or all that is left: exactly their price goes back and "
                       "they go back on sale.")  # fmt: skip
    refund = oops.add_parser("refund", help="refund seats (or units) of a confirmed order")
    refund.add_argument("event_id", help="the event")
    refund.add_argument("hold_id", help="the order's hold")
    goods = refund.add_mutually_exclusive_group(required=True)
    goods.add_argument("--seat", action="append", dest="seat_ids", help="a seat (repeat)")
    goods.add_argument("--line", action="append", dest="lines",
                       help="units of a line: SKU@LOCATION*QUANTITY (repeat)")  # fmt: skip
    refund.add_argument("--reason", required=True, help="why, for the record")
    refund.add_argument(
        "--key",
        default=None,
        help="its Idempotency-Key: the same key is the same refund (default: new)",
    )


def endpoints_table(rows: list[dict[str, Any]]) -> Table:
    table = Table("endpoint", "url", "enabled", "types", "description")
    for e in rows:
        table.add_row(e["endpoint_id"], e["url"], "yes" if e["enabled"] else "no",
                      ", ".join(e["event_types"]), e["description"])  # fmt: skip
    return table


def deliveries(admin: Admin, console: Console, endpoint_id: str, status: str) -> None:
    table = Table("delivery", "type", "status", "attempts", "last status", "event")
    query = f"?status={status}" if status else ""
    page = admin.call("GET", f"{EP}/{endpoint_id}/deliveries{query}")
    for d in page["deliveries"]:
        table.add_row(
            *(
                str(d[k] if d[k] is not None else "-")
                for k in (
                    "delivery_id",
                    "event_type",
                    "status",
                    "attempts",
                    "last_status",
                    "event_id",
                )
            )
        )
    console.print(table)


def run_webhooks(args: argparse.Namespace) -> int:
    e = f"{EP}/{getattr(args, 'endpoint_id', '')}"

    def step(admin: Admin, console: Console) -> None:
        body = {"url": getattr(args, "url", ""), "description": getattr(args, "description", "")}
        if getattr(args, "event_types", None):
            body["event_types"] = args.event_types
        steps: dict[str, Callable[[], Any]] = {
            "list": lambda: console.print(endpoints_table(admin.call("GET", EP)["endpoints"])),
            "create": lambda: console.print(admin.call("POST", EP, body, ok=(201,))),
            "show": lambda: console.print(admin.call("GET", e)),
            "disable": lambda: console.print(admin.call("POST", f"{e}/disable")),
            "enable": lambda: console.print(admin.call("POST", f"{e}/enable")),
            "delete": lambda: admin.call("DELETE", e, ok=(200, 204)),
            "rotate-secret": lambda: console.print(admin.call("POST", f"{e}/rotate-secret", {})),
            "deliveries": lambda: deliveries(admin, console, args.endpoint_id, args.status),
            "replay": lambda: console.print(
                admin.call("POST", f"{e}/replay", {"since_ms": args.since_ms}, ok=(200, 202))
            ),
        }
        steps[args.webhooks_command]()

    return run_admin(args.api, step)


def run_logins(args: argparse.Namespace) -> int:
    def step(admin: Admin, console: Console) -> None:
        console.print(admin.call("POST", f"/v1/admin/logins/{args.login}/revoke"))

    return run_admin(args.api, step)


def line_of(text: str) -> dict[str, Any]:
    """SKU@LOCATION*QUANTITY, as the refund's `lines` name it."""
    sku, _, rest = text.partition("@")
    location, _, quantity = rest.partition("*")
    if not (sku and location and quantity.isdigit()):
        raise ValueError(f"{text!r}: a line is SKU@LOCATION*QUANTITY")
    return {"sku": sku, "location": location, "quantity": int(quantity)}


def run_orders(args: argparse.Namespace) -> int:
    def step(admin: Admin, console: Console) -> None:
        body: dict[str, Any] = {"reason": args.reason}
        if args.seat_ids:
            body["seat_ids"] = args.seat_ids
        else:
            body["lines"] = [line_of(x) for x in args.lines]
        key = args.key or uuid.uuid4().hex
        path = f"/v1/admin/events/{args.event_id}/holds/{args.hold_id}/refunds"
        done = admin.call("POST", path, body, ok=(200, 202), headers={"Idempotency-Key": key})
        console.print({**done, "idempotency_key": key})

    return run_admin(args.api, step)
