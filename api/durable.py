"""Nothing that must survive is told before it is durable (ADR 0016).

A sale (a hold CONFIRMED by a capture) is decided in Redis, then mirrored into the ledger by
the write-behind worker. Redis may lose the last moments before a crash or a failover, the
ledger does not; so the buyer reads CONFIRMING, and the provider's callback is not
acknowledged, until the ledger holds the sale's last outbox record. With
ONSALE_CONFIRM_AFTER=redis (a deployment without a ledger), the decision is told at once."""

import asyncio
import time

from engine.model import errors
from engine.model.holds import Hold
from engine.model.states import HoldState
from engine.store import Store

CONFIRMING = "CONFIRMING"  # a view state: decided CONFIRMED, not yet in the ledger
POLL_S = 0.01


async def sale_durable(store: Store, event_id: str, hold: Hold) -> bool:
    """Whether the ledger holds the hold's sale (True for anything that is not a fresh sale).
    A sale the ledger refused is never durable; on a fenced event (its Redis went back in
    time) nothing this Redis says is, and the answer is "recovering" (ADR 0017)."""
    if hold.state != HoldState.CONFIRMED or not hold.record:
        return True
    status = await store.read.sale_status(event_id, hold.hold_id, hold.record)
    if status == "fenced":
        raise errors.Recovering(f"event {event_id} is being recovered; retry later")
    return status == "told"


async def wait_durable(store: Store, event_id: str, hold_id: str, wait_ms: int) -> bool:
    """Wait (polling Redis, bounded) until the hold's sale is in the ledger."""
    deadline = time.monotonic() + wait_ms / 1000
    hold = await store.read.hold(event_id, hold_id)
    while not await sale_durable(store, event_id, hold):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(POLL_S)
    return True
