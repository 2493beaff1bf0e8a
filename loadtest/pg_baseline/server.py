"""The PostgreSQL-only baseline: the claim endpoint a team would build without Redis, behind the
same HTTP layer, so that a benchmark compares the two designs and nothing else.

    python -m loadtest.pg_baseline.server [--port 8300] [--workers 2]
    (ONSALE_PG_DSN, ONSALE_TOKEN_SECRET; optional ONSALE_BASELINE_SCHEMA, ONSALE_PG_POOL_MAX,
    ONSALE_PG_TIMEOUT_MS, ONSALE_SOLD_OUT_TTL_MS, ONSALE_TOKEN_TTL_S, ONSALE_HTTP_KEEPALIVE_S)

The contract is the engine's claim, `POST /v1/events/{event_id}/holds`: a bearer token signed
as api/identity.py signs demo tokens, the hold id derived from the login and `Idempotency-Key`
as the API derives it, body `{}` (best available) or `{"seat_id": ...}`; 201 for a new hold,
200 for a replay by the same login, and the error codes
and envelope of api/errors.py. Served by uvicorn exactly as `onsale serve` serves the API.

A competent design, not a straw man:
- One statement per claim. A CTE reads the event and any hold with this key, locks the best free
  seat by rank (FOR UPDATE SKIP LOCKED) or the wanted seat (FOR UPDATE), inserts the hold, marks
  the seat and returns the outcome. The hold row goes in before the seat is marked: a retry that
  races its own first attempt waits on the hold's primary key, inserts nothing and marks
  nothing; it is then run once more and answers the replay.
- A partial index on the free seats by rank. The asyncpg pool opens every connection at boot and
  runs each statement there once (its statement cache keeps them prepared), so a claim is one
  Bind/Execute round trip; the pool's reset on release is skipped (no connection state changes).
  Sequential scans are off on those connections: every access is by an index, and a plan cached
  while the holds table was empty must not scan it once it is large.
- A sold-out shortcut per process. A best-available claim answered SOLD_OUT raises, in the
  background and on a side connection (not behind the queue of the pool), a flag for the event:
  first a locking read of the free seats waits for every claim still holding a seat lock (SKIP
  LOCKED answers "no free seat I can lock", not "no free seat"), and only if none is left are
  the event's holds loaded into memory. While the flag is up (ONSALE_SOLD_OUT_TTL_MS, 200 ms by
  default) best-available claims are answered without PostgreSQL, before and again after
  waiting for a pooled connection: a hold id found in the snapshot gets its hold back (200);
  any other gets sold_out (hold ids are derived from the login and its key, so another
  login's key is another hold). The snapshot is
  complete because no seat can be taken once none is free and a hold is never deleted.
  When it lapses, the next sold_out from PostgreSQL raises it again. Claims of a specific seat
  always go to PostgreSQL.

Simplifications, on purpose: no "one active hold per login" rule; holds never end (expires_at is
stored and a replay reports EXPIRED past it, but no sweeper frees seats); a sale is open once it
is set up. Its own schema (onsale_baseline by default) keeps it apart from the ledger tables.
A best-available retry that races its own first attempt while every free seat is locked may be
told sold_out although the first attempt then commits; the next retry gets the hold (200)."""

import argparse
import contextlib
import logging
import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from api.app import CLAIM_PATH
from api.claim_front.route import HotRoute
from api.errors import ApiError, error_response, from_engine
from api.responses import json_response
from api.routes.checkout import claim_input, claimed_response
from engine.config.variables import MissingSetting
from engine.model import errors
from loadtest.devstack.stack import spare_port, wait_healthy
from loadtest.pg_baseline.claim import Baseline, BaselineSettings
from loadtest.pg_baseline.sql import audit, setup

# The baseline as the tools and tests use it: set up an event, serve it, audit it.
__all__ = [
    "Baseline",
    "BaselineServer",
    "BaselineSettings",
    "audit",
    "create_app",
    "main",
    "setup",
]

log = logging.getLogger("onsale.pg_baseline")


# -- HTTP --------------------------------------------------------------------------------------

Handler = Callable[[Request], Awaitable[Response]]


def endpoint(handler: Handler) -> Handler:
    """Every failure becomes a JSON error with a stable code, as api/context.py endpoint does."""

    async def run(request: Request) -> Response:
        try:
            return await handler(request)
        except ApiError as exc:
            return error_response(request, exc.code, exc.message, exc.status)
        except errors.EngineError as exc:
            return from_engine(request, exc)
        except Exception:
            log.exception("unexpected error")
            return error_response(request, "internal", "unexpected error", 500)

    return run


def baseline_of(request: Request) -> Baseline:
    b: Baseline = request.app.state.baseline
    return b


@endpoint
async def healthz(request: Request) -> Response:
    return json_response({"ok": True})


@endpoint
async def claim(request: Request) -> Response:
    b = baseline_of(request)
    login = b.tokens.login_of(request)
    event_id, wanted, hold_id = await claim_input(request, b.settings.body_max_bytes, login, 1)
    seat_id = wanted.seat_ids[0] if wanted.seat_ids else None  # one seat per claim here
    return claimed_response(await b.claim(event_id, login, hold_id, seat_id))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request")
    return error_response(request, code, str(exc.detail), exc.status_code)


def create_app(settings: BaselineSettings | None = None) -> HotRoute:
    """The uvicorn factory (`--factory loadtest.pg_baseline.server:create_app`): settings from
    env."""
    resolved = settings or BaselineSettings.from_env(os.environ)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        baseline = Baseline(resolved)
        await baseline.start()  # a statement that does not compile fails boot
        app.state.baseline = baseline
        yield
        await baseline.stop()

    app = Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route(CLAIM_PATH, claim, methods=["POST"]),
        ],
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error},
    )
    return HotRoute(app, "POST", CLAIM_PATH, claim)  # the same HTTP lane as the engine's API


# -- serving -----------------------------------------------------------------------------------


@dataclass
class BaselineServer:
    """The baseline under uvicorn in a subprocess on a spare port (as loadtest/devstack/stack.py
    runs the API): ONSALE_* from the parent environment, overridden by the fields."""

    pg_dsn: str
    log_dir: Path
    workers: int = 1
    extra_env: dict[str, str] = field(default_factory=dict)
    token_secret: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    port: int = field(default_factory=spare_port)
    proc: subprocess.Popen[bytes] | None = None
    out: IO[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> None:
        env = {
            **os.environ,
            "ONSALE_PG_DSN": self.pg_dsn,
            "ONSALE_TOKEN_SECRET": self.token_secret,
            **self.extra_env,
        }
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.out = open(self.log_dir / "pg-baseline.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "loadtest.pg_baseline.server",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
            ],
            env=env,
            stdout=self.out,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_healthy(self.url, self.proc, timeout_s)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
            self.proc = None
        if self.out is not None:
            self.out.close()
            self.out = None


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    from onsale.cli import serve_options

    ap = argparse.ArgumentParser(
        prog="python -m loadtest.pg_baseline.server",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8300)
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args(argv)
    try:
        BaselineSettings.from_env(os.environ)  # fail fast, naming the missing variable
    except MissingSetting as exc:
        print(f"pg_baseline: {exc}", file=sys.stderr)
        return 2
    uvicorn.run(
        "loadtest.pg_baseline.server:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        **serve_options(),
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
