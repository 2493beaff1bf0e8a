"""Health, readiness, metrics, and the OpenAPI document."""

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import Request
from starlette.responses import Response

from api.context import ctx, endpoint
from api.openapi import OPENAPI
from api.responses import json_response


@endpoint("healthz")
async def healthz(request: Request) -> Response:
    return json_response({"ok": True})


@endpoint("readyz")
async def readyz(request: Request) -> Response:
    """Ready when Redis answers and every script is loaded."""
    return json_response({"ok": True, "scripts": await ctx(request).store.ready()})


@endpoint("metrics")
async def metrics(request: Request) -> Response:
    """Ops only: the metrics token (ONSALE_METRICS_TOKEN, for the scraper) or an admin
    credential. Event ids and sales figures are not for the public."""
    c = ctx(request)
    c.require_ops(request)
    now_ms = await c.store.read.server_time_ms()
    for event_id in await c.store.read.event_ids():
        progress = await c.store.read.ledger_progress(event_id)
        age_s = (now_ms - progress.oldest_ms) / 1000 if progress.oldest_ms else 0.0
        c.metrics.ledger_behind.labels(event_id).set(progress.behind)
        c.metrics.ledger_oldest.labels(event_id).set(max(0.0, age_s))
    body = generate_latest(c.metrics.registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


@endpoint("openapi")
async def openapi(request: Request) -> Response:
    """Integrators get the document from the operator (or the repository); the running server
    shows it only to ops credentials, so it does not advertise admin routes to everyone."""
    ctx(request).require_ops(request)
    return json_response(OPENAPI)
