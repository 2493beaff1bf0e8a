"""Health, readiness, metrics, and the OpenAPI document."""

from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.core import GaugeMetricFamily, Metric
from starlette.requests import Request
from starlette.responses import Response

from api.context import ctx, endpoint
from api.contract import service as answers
from api.openapi import OPENAPI
from api.responses import json_response
from engine.store import Store


@endpoint("healthz")
async def healthz(request: Request) -> Response:
    answer: answers.Health = {"ok": True}
    return json_response(answer)


@endpoint("readyz")
async def readyz(request: Request) -> Response:
    """Ready when Redis answers and every script is loaded."""
    answer: answers.Readiness = {"ok": True, "scripts": await ctx(request).store.ready()}
    return json_response(answer)


@endpoint("metrics")
async def metrics(request: Request) -> Response:
    """Ops only: the metrics token (ONSALE_METRICS_TOKEN, for the scraper) or an admin
    credential. Event ids and sales figures are not for the public. Every worker process's
    series are in the answer, whichever worker gives it (api/metrics.py)."""
    c = ctx(request)
    c.require_ops(request)
    body = c.metrics.exposition(await ledger_families(c.store))
    return Response(body, media_type=CONTENT_TYPE_LATEST)


async def ledger_families(store: Store) -> list[Metric]:
    """How far the ledger is behind each event, read from Redis at each scrape and not reported
    by the writer: a dead writer shows."""
    behind = GaugeMetricFamily(
        "onsale_ledger_behind_entries", "Outbox entries not yet in the ledger", labels=["event"]
    )
    oldest = GaugeMetricFamily(
        "onsale_ledger_oldest_unmirrored_seconds",
        "Age of the oldest decision not yet in the ledger",
        labels=["event"],
    )
    now_ms = await store.read.server_time_ms()
    for event_id in await store.read.event_ids():
        progress = await store.read.ledger_progress(event_id)
        age_s = (now_ms - progress.oldest_ms) / 1000 if progress.oldest_ms else 0.0
        behind.add_metric([event_id], progress.behind)
        oldest.add_metric([event_id], max(0.0, age_s))
    return [behind, oldest]


@endpoint("openapi")
async def openapi(request: Request) -> Response:
    """Integrators get the document from the operator (or the repository); the running server
    shows it only to ops credentials, so it does not advertise admin routes to everyone."""
    ctx(request).require_ops(request)
    return json_response(OPENAPI)
