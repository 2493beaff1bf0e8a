"""create_app(settings): the checkout API, provider callbacks, admin and ops endpoints."""

import asyncio
import contextlib
import gc
import logging
import os
import time
from collections.abc import AsyncIterator

import httpx
import redis.asyncio as aioredis
from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from api.claim_front.asgi_lane import asgi_lane
from api.claim_front.route import HotRoute
from api.context import Context, log_access
from api.errors import error_response
from api.identity import DemoTokens, Identity, Jwks, JwtTokens
from api.limits import AddressLimiter
from api.metrics import Metrics
from api.routes import (
    admin,
    callbacks,
    checkout,
    events,
    listings,
    logins,
    me,
    meta,
    presales,
    refunds,
    seatmap,
    stock,
    ui,
    waiting,
    webhooks,
)
from api.settings import ApiSettings
from api.webhooks_db import WebhookDb, WebhookDbSettings
from engine.config.logs import remember_secrets
from engine.gate.soldout import SoldOutMemory
from engine.model import errors
from engine.providers import build_provider
from engine.store import Store
from engine.store.loops import repeat

log = logging.getLogger("onsale.api")

CLAIM_PATH = "/v1/events/{event_id}/holds"

# Starlette tries routes in order: the T0 hot path comes first.
ROUTES = [
    Route(CLAIM_PATH, checkout.claim, methods=["POST"]),
    Route("/healthz", meta.healthz, methods=["GET"]),
    Route("/readyz", meta.readyz, methods=["GET"]),
    Route("/metrics", meta.metrics, methods=["GET"]),
    Route("/openapi.json", meta.openapi, methods=["GET"]),
    Route("/v1/auth/config", logins.auth_config, methods=["GET"]),  # ADR 0050
    Route("/v1/login", logins.login, methods=["POST"]),
    Route("/v1/events/{event_id}", checkout.availability, methods=["GET"]),
    Route("/v1/events/{event_id}/seats", checkout.free_seats, methods=["GET"]),
    Route("/v1/events/{event_id}/stock", stock.stock_table, methods=["GET"]),
    Route("/v1/events/{event_id}/sections", stock.sections, methods=["GET"]),
    Route("/v1/events/{event_id}/seatmap", seatmap.layout, methods=["GET"]),  # ADR 0028
    Route("/v1/events/{event_id}/seatmap/state", seatmap.state, methods=["GET"]),
    Route("/v1/events/{event_id}/seatmap/stream", seatmap.stream, methods=["GET"]),
    Route("/v1/events/{event_id}/holds/{hold_id}", checkout.hold_status, methods=["GET"]),
    Route("/v1/events/{event_id}/holds/{hold_id}", checkout.release, methods=["DELETE"]),
    Route("/v1/events/{event_id}/holds/{hold_id}/charges", checkout.start_charge, methods=["POST"]),
    Route(
        "/v1/events/{event_id}/holds/{hold_id}/charges/{charge_id}/abandon",
        checkout.abandon_charge,
        methods=["POST"],
    ),
    Route("/v1/provider/callbacks", callbacks.provider_callback, methods=["POST"]),
    Route("/v1/admin/events", admin.create_event, methods=["POST"]),
    Route("/v1/admin/events/{event_id}/open", admin.open_sale, methods=["POST"]),
    *listings.ROUTES,  # listings, exports, close and cancel (ADR 0025)
    Route(
        "/v1/admin/events/{event_id}/holds/{hold_id}/revoke", admin.revoke_hold, methods=["POST"]
    ),
    Route("/v1/admin/events/{event_id}/exceptions", admin.exceptions, methods=["GET"]),
    Route("/v1/admin/events/{event_id}/refunds/retry", refunds.retry_refund, methods=["POST"]),
    Route(
        "/v1/admin/events/{event_id}/holds/{hold_id}/refunds",
        refunds.refund_order,
        methods=["POST"],
    ),
    Route("/v1/admin/events/{event_id}/stock/corrections", stock.correct_stock, methods=["POST"]),
    Route("/v1/admin/logins/{login}/revoke", logins.revoke_login, methods=["POST"]),
    *webhooks.ROUTES,  # merchant webhooks (ADR 0024)
    *waiting.ROUTES,  # the waiting room (ADR 0029)
    *presales.ROUTES,  # presale access codes (ADR 0049)
    *events.ROUTES,  # events as buyers find them (ADR 0041)
    *me.ROUTES,  # a buyer's own orders (ADR 0042)
    *ui.ROUTES,  # the buyer's page and the ops dashboard (ADR 0028)
]


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request")
    response = error_response(request, code, str(exc.detail), exc.status_code)
    log_access(request, response)  # outside every endpoint: its access line (api/logs.py)
    return response


def _identity(settings: ApiSettings) -> tuple[Identity, Jwks | None]:
    if settings.jwt is None:
        demo = DemoTokens(settings.token_secret, settings.token_ttl_s)
        return Identity(admin_token=settings.admin_token, demo=demo), None
    jwks = Jwks(settings.jwt)
    tokens = JwtTokens(settings.jwt, jwks)
    return Identity(admin_token=settings.admin_token, jwt_tokens=tokens), jwks


