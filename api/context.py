"""What every handler needs, built once per process: store, provider client, token signer,
metrics (api/metrics.py). Handlers are wrapped by `endpoint`, which maps every failure to a JSON
error with a stable code and records latency; nothing escapes as a bare 500, and an unexpected
failure is logged with its traceback and the request's id (api/logs.py), which its answer's
body carries too."""

import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from starlette.requests import Request
from starlette.responses import Response

from api.claim_front.ticket import ticket_of
from api.errors import ApiError, error_response, from_engine
from api.identity import Identity, bearer_bytes
from api.limits import AddressLimiter
from api.logs import AccessLog, echo, request_id_from
from api.metrics import Metrics
from api.responses import read_json
from api.settings import ApiSettings
from api.validate import obj, only
from engine.config.logs import REQUEST_ID, writes_json
from engine.gate.claims import GatedClaims
from engine.gate.soldout import SoldOutMemory
from engine.model import errors, keys
from engine.providers import Provider
from engine.store import Store
from engine.workers.refunds import RefundSender

log = logging.getLogger("onsale.api")

Handler = Callable[[Request], Awaitable[Response]]


@dataclass
class Context:
    settings: ApiSettings
    store: Store
    provider: Provider
    identity: Identity
    metrics: Metrics
    addresses: AddressLimiter
    # "Sold out" from memory once Redis said so, and the gate of claims in flight (ADR 0012).
    sold_out: SoldOutMemory | None = None
    claims: GatedClaims = field(init=False)  # every claim goes through the gate
    access: AccessLog | None = field(init=False)  # ONSALE_ACCESS_LOG, in this process's format
    refunds: RefundSender = field(init=False)  # the refunds this process decides (ADR 0045)

    def __post_init__(self) -> None:
        self.claims = GatedClaims(self.store, self.sold_out)
        self.refunds = RefundSender(self.store, self.provider)
        self.access = AccessLog(json=writes_json()) if self.settings.access_log else None

    def login_of(self, request: Request, event_id: str | None = None) -> str:
        """The buyer's login; with `event_id`, refused unless the token is good for it."""
        return self.identity.caller(request, event_id).login

    def require_admin(self, request: Request) -> str:
        """The acting admin (recorded with what they do); 429 past the address's limit."""
        self.addresses.take(request)
        return self.identity.admin(request)

    def require_ops(self, request: Request) -> None:
        """/metrics and /openapi.json: the metrics token, or an admin credential."""
        token, raw = self.settings.metrics_token.encode(), bearer_bytes(request)
        if token and raw is not None and hmac.compare_digest(raw, token):
            return
        self.identity.admin(request)


def ctx(request: Request) -> Context:
    context: Context = request.app.state.ctx
    return context


def path_id(request: Request, name: str) -> str:
    value = str(request.path_params[name])
    if not keys.valid_id(value):
        raise ApiError(400, "invalid_request", f"{name} must match [A-Za-z0-9_.:-]{{1,64}}")
    return value


class AdminPost(NamedTuple):
    """An admin's request about one event with a JSON object body: who acts, on what event,
    with what body (its fields checked against the route's when it names them)."""

    c: Context
    admin: str
    event_id: str
    body: dict[str, Any]


async def admin_post(
    request: Request, fields: frozenset[str] | None = None, what: str = "", *, empty: bool = False
) -> AdminPost:
    """The checks every such request makes, in their order: the admin credential, the event id,
    the body (an empty one is `{}` where `empty`), its unknown fields (400 naming the first)."""
    c = ctx(request)
    admin = c.require_admin(request)
    event_id = path_id(request, "event_id")
    body = obj(await read_json(request, c.settings.body_max_bytes, allow_empty=empty))
    if fields is not None:
        only(body, fields, what)
    return AdminPost(c, admin, event_id, body)


def answered(
    c: Context, route: str, request_id: str, scope: Any, status: int, started: float
) -> None:
    """An answer's latency and access line, wherever it was made: the wrapper below, or the
    claim front's connection writing a refusal itself (api/claim_front/connection.py)."""
    seconds = time.perf_counter() - started
    c.metrics.observe(route, status, seconds)
    if c.access is not None:
        c.access.write(request_id, scope, status, seconds)


def endpoint(route: str) -> Callable[[Handler], Handler]:
    """The handler with its request id (api/logs.py: in the context while it runs, echoed in
    the answer), every failure mapped to a JSON error, its latency measured and its access
    line written."""

    def wrap(handler: Handler) -> Handler:
        async def run(request: Request) -> Response:
            ticket = ticket_of(request.scope)  # a claim: counted from when the front took it
            started = ticket.started if ticket is not None else time.perf_counter()
            request_id = request_id_from(request.scope["headers"])
            token = REQUEST_ID.set(request_id)
            try:
                response = await answer(route, handler, request)
            finally:
                REQUEST_ID.reset(token)
            echo(response, request_id)
            answered(ctx(request), route, request_id, request.scope, response.status_code, started)
            return response

        return run

    return wrap


async def answer(route: str, handler: Handler, request: Request) -> Response:
    """What the handler answers; a failure as its JSON error, never a bare 500."""
    try:
        return await handler(request)
    except ApiError as exc:
        extra = {"retry_after_s": exc.retry_after_s} if exc.retry_after_s else {}
        return error_response(request, exc.code, exc.message, exc.status, **extra)
    except errors.EngineError as exc:
        return from_engine(request, exc)
    except errors.InvariantViolation:
        log.exception("invariant violation on %s", route)
        return error_response(request, "internal", "invariant violation", 500)
    except Exception:
        log.exception("unexpected error on %s", route)
        return error_response(request, "internal", "unexpected error", 500)


def log_access(request: Request, response: Response) -> None:
    """The access line of an answer given outside `endpoint` (the router's 404 and 405)."""
    c: Context | None = getattr(request.app.state, "ctx", None)
    if c is not None and c.access is not None:
        request_id = REQUEST_ID.get() or response.headers.get("x-request-id", "")
        c.access.write(request_id, request.scope, response.status_code, 0.0)
