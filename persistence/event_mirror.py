"""The event's fixed data copied into the ledger once, by the writer's first pass over it: its
config, its seat map with sections (a stock event: its SKUs and prices), each a row of the
ledger's own tables (persistence/queries.sql), so the ledger reads a decision without Redis."""

from typing import Any

import asyncpg
import redis.asyncio as aioredis

from engine.model import keys
from engine.store.prices import PRICES_KEY
from persistence.ledger_rows import config_row
from persistence.queries import Q
from persistence.stock_ledger import sku_rows


async def mirror_event(
    redis: "aioredis.Redis", pool: asyncpg.Pool, prefix: str, event_id: str
) -> bool:
    """Copy the event's config and seat map with each seat's own price (a stock event: its SKUs
    and prices) into the ledger once it is out of DRAFT (all fixed from then on: open, or
    already closed or cancelled by an operator before this writer saw it open); False while a
    draft."""
    ev = await redis.hgetall(keys.event_key(event_id, "event", prefix))
    if not ev or ev.get("status", "draft") == "draft":
        return False
    async with pool.acquire() as conn:
        if await conn.fetchval(Q["event_mirrored"], event_id):
            # A row from before the ledger named owners: this deployment's Redis holds the
            # event, so it is this deployment's (ADR 0037).
            await conn.execute(Q["claim_event_owner"], event_id, prefix)
            return True
        seats: Any = await redis.zrange(
            keys.event_key(event_id, "seats", prefix), 0, -1, withscores=True
        )
        sections = await redis.hgetall(keys.event_key(event_id, "sections", prefix))
        prices = await redis.hgetall(keys.event_key(event_id, PRICES_KEY, prefix))
        skus = []
        if ev.get("kind") == "stock":
            skus = await sku_rows(redis, prefix, event_id)
        async with conn.transaction():
            await conn.execute(Q["insert_event"], event_id)
            await conn.executemany(
                Q["insert_seat"],
                [
                    (
                        event_id,
                        str(seat),
                        float(rank),
                        sections.get(str(seat), ""),
                        int(prices[str(seat)]) if str(seat) in prices else None,
                    )
                    for seat, rank in seats
                ],
            )
            await conn.executemany(Q["insert_event_sku"], skus)
            row = config_row(event_id, ev, len(seats))
            await conn.execute(Q["insert_event_config"], *row, prefix)  # its owner: ADR 0037
    return True
