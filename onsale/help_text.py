"""What `onsale <command> --help` says about the environment: every variable a command reads, with
its meaning and default, in groups as the settings read them (engine/config/settings.py,
api/settings.py, persistence/settings.py, api/transport.py, api/webhooks_db.py,
engine/config/logs.py, engine/workers/metrics.py). tests/unit/test_cli_help.py reads each group's
variables off its settings loader and fails when one is missing here or listed but no longer
read."""

import argparse
import os
import textwrap
from collections.abc import Mapping
from typing import Any

Group = tuple[str, Mapping[str, str]]

LOGS: Group = (
    "logs",
    {
        "ONSALE_LOG_LEVEL": "debug, info, warning or error (default info)",
        "ONSALE_LOG_FORMAT": "json: one JSON object a line (default); text: for a terminal",
    },
)
ENGINE: Group = (
    "Redis and the engine",
    {
        "ONSALE_REDIS_URL": "Redis to use (required), e.g. redis://127.0.0.1:6379/0",
        "ONSALE_KEY_PREFIX": "prefix of every key (default onsale:v1)",
        "ONSALE_REDIS_TIMEOUT_MS": "a Redis call's whole wait, then 503 (default 2000)",
        "ONSALE_REDIS_CONNECT_TIMEOUT_MS": "connecting to Redis (default 1000)",
        "ONSALE_REDIS_POOL_MAX": "Redis connections per process (default 64)",
        "ONSALE_REDIS_AUTOPIPELINE": "1: script calls and reads of one loop tick share a round "
        "trip (default 1)",
        "ONSALE_SOLD_OUT_MEMORY": "1: the API answers sold_out from memory (default 1)",
        "ONSALE_SOLD_OUT_MEMORY_MS": "... for at most this long without Redis (default 250)",
        "ONSALE_CLAIM_WINDOW": "claims of one event in flight per process (1024; 0: no gate)",
        "ONSALE_SWEEP_INTERVAL_MS": "pause between sweeps with nothing due (default 200)",
        "ONSALE_SWEEP_BATCH_MAX": "holds examined per sweep call (default 50)",
        "ONSALE_SWEEP_ROUNDS_MAX": "sweep calls per event per pass (default 50)",
        "ONSALE_TRIM_RETENTION_MS": "ended holds kept in Redis this long (default 600000)",
        "ONSALE_HOLD_RECORD": "sparse (default) or full: a new hold's stored fields (ADR 0034)",
        "ONSALE_TRIM_INTERVAL_MS": "pause between trim passes (default 5000)",
        "ONSALE_TRIM_WITHOUT_LEDGER": "1: trim events no ledger reads (default 0)",
        "ONSALE_REDIS_WAIT_REPLICAS": "answer only once this many replicas hold a decision "
        "(WAIT; default 0: do not wait)",
        "ONSALE_REDIS_WAIT_MS": "... waiting at most this long (default 50)",
        "ONSALE_PROVIDER": "payment provider: simulator or stripe (default simulator)",
        "ONSALE_PROVIDER_URL": "the simulator's URL (required with the simulator)",
        "ONSALE_PROVIDER_TIMEOUT_MS": "a provider call's wait (default 2000)",
        "ONSALE_REFUND_INTERVAL_MS": "pause between refund passes (default 500)",
        "ONSALE_RECONCILE_INTERVAL_MS": "pause between reconciliation passes (default 10000)",
        "ONSALE_RECONCILE_STALE_MS": "a charge in flight this long is asked about (default 120000)",
        "ONSALE_RECONCILE_WATCH_MS": "a decline this recent is asked about again (default 600000)",
    },
)
STRIPE: Group = (
    "Stripe (ONSALE_PROVIDER=stripe)",
    {
        "ONSALE_STRIPE_API_KEY": "secret key, sk_... or rk_... (required; never logged)",
        "ONSALE_STRIPE_WEBHOOK_SECRET": "the endpoint's signing secret, whsec_... (required; "
        "never logged)",
        "ONSALE_STRIPE_API_BASE": "another Stripe-compatible server (default: Stripe's)",
        "ONSALE_STRIPE_MAX_NETWORK_RETRIES": "the library's retries (default 2)",
        "ONSALE_STRIPE_LOOKBACK_DAYS": "nightly reconciliation looks this far back (default 180)",
        "ONSALE_STRIPE_PUBLISHABLE_KEY": "pk_...: the buyer's page pays through Stripe.js "
        "(default: none, no payment form)",
        "ONSALE_STRIPE_JS_URL": "where the page loads Stripe.js (default https://js.stripe.com/v3/)",
    },
)
API: Group = (
    "the API",
    {
        "ONSALE_GC_GEN0": "young GC every n allocations, none while claims wait (50000)",
        "ONSALE_ADMIN_TOKEN": "bearer token of the admin endpoints (required; never logged)",
        "ONSALE_METRICS_TOKEN": "bearer token of /metrics for the scraper (default: admin only)",
        "ONSALE_WEBHOOK_SECRET": "verifies the simulator's callbacks (required with it)",
        "ONSALE_WEBHOOK_SECRET_PREVIOUS": "the secret being rotated out, accepted meanwhile",
        "ONSALE_DEMO_LOGIN": "1: demo logins by name (demo and load runs only)",
        "ONSALE_TOKEN_SECRET": "signs demo login tokens (required with ONSALE_DEMO_LOGIN)",
        "ONSALE_TOKEN_TTL_S": "demo tokens' lifetime (default 3600)",
        "ONSALE_CLAIMS_PER_S": "a login's claims per second, 0: off (default 2)",
        "ONSALE_CLAIMS_BURST": "... up to this many at once (default 10)",
        "ONSALE_CHARGES_PER_S": "a login's charge starts per second (default 1)",
        "ONSALE_CHARGES_BURST": "... up to this many at once (default 5)",
        "ONSALE_LOGIN_CAP": "seats one login may hold and buy per event (default 6)",
        "ONSALE_ADDRESS_PER_S": "login and admin requests per client address (default 5)",
        "ONSALE_ADDRESS_BURST": "... up to this many at once (default 20)",
        "ONSALE_REVOCATION_POLL_MS": "revoked logins reloaded this often (default 1000)",
        "ONSALE_BODY_MAX_BYTES": "largest buyer or callback body (default 16384)",
        "ONSALE_ADMIN_BODY_MAX_BYTES": "largest seat map (default 8388608)",
        "ONSALE_WEBHOOK_TOLERANCE_S": "callback signatures older than this are refused "
        "(default 300)",
        "ONSALE_CONFIRM_AFTER": "ledger: a sale is told once the ledger holds it (default); "
        "redis: at once",
        "ONSALE_DURABLE_WAIT_MS": "a callback waits this long for its sale to be durable "
        "(default 2000)",
        "ONSALE_ACCESS_LOG": "1: one log line per request (default 1)",
    },
)
JWT: Group = (
    "buyer identity from an identity provider",
    {
        "ONSALE_JWT_JWKS_URL": "the provider's JWKS URL (unless ONSALE_DEMO_LOGIN=1)",
        "ONSALE_JWT_ISSUER": "the tokens' issuer",
        "ONSALE_JWT_AUDIENCE": "the tokens' audience",
        "ONSALE_JWT_ALGORITHMS": "accepted algorithms (default RS256,ES256)",
        "ONSALE_JWT_LEEWAY_S": "clock skew tolerated (default 30)",
        "ONSALE_JWT_ADMIN_CLAIM": "a claim that, when true, makes a token an admin credential",
        "ONSALE_JWT_EVENTS_CLAIM": "the claim listing a token's events (default onsale_events)",
        "ONSALE_JWKS_REFRESH_S": "keys fetched again this often (default 300)",
        "ONSALE_JWKS_RETRY_S": "an unknown key refetches at most this often (default 10)",
    },
)
HTTP: Group = (
    "HTTP bounds",
    {
        "ONSALE_HTTP_HEADER_TIMEOUT_S": "a request's headers must arrive within (default 10)",
        "ONSALE_HTTP_BODY_TIMEOUT_S": "... and its body within (default 30)",
        "ONSALE_HTTP_KEEPALIVE_S": "idle connection kept, before and between requests (default 75)",
        "ONSALE_EARLY_LANE": "1: most T0 refusals answered by their connection (ADR 0035); 0: off",
    },
)
WEBHOOK_DB: Group = (
    "the ledger database, for the merchant webhook routes",
    {
        "ONSALE_PG_DSN": "PostgreSQL DSN (unset: the webhook routes answer 503)",
        "ONSALE_API_PG_POOL_MAX": "connections per API process (default 2)",
        "ONSALE_PG_TIMEOUT_MS": "per statement or connection attempt (default 5000)",
        "ONSALE_MERCHANT_WEBHOOK_HTTP": "1: plain http webhook URLs (local runs, tests)",
    },
)
PROXY: Group = (
    "behind a proxy",
    {"FORWARDED_ALLOW_IPS": "proxies trusted with X-Forwarded-For (uvicorn's; default local)"},
)
LEDGER_DB: Group = (
    "the ledger's database",
    {
        "ONSALE_PG_DSN": "PostgreSQL DSN of the ledger (required)",
        "ONSALE_PG_POOL_MAX": "connections (default 4)",
        "ONSALE_PG_TIMEOUT_MS": "per statement or connection attempt (default 5000)",
    },
)
LEDGER: Group = (
    "the ledger writer",
    {
        "ONSALE_LEDGER_BATCH_MAX": "outbox entries per transaction (default 2000)",
        "ONSALE_LEDGER_IDLE_MS": "longest blocking wait on the drained outboxes (default 100)",
        "ONSALE_LEDGER_CLAIM_IDLE_MS": "a pending entry idle this long belongs to a dead "
        "writer and is taken over (default 30000)",
        "ONSALE_OUTBOX_RETENTION_MS": "outbox entries kept once in the ledger (default 86400000)",
        "ONSALE_LEDGER_METRICS_PORT": "`onsale ledger`'s Prometheus port (default 9108)",
        "ONSALE_AUTO_REBUILD": "0: a lost or fenced event waits for `onsale rebuild` (default 1)",
    },
)
SENDER: Group = (
    "merchant webhooks sent by `onsale ledger`",
    {
        "ONSALE_MERCHANT_WEBHOOKS": "0: this ledger process sends none (default 1)",
        "ONSALE_MERCHANT_WEBHOOK_TIMEOUT_MS": "one attempt's wait (default 15000)",
        "ONSALE_MERCHANT_WEBHOOK_BATCH_MAX": "deliveries sent at once (default 32)",
        "ONSALE_MERCHANT_WEBHOOK_INTERVAL_MS": "pause when nothing is due (default 500)",
        "ONSALE_MERCHANT_WEBHOOK_BACKOFF_MS": "first retry's delay (default 5000)",
        "ONSALE_MERCHANT_WEBHOOK_BACKOFF_MAX_MS": "longest delay (default 3600000)",
        "ONSALE_MERCHANT_WEBHOOK_MAX_AGE_MS": "a delivery is failed past this age "
        "(default 259200000)",
        "ONSALE_MERCHANT_WEBHOOK_LOG_RETENTION_MS": "a done delivery is kept this long in the "
        "log (default 2592000000)",
    },
)
EXPORTER: Group = (
    "Prometheus exporter of `onsale worker` and `onsale ledger`",
    {
        "ONSALE_METRICS_HOST": "address the exporter listens on (default 127.0.0.1)",
        "ONSALE_WORKER_METRICS_PORT": "`onsale worker`'s port (default 9109)",
    },
)
OPERATOR: Group = ("stock corrections", {"ONSALE_OPERATOR": "who corrects (else $USER)"})
ADMIN_CLIENT: Group = (
    "the admin API's credential",
    {"ONSALE_ADMIN_TOKEN": "the admin token it sends (never on the command line)"},
)
API_URL: Group = (
    "the API it reads",
    {"ONSALE_API_URL": "the API's base URL (default http://127.0.0.1:8000)"},
)

