"""The ledger writer's side of merchant webhooks (ADR 0024): the deliveries of a batch's
notifications, written in the batch's own transaction, so a notification exists exactly when
its decision is in the ledger (a refused row's savepoint takes its deliveries with it)."""

from typing import Any

import asyncpg

from engine.model.records import OutboxRecord
from engine.model.webhooks import Notification, notification_of
from persistence.queries import Q


def delivery_row(n: Notification, currency: str) -> tuple[Any, ...]:
    """insert_webhook_deliveries' parameters for one notification."""
    return (
        n.event_id,
        n.decision_id,
        n.message_id,
        n.event_type,
        n.body(currency),
        n.needs_winner,
    )


async def fan_out(conn: asyncpg.Connection, event_id: str, records: list[OutboxRecord]) -> int:
    """One delivery per subscribed endpoint for each record that notifies (idempotent per
    endpoint and decision); returns the notifications considered. One read when a record
    notifies, none otherwise."""
    notes = [n for r in records if (n := notification_of(r)) is not None]
    if not notes:
        return 0
    context = await conn.fetchrow(Q["webhook_fan_out_context"], event_id)
    if not context["any_endpoint"]:
        return 0
    currency = context["currency"] or ""
    rows = [delivery_row(n, currency) for n in notes]
    await conn.executemany(Q["insert_webhook_deliveries"], rows)
    return len(notes)
