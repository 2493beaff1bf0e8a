"""The component schemas of every request and answer declared as a type in api/contract/,
derived once for the OpenAPI document (api/openapi.py, ADR 0054)."""

from api.contract import (
    admin,
    catalogue,
    event_setup,
    holds,
    listings,
    mine,
    presales,
    refunds,
    seatmap,
    service,
    waiting,
    webhooks,
)
from api.contract.atoms import STATE_SCHEMAS
from api.contract.derive import components

FAMILIES = (holds, catalogue, service, admin, listings, webhooks, waiting, presales, refunds, mine,
            event_setup, seatmap)  # fmt: skip
SCHEMAS = components(
    {tp: example for family in FAMILIES for tp, example in family.EXAMPLES.items()},
    # requests whose unknown fields the handler refuses, and the answers that never grow
    closed=[tp for family in FAMILIES for tp in getattr(family, "CLOSED", ())],
    # named once, by the document itself: the states from their tables, the kinds of events
    # and of notifications from their lists
    named=(*STATE_SCHEMAS, "EventKind", "WebhookEventType"),
)