WITH_REDIS = (LOGS, ENGINE, STRIPE)
WITH_LEDGER = (*WITH_REDIS, LEDGER_DB, LEDGER, SENDER)
COMMANDS: Mapping[str, tuple[Group, ...]] = {
    "sweep": WITH_REDIS,
    "worker": (*WITH_REDIS, EXPORTER),
    "migrate": (LOGS, LEDGER_DB),  # the database alone
    "ledger": (*WITH_LEDGER, EXPORTER),
    "rebuild": WITH_LEDGER,
    "reconcile": WITH_LEDGER,
    "serve": (LOGS, ENGINE, STRIPE, API, JWT, HTTP, WEBHOOK_DB, PROXY),
    "policy": (*WITH_REDIS, LEDGER_DB, LEDGER),
    "stock": (*WITH_REDIS, OPERATOR),
    "chaos": (),  # it starts its own servers and hands them their settings
    "waiting": (API_URL,),  # a client of the public API: nothing else
    "event": (API_URL, ADMIN_CLIENT),  # clients of the admin API
    "webhooks": (API_URL, ADMIN_CLIENT),
    "logins": (API_URL, ADMIN_CLIENT),
    "orders": (API_URL, ADMIN_CLIENT),
}

# Options whose default comes from the environment: (command, option) -> variable.
OPTION_ENV: Mapping[tuple[str, str], str] = {
    ("serve", "--host"): "ONSALE_HOST",
    ("serve", "--port"): "ONSALE_PORT",
    ("serve", "--workers"): "ONSALE_WORKERS",
}


