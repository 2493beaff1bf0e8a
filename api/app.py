"""create_app(settings): the checkout API, provider callbacks, admin and ops endpoints."""

import contextlib
import logging
import os
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from api.context import Context, Metrics, StoreCollector, Tokens
from api.errors import error_response
from api.hotpath import HotRoute
from api.routes import admin, callbacks, checkout, meta
from api.settings import ApiSettings
from engine.provider import ProviderClient
from engine.soldout import SoldOutMemory
from engine.store import Store

log = logging.getLogger("onsale.api")

CLAIM_PATH = "/v1/events/{event_id}/holds"

# Starlette tries routes in order: the T0 hot path comes first.
ROUTES = [
    Route(CLAIM_PATH, checkout.claim, methods=["POST"]),
    Route("/healthz", meta.healthz, methods=["GET"]),
    Route("/readyz", meta.readyz, methods=["GET"]),
    Route("/metrics", meta.metrics, methods=["GET"]),
    Route("/openapi.json", meta.openapi, methods=["GET"]),
    Route("/v1/login", checkout.login, methods=["POST"]),
    Route("/v1/events/{event_id}", checkout.availability, methods=["GET"]),
    Route("/v1/events/{event_id}/seats", checkout.free_seats, methods=["GET"]),
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
    Route(
        "/v1/admin/events/{event_id}/holds/{hold_id}/revoke", admin.revoke_hold, methods=["POST"]
    ),
    Route("/v1/admin/events/{event_id}/exceptions", admin.exceptions, methods=["GET"]),
]


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_request")
    return error_response(request, code, str(exc.detail), exc.status_code)


def create_app(settings: ApiSettings) -> HotRoute:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        client = settings.engine.redis_client()
        store = Store(
            client,
            prefix=settings.engine.key_prefix,
            timeout_s=settings.engine.redis_timeout_ms / 1000,
            autopipeline=settings.engine.redis_autopipeline,
        )
        if not await store.boot():
            log.warning("Redis unreachable at boot; answering 503 until it is back")
        if settings.engine.sold_out_memory:
            store.sold_out = SoldOutMemory(
                client,
                settings.engine.key_prefix,
                ttl_s=settings.engine.sold_out_memory_ms / 1000,
            )
            await store.sold_out.start()
        provider = ProviderClient(settings.provider_url, timeout_ms=settings.provider_timeout_ms)
        app.state.ctx = Context(
            settings=settings,
            store=store,
            provider=provider,
            tokens=Tokens(settings.token_secret, settings.token_ttl_s),
            metrics=Metrics(),
        )
        app.state.ctx.metrics.registry.register(StoreCollector(store))
        yield
        if store.sold_out is not None:
            await store.sold_out.stop()
        await provider.aclose()
        await client.aclose()

    app = Starlette(
        routes=ROUTES, lifespan=lifespan, exception_handlers={HTTPException: _http_error}
    )
    # The T0 route skips Starlette's middleware and router (api/hotpath.py, ADR 0013); it stays
    # in ROUTES too, for the OpenAPI check and for anyone mounting the plain app.
    return HotRoute(app, "POST", CLAIM_PATH, checkout.claim)


def app_from_env() -> HotRoute:
    """The uvicorn factory: `uvicorn --factory api.app:app_from_env`."""
    return create_app(ApiSettings.from_env(os.environ))
