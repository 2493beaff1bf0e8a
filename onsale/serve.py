"""`onsale serve`: the API under uvicorn (uvloop, httptools with bounded reads), N worker
processes sharing one port, their metrics added up across processes (api/metrics.py), their
logs JSON lines with request ids (engine/config/logs.py, api/logs.py).

At start it logs one line saying where it listens and with what settings, secrets left out
(their names are listed when set, never their values)."""

import argparse
import functools
import logging
import os
import resource
import shutil
import tempfile
from typing import TYPE_CHECKING, Any

from engine.config.logs import redact_url, uvicorn_config
from engine.config.variables import Secret, every_problem
from onsale.environment import COMMANDS, FORWARDED_ALLOW_IPS

if TYPE_CHECKING:
    from api.settings import ApiSettings
    from api.transport import HttpBounds
    from api.webhooks_db import WebhookDbSettings

log = logging.getLogger("onsale.serve")

SECRETS = tuple(
    s.name for group in COMMANDS["serve"] for s in group.settings if isinstance(s, Secret)
)


def serve(args: argparse.Namespace) -> int:
    # Before anything imports prometheus_client: each worker writes its series to this private
    # directory, wiped at exit (api/metrics.py; a stale one would add old counts).
    metrics_dir = tempfile.mkdtemp(prefix="onsale-metrics-")
    before = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    try:
        return _serve(args)
    finally:
        shutil.rmtree(metrics_dir, ignore_errors=True)
        # The variable named the directory just wiped: a process started after this one
        # returned (a caller that goes on) must not inherit it.
        if before is None:
            os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
        else:
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = before


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from api.settings import ApiSettings
    from api.webhooks_db import WebhookDbSettings

    with every_problem():  # fail fast, naming every missing or weak variable at once
        settings = ApiSettings.from_env(os.environ)
        hooks = WebhookDbSettings.from_env(os.environ)
        options = serve_options()
    bounds = options["http"].keywords["bounds"]
    summary = startup_summary(args, settings, bounds, hooks, raise_open_files())
    log.info(
        "serving on http://%s:%d with %d worker(s)",
        args.host,
        args.port,
        args.workers,
        extra={"fields": summary},
    )
    uvicorn.run(
        "api.app:app_from_env",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        **options,
    )
    return 0


def serve_options() -> dict[str, Any]:
    """uvicorn's configuration of `onsale serve`; the benchmark baselines are served alike.
    The HTTP bounds (ONSALE_HTTP_*_S) are read here, once, and handed to every connection."""
    from api.claim_front.connection import LaneProtocol
    from api.transport import BoundedHttpToolsProtocol, HttpBounds

    bounds = HttpBounds.from_env(os.environ)
    # httptools, with header, body and first-request timeouts (api/transport.py), and the claims
    # its connection answers before ASGI (api/claim_front/connection.py, ADR 0048) unless turned off
    protocol = LaneProtocol if bounds.early_lane else BoundedHttpToolsProtocol
    return {
        "loop": "uvloop",
        "http": functools.partial(protocol, bounds=bounds),
        "log_level": "warning",
        "log_config": uvicorn_config(os.environ),  # applied again in each worker process
        "access_log": False,  # the API writes its own, with request ids (api/logs.py)
        "timeout_keep_alive": bounds.http_keepalive_s,  # between requests, and before the first one
        "backlog": 4096,
    }


def startup_summary(
    args: argparse.Namespace,
    settings: "ApiSettings",
    bounds: "HttpBounds",
    hooks: "WebhookDbSettings",
    open_files: str,
) -> dict[str, object]:
    """What an operator checks first: where, how many, against what, with which limits."""
    engine, limits = settings.engine, settings.limits
    jwt = settings.jwt
    return {
        "listen": f"http://{args.host}:{args.port}",
        "workers": args.workers,
        "open_files": open_files,
        "http_bounds_s": {
            "header": bounds.http_header_timeout_s,
            "body": bounds.http_body_timeout_s,
            "idle": bounds.http_keepalive_s,
        },
        "early_lane": bounds.early_lane,
        "redis": redact_url(engine.redis_url),
        "key_prefix": engine.key_prefix,
        "redis_timeout_ms": engine.redis_timeout_ms,
        "redis_pool_max": engine.redis_pool_max,
        "autopipeline": engine.redis_autopipeline,
        "sold_out_memory": engine.sold_out_memory,
        "provider": engine.provider,
        "identity": f"jwt from {jwt.issuer}" if jwt is not None else "demo logins",
        "confirm_after": settings.confirm_after,
        "limits": {
            "claims_per_s": limits.claims_per_s,
            "charges_per_s": limits.charges_per_s,
            "login_cap": limits.login_cap,
            "address_per_s": limits.address_per_s,
        },
        "webhook_database": redact_url(hooks.pg_dsn) if hooks.pg_dsn else None,
        "access_log": settings.access_log,
        "metrics": "/metrics, " + ("metrics token" if settings.metrics_token else "admin only"),
        "forwarded_allow_ips": FORWARDED_ALLOW_IPS.read(os.environ),
        "secrets_set": [name for name in SECRETS if os.environ.get(name)],
    }


def raise_open_files() -> str:
    """Raise this process's open-files soft limit to its hard limit (workers inherit it): every
    connection is a descriptor, and the common soft limit of 1,024 is what one client's 1,000
    stalled connections used up. Says what it did, for the log line."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return f"open files limit {soft} (the hard limit)"
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:  # e.g. an unlimited hard limit the kernel caps
        return f"open files limit {soft} (could not raise it to the hard limit: {exc})"
    return f"open files limit raised from {soft} to the hard limit, {hard}"