ENVIRONMENT = "environment:"
NAME_WIDTH, LINE_WIDTH = 36, 100


def environment(groups: tuple[Group, ...]) -> str:
    """The epilog of a command: its variables, by group, each described beside its name."""
    lines = [ENVIRONMENT]
    indent = " " * (4 + NAME_WIDTH + 1)
    for title, variables in groups:
        lines.append(f"  {title}:")
        for name, text in variables.items():
            first = f"    {name:<{NAME_WIDTH}} "
            lines += textwrap.wrap(text, LINE_WIDTH, initial_indent=first, subsequent_indent=indent)
    return "\n".join(lines)


class Formatter(argparse.HelpFormatter):
    """argparse's own layout, except the environment block, kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        fill = super()._fill_text
        parts = text.split("\n\n")
        return "\n\n".join(
            p if p.startswith(ENVIRONMENT) else fill(p, width, indent) for p in parts
        )


def env_option(
    parser: argparse.ArgumentParser, command: str, flag: str, default: str, help: str, **kw: Any
) -> argparse.Action:
    """An option whose default is read from its variable (OPTION_ENV), named in its help."""
    name = OPTION_ENV[(command, flag)]
    value = os.environ.get(name) or default
    return parser.add_argument(
        flag, default=value, help=f"{help} (env {name}; default {default})", **kw
    )


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser's subcommands by name (none for a leaf)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def document(parser: argparse.ArgumentParser) -> None:
    """Give every command, and each of its subcommands, the list of its variables (after any
    epilog it has), with the layout kept."""
    for name, command in subparsers(parser).items():
        groups = COMMANDS.get(name, ())  # a command missing here fails tests/unit/test_cli_help
        for each in (command, *subparsers(command).values()):
            each.formatter_class = Formatter
            each.epilog = "\n\n".join(x for x in (each.epilog, environment(groups)) if x)
