"""The refund queue: every charge that must be refunded is refunded, idempotent by charge.

Scripts put a charge in the event's refund set when it goes REFUNDING (or is re-requested after
REFUNDED). `RefundSender` asks the provider to refund one charge (refund key derived from the
charge id, so a retry is the same refund) and records the answer with `charge_refund`: REFUNDED
on success, or a retry with capped, jittered exponential backoff. The API process that decided a
refund sends it at once (ADR 0045); `RefundWorker` sends every refund still due, the backstop
for an API that died first and the only sender of the retries. Two senders of one refund ask
the provider for the same refund (its key) and record the same fact; the provider's
`refund.succeeded` callback records it too; whichever comes first wins, the others are no-ops."""

import asyncio
import logging
import random
from dataclasses import dataclass

from engine.model import keys
from engine.model.errors import ChargeNotFound
from engine.model.holds import Charge
from engine.providers import Provider, ProviderRefused, ProviderTimeout
from engine.store import Store
from engine.workers.looks import Looks

log = logging.getLogger("onsale.refunds")

RETRY_BASE_MS = 500
RETRY_MAX_MS = 300_000


def retry_delay_ms(attempts: int, rng: random.Random) -> int:
    return int(min(RETRY_MAX_MS, RETRY_BASE_MS * 2**attempts) * rng.uniform(0.5, 1.0))


def refund_amount(charge: Charge) -> int | None:
    """What to ask the provider for: a part of an order (ADR 0043) exactly its amount (once per
    part); the rest of an order that gave back parts exactly that rest (its parts still on
    their way are theirs to send); any other refund what the attempt still holds (None)."""
    if charge.part_of:
        return charge.amount
    return charge.holds_money if charge.parted else None


@dataclass
class RefundStats:
    refunded: int = 0
    retried: int = 0
    refused: int = 0
    parked: int = 0


class RefundSender:
    """One charge's refund asked of the provider and its answer recorded; shared by the worker's
    pass and the API process that decided the refund."""

    def __init__(self, store: Store, provider: Provider, *, seed: int | None = None) -> None:
        self.store, self.provider = store, provider
        self.rng = random.Random(seed)
        self.stats = RefundStats()

    async def send(self, event_id: str, charge_id: str) -> None:
        try:
            charge = await self.store.read.charge(event_id, charge_id)
        except ChargeNotFound:
            log.error("refund queued for unknown charge %s/%s", event_id, charge_id)
            return
        try:
            if charge.attempt_id and not await self._provider_agrees(event_id, charge):
                return
            part = charge.charge_id if charge.part_of else ""
            await self.provider.refund(
                charge.key, charge.attempt_id, amount=refund_amount(charge), part=part
            )
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

    async def _provider_agrees(self, event_id: str, charge: Charge) -> bool:
        """Money is returned only when the provider's own record of the attempt says it is this
        charge's (same key, same event): a message that named the wrong charge can never make
        us refund money that wins a hold elsewhere. A disagreement parks the refund for ops."""
        record = await self.provider.get_attempt(charge.attempt_id)
        if record is None:
            raise ProviderRefused(f"the provider has no attempt {charge.attempt_id}")
        metadata = record.metadata or {}
        owner = keys.event_of_charge_key(record.idempotency_key) or metadata.get("event_id", "")
        if record.idempotency_key == charge.key and owner == event_id:
            return True
        why = f"provider_binds_attempt_to:{record.idempotency_key}@{owner}"
        await self.store.park_refund(event_id, charge.charge_id, why)
        self.stats.parked += 1
        log.error("refund of %s/%s parked: %s", event_id, charge.charge_id, why)
        return False


class RefundWorker:
    def __init__(
        self,
        store: Store,
        provider: Provider,
        *,
        batch_max: int = 100,
        seed: int | None = None,
        stop: asyncio.Event | None = None,
    ) -> None:
        self.store, self.batch_max = store, batch_max
        # Set on SIGTERM: the pass ends after the refund in hand (each waits on the provider,
        # so a pass of 100 could outlast a shutdown's grace); the rest stay due, untouched.
        self.stop = stop
        self.sender = RefundSender(store, provider, seed=seed)
        self.looks = Looks(store, keys.REFUNDS)
        self.stats = self.sender.stats

    async def run_once(self) -> int:
        """Process the refunds due now in every event; returns how many were handled."""
        handled = 0
        now = await self.store.read.server_time_ms()
        look = await self.looks.events(now)  # the refund index (engine/workers/looks.py)
        due = await self.store.read.due_refunds_of(look.events, now, self.batch_max)
        if look.indexed:  # indexed with nothing due: its score was left early
            for event_id in set(look.events) - due.keys():
                await self.store.reindex(event_id)
        for event_id, charge_ids in due.items():
            for charge_id in charge_ids:
                if self.stop is not None and self.stop.is_set():
                    return handled
                await self.sender.send(event_id, charge_id)
                handled += 1
        return handled
