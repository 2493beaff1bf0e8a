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
    body = generate_latest(ctx(request).metrics.registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)


@endpoint("openapi")
async def openapi(request: Request) -> Response:
    return json_response(OPENAPI)
