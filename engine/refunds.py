"""The refund queue: every charge that must be refunded is refunded, idempotent by charge.

Scripts put a charge in the event's refund set when it goes REFUNDING (or is re-requested after
REFUNDED). This worker asks the provider to refund each due charge (refund key derived from the
charge id, so a retry is the same refund) and records the answer with `charge_refund`: REFUNDED
on success, or a retry with capped, jittered exponential backoff. The provider's
`refund.succeeded` callback records the same fact; whichever comes first wins, the other is a
no-op."""

import logging
import random
from dataclasses import dataclass

from engine.errors import ChargeNotFound
from engine.provider import ProviderClient, ProviderRefused, ProviderTimeout
from engine.store import Store

log = logging.getLogger("onsale.refunds")

RETRY_BASE_MS = 500
RETRY_MAX_MS = 300_000


def retry_delay_ms(attempts: int, rng: random.Random) -> int:
    return int(min(RETRY_MAX_MS, RETRY_BASE_MS * 2**attempts) * rng.uniform(0.5, 1.0))


@dataclass
class RefundStats:
    refunded: int = 0
    retried: int = 0
    refused: int = 0


class RefundWorker:
    def __init__(
        self,
        store: Store,
        provider: ProviderClient,
        *,
        batch_max: int = 100,
        seed: int | None = None,
    ) -> None:
        self.store, self.provider, self.batch_max = store, provider, batch_max
        self.rng = random.Random(seed)
        self.stats = RefundStats()

    async def run_once(self) -> int:
        """Process the refunds due now in every event; returns how many were handled."""
        handled = 0
        now = await self.store.server_time_ms()
        for event_id in await self.store.event_ids():
            for charge_id in await self.store.due_refunds(event_id, now, self.batch_max):
                await self._refund(event_id, charge_id)
                handled += 1
        return handled

    async def _refund(self, event_id: str, charge_id: str) -> None:
        try:
            charge = await self.store.charge(event_id, charge_id)
        except ChargeNotFound:
            log.error("refund queued for unknown charge %s/%s", event_id, charge_id)
            return
        try:
            await self.provider.refund(charge.charge_id, charge.attempt_id)
        except (ProviderTimeout, ProviderRefused) as exc:
            # A refused refund (e.g. the provider says it never captured) is retried slowly
            # and stays visible in the ops view; it is never dropped.
            if isinstance(exc, ProviderRefused):
                self.stats.refused += 1
                log.warning("refund of %s refused: %s", charge_id, exc)
            delay = retry_delay_ms(charge.refund_attempts, self.rng)
            await self.store.refund_result(
                event_id, charge_id, refunded=False, retry_delay_ms=delay
            )
            self.stats.retried += 1
            return
        code = await self.store.refund_result(event_id, charge_id, refunded=True)
        if code == "REFUNDED":
            self.stats.refunded += 1
