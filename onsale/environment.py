"""The command line's own variables, declared once (engine/config/variables.py), and which
groups of variables each command reads: `onsale <command> --help` lists them
(onsale/help_text.py) and docs/configuration.md is printed from them
(`python -m onsale.help_text`). tests/unit/test_cli_help.py reads each group off its reader and
fails when a command reads a variable its groups do not declare, or declares one it never reads."""

from collections.abc import Mapping

from api.settings import ADMIN_TOKEN, API, JWT, LIMITS
from api.transport import HTTP
from api.webhooks_db import WEBHOOK_DB
from engine.config.logs import LOGS
from engine.config.settings import ENGINE, LEDGER_DB, STRIPE
from engine.config.variables import Group, Int, Setting, Text
from engine.workers.metrics import EXPORTER
from persistence.settings import LEDGER, SENDER

HOST = Text("ONSALE_HOST", "`onsale serve --host`: the address to listen on", "127.0.0.1")
PORT = Int("ONSALE_PORT", "`onsale serve --port`: the port to listen on", 8000)
WORKERS = Int("ONSALE_WORKERS", "`onsale serve --workers`: processes (about one per core)", 1)
FORWARDED_ALLOW_IPS = Text(
    "FORWARDED_ALLOW_IPS", "proxies trusted with X-Forwarded-For (uvicorn's)", "127.0.0.1"
)
SERVE = Group("`onsale serve`", (HOST, PORT, WORKERS, FORWARDED_ALLOW_IPS))
OPERATOR = Text("ONSALE_OPERATOR", "who corrects stock (else $USER, else cli)", said="$USER")
API_URL = Text("ONSALE_API_URL", "the API's base URL", "http://127.0.0.1:8000")
ADMIN_CLIENT = Group("the admin API's client", (API_URL, ADMIN_TOKEN))

WITH_REDIS = (LOGS, ENGINE, STRIPE)
WITH_LEDGER = (*WITH_REDIS, LEDGER_DB, LEDGER, SENDER)
COMMANDS: Mapping[str, tuple[Group, ...]] = {
    "sweep": WITH_REDIS,
    "worker": (*WITH_REDIS, EXPORTER),
    "migrate": (LOGS, LEDGER_DB),  # the database alone
    "ledger": (*WITH_LEDGER, EXPORTER),
    "rebuild": WITH_LEDGER,
    "reconcile": WITH_LEDGER,
    "serve": (SERVE, LOGS, ENGINE, STRIPE, API, LIMITS, JWT, HTTP, WEBHOOK_DB),
    "policy": (*WITH_REDIS, LEDGER_DB, LEDGER),
    "stock": (*WITH_REDIS, Group("stock corrections", (OPERATOR,))),
    "chaos": (),  # it starts its own servers and hands them their settings
    "waiting": (Group("the API it reads", (API_URL,)),),  # a client of the public API alone
    "event": (ADMIN_CLIENT,),  # clients of the admin API
    "presale": (ADMIN_CLIENT,),
    "webhooks": (ADMIN_CLIENT,),
    "logins": (ADMIN_CLIENT,),
    "orders": (ADMIN_CLIENT,),
}


def every_group() -> tuple[Group, ...]:
    """Each group once, in the order the commands first name them."""
    seen: dict[str, Group] = {}
    for groups in COMMANDS.values():
        for group in groups:
            seen.setdefault(group.title, group)
    return tuple(seen.values())


def every_setting() -> tuple[Setting[object], ...]:
    """Each variable once (some are in two groups: the database's, the admin token)."""
    seen: dict[str, Setting[object]] = {}
    for group in every_group():
        for setting in group.settings:
            seen.setdefault(setting.name, setting)
    return tuple(seen.values())