def _background(ctx: Context, jwks: Jwks | None, stop: asyncio.Event) -> list[asyncio.Task[None]]:
    """Revoked logins reloaded every poll; the identity provider's keys every refresh; the
    store's counters copied into the metrics every second (api/metrics.py)."""

    async def revocations() -> bool:
        ctx.identity.revocations.load(await ctx.store.revoked.all())
        return False

    expected = (errors.StoreUnavailable, RedisError, OSError)
    poll_s = ctx.settings.revocation_poll_ms / 1000
    tasks = [
        asyncio.create_task(ctx.metrics.follow_store(stop)),
        asyncio.create_task(
            repeat("revocations", revocations, stop, interval_s=poll_s, expected=expected, log=log)
        ),
    ]
    if jwks is not None:
        refresh_s = float(jwks.settings.jwks_refresh_s)

        async def keys() -> bool:
            if time.monotonic() - jwks.fetched_at >= refresh_s * 0.9:  # not again after boot
                await jwks.fetch()
            return False

        tasks.append(
            asyncio.create_task(
                repeat(
                    "jwks",
                    keys,
                    stop,
                    interval_s=refresh_s,
                    expected=(httpx.HTTPError, ValueError),
                    log=log,
                )
            )
        )
    return tasks


def store_for(settings: ApiSettings, client: "aioredis.Redis") -> Store:
    """The store an API process decides with (also the bare app's engine-script claim's)."""
    return Store(
        client,
        prefix=settings.engine.key_prefix,
        timeout_s=settings.engine.redis_timeout_ms / 1000,
        autopipeline=settings.engine.redis_autopipeline,
        limits=settings.limits.login(),
        idempotency_window_ms=settings.engine.trim_retention_ms,
        hold_record=settings.engine.hold_record,
        wait=settings.engine.replica_wait(client),
    )


async def _shut_down(
    app: Starlette,
    jwks: Jwks | None,
    stop: asyncio.Event,
    tasks: list[asyncio.Task[None]],
    client: aioredis.Redis,
) -> None:
    """After the last answer: the access lines still buffered are written first (a uvicorn
    worker ends by raising again the SIGTERM it caught, so no exit hook runs in it), then the
    background loops end and every connection is closed."""
    ctx: Context = app.state.ctx
    if ctx.access is not None:
        ctx.access.flush()
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    if app.state.webhooks is not None:
        await app.state.webhooks.close()
    if jwks is not None:
        await jwks.close()
    if ctx.sold_out is not None:
        await ctx.sold_out.stop()
    await ctx.provider.aclose()
    await client.aclose()


# `hooks`: the database of the merchant webhook routes (None: they answer 503, ADR 0024).
def create_app(settings: ApiSettings, hooks: WebhookDbSettings | None = None) -> HotRoute:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        client = settings.engine.redis_client()
        store = store_for(settings, client)
        if not await store.boot():
            log.warning("Redis unreachable at boot; answering 503 until it is back")
        sold_out = None
        if settings.engine.sold_out_memory:
            sold_out = SoldOutMemory(
                client,
                settings.engine.key_prefix,
                ttl_s=settings.engine.sold_out_memory_ms / 1000,
                window=settings.engine.claim_window,  # 0: no gate
                pause_gc=settings.gc_gen0 > 0,  # the collector tuned: also paused while claims wait
            )
            await sold_out.start()
        provider = build_provider(
            settings.engine,
            callback_secrets=settings.webhook_secrets,
            tolerance_s=settings.webhook_tolerance_s,
        )
        identity, jwks = _identity(settings)
        if jwks is not None and not await jwks.fetch_quietly():
            log.warning("identity provider keys unavailable at boot; buyers get 503 until fetched")
        limits = settings.limits
        app.state.ctx = Context(
            settings=settings,
            store=store,
            provider=provider,
            identity=identity,
            metrics=Metrics(store, sold_out),  # the store's own counters too
            addresses=AddressLimiter(limits.address_per_s, limits.address_burst),
            sold_out=sold_out,
        )
        app.state.webhooks = WebhookDb(hooks) if hooks is not None else None
        stop = asyncio.Event()
        tasks = _background(app.state.ctx, jwks, stop)
        settle_gc(settings.gc_gen0)
        yield
        await _shut_down(app, jwks, stop, tasks, client)

    app = Starlette(
        routes=ROUTES, lifespan=lifespan, exception_handlers={HTTPException: _http_error}
    )
    # The claim front (api/claim_front/, ADR 0048): the T0 route skips Starlette's middleware
    # and router; it stays in ROUTES too, for the OpenAPI check and for anyone mounting the
    # plain app. With `onsale serve` the connection looks at a claim before it becomes an ASGI
    # call: most T0 refusals are answered there.
    return HotRoute(app, "POST", CLAIM_PATH, checkout.claim, lane=asgi_lane, early=True)


def settle_gc(gen0: int) -> None:
    """Everything made at boot (modules, settings, scripts, the app) moves to the collector's
    permanent generation, and the youngest generation is collected every ONSALE_GC_GEN0
    allocations (50,000; Python's default is 700; 0 keeps it). Under a burst each request makes
    cyclic garbage (exceptions and their tracebacks, tasks), and with thousands of requests in
    flight each collection walks them all: a burst is answered 15-20% sooner
    (docs/benchmarks-journal.md section 3), for a few MB more between collections. With it, the
    collector is also paused while claims wait at a gate, a second at most per wave
    (engine/gate/claim_gate.py `_park`)."""
    gc.collect()
    gc.freeze()
    if gen0 > 0:
        gc.set_threshold(gen0, *gc.get_threshold()[1:])


def app_from_env() -> HotRoute:
    """The uvicorn factory: `uvicorn --factory api.app:app_from_env`."""
    remember_secrets(os.environ)  # scrubbed from this worker's log lines (engine/config/logs.py)
    return create_app(ApiSettings.from_env(os.environ), WebhookDbSettings.from_env(os.environ))
