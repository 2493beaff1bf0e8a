"""Provider reconciliation: charges the provider never told us about are asked about.

A charge CHARGING for longer than `stale_ms` (lost callback, crash between our start and the
provider call, a provider call that timed out) is looked up by its idempotency key. Whatever the
provider knows is applied through the same script as a callback (`charge_outcome`), with a
provider event id derived from the attempt and status, so a later real callback for the same
attempt is a no-op; the provider's record is verified against the charge like any callback. A charge
the provider has never seen is closed as FAILED (no money moved);
if the provider later reports a capture for that key, it arrives as a new attempt and the
late-payment rules apply."""

import asyncio
import logging
from dataclasses import dataclass

from engine.model import keys
from engine.model.holds import Charge, ProviderOutcome
from engine.model.states import ChargeState
from engine.providers import OUTCOME_OF_STATUS, Provider, ProviderCharge, ProviderTimeout
from engine.store import Store
from engine.workers.looks import Looks

log = logging.getLogger("onsale.reconcile")


@dataclass
class ReconcileStats:
    examined: int = 0
    resolved: int = 0
    never_reached_provider: int = 0
    still_processing: int = 0
    provider_unavailable: int = 0
    rechecked: int = 0  # declined or failed charges asked about again
    contradictions: int = 0  # ... that the provider had captured after all


def provider_record_outcome(provider_event_id: str, found: ProviderCharge) -> ProviderOutcome:
    """The provider's own record of an attempt, as a message for the verifying script: what
    the provider says is checked exactly like a callback (key, event, hold, amount, currency)."""
    metadata = found.metadata or {}
    return ProviderOutcome(
        provider_event_id,
        found.idempotency_key,
        found.attempt_id,
        found.intent_id,
        OUTCOME_OF_STATUS[found.status],
        status=found.status,
        amount=found.amount,
        currency=found.currency,
        meta_event=metadata.get("event_id", "") or "-",
        meta_hold=metadata.get("hold_id", ""),
        meta_charge=metadata.get("charge_id", ""),
    )


class ProviderReconciler:
    PAGE = 500  # charges read from the watch index per round trip

    def __init__(
        self,
        store: Store,
        provider: Provider,
        *,
        stale_ms: int,
        watch_ms: int = 0,
        stop: asyncio.Event | None = None,
    ) -> None:
        assert stale_ms > 0 and watch_ms >= 0
        self.stop = stop  # set on SIGTERM: the pass ends after the charge in hand
        self.store, self.provider, self.stale_ms = store, provider, stale_ms
        # A declined or failed charge this recent is asked about again: a capture that
        # contradicts the decline, whose webhook was lost, is then given back within one pass
        # (older ones are left to the nightly reconciliation).
        self.watch_ms = watch_ms
        self.stats = ReconcileStats()
        self.looks = Looks(store, keys.WATCHES)

    async def run_once(self) -> None:
        now = await self.store.read.server_time_ms()
        # Only the events with a charge old enough to ask about, from the watch index
        # (engine/workers/looks.py), not a page read per event.
        look = await self.looks.events(now - self.stale_ms)
        asked = look.events
        if not look.checked:  # the index's (a score may be early) or, with test clocks, all
            asked = await self.store.read.with_entries_upto(asked, "watch", now - self.stale_ms)
        for event_id in asked:
            if self._stopping():
                return
            await self._run_event(event_id, now)
            await self.store.reindex(event_id)  # charges settled or aged out: the score moves
        if look.indexed:  # indexed with nothing to ask: its score was left early
            for event_id in set(look.events) - set(asked):
                await self.store.reindex(event_id)

    def _stopping(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    async def _run_event(self, event_id: str, now: int) -> None:
        """The event's watch index, oldest first, in pages: charges CHARGING for at least
        `stale_ms`, and declines between `stale_ms` and `watch_ms` old (older ones leave the
        index; the nightly reconciliation covers them). A charge settled here leaves the range
        (its index entry goes, or moves to the decision's time), so the next page starts after
        the entries that stayed."""
        currency, offset = "", 0
        while True:
            covered, page = await self.store.read.watched(
                event_id, now - self.stale_ms, offset, self.PAGE
            )
            aged_out, settled = [], 0
            for charge in page:
                if self._stopping():
                    return
                if charge.state == ChargeState.CHARGING:
                    currency = (
                        currency or (await self.store.read.availability(event_id)).config.currency
                    )
                    settled += await self._settle_stale(event_id, charge, currency)
                elif self._watched(charge, now):
                    settled += await self._recheck_decline(event_id, charge)
                elif charge.state in (ChargeState.DECLINED, ChargeState.FAILED):
                    aged_out.append(charge.charge_id)
            await self.store.notes.unwatch(event_id, aged_out)
            offset += covered - len(aged_out) - settled
            if covered < self.PAGE:
                return

    def _watched(self, charge: Charge, now: int) -> bool:
        age = now - charge.decided_ms
        declined = charge.state in (ChargeState.DECLINED, ChargeState.FAILED)
        return declined and self.stale_ms <= age < self.watch_ms

    async def _provider_record(self, charge: Charge) -> tuple[bool, ProviderCharge | None]:
        """(whether the provider answered, its record of the attempt: None when it has none)."""
        try:
            return True, await self.provider.find_charge(charge.key)
        except ProviderTimeout:
            self.stats.provider_unavailable += 1
            return False, None

    async def _settle_stale(self, event_id: str, charge: Charge, currency: str) -> bool:
        """Whether the charge was settled (it then leaves the watched range)."""
        self.stats.examined += 1
        answered, found = await self._provider_record(charge)
        if not answered:
            return False
        if found is None:
            outcome = ProviderOutcome(
                f"recon:{charge.charge_id}:absent",
                charge.key,
                f"none:{charge.charge_id}",
                "",
                "FAILED",
                amount=charge.amount,
                currency=currency,
                meta_hold=charge.hold_id,
            )
            self.stats.never_reached_provider += 1
        elif found.status in OUTCOME_OF_STATUS:
            outcome = provider_record_outcome(f"recon:{found.attempt_id}:{found.status}", found)
        else:
            self.stats.still_processing += 1
            return False
        result = await self.store.apply_outcome(event_id, outcome)
        self.stats.resolved += 1
        log.info("reconciled %s/%s: %s", event_id, charge.charge_id, result.decision)
        return True

    async def _recheck_decline(self, event_id: str, charge: Charge) -> bool:
        """Whether a capture contradicting the decline was applied (the charge then leaves
        the index for the refund path)."""
        self.stats.rechecked += 1
        answered, found = await self._provider_record(charge)
        if not answered or found is None or found.status != "captured":
            return False
        outcome = provider_record_outcome(f"recon:{found.attempt_id}:captured", found)
        result = await self.store.apply_outcome(event_id, outcome)
        if result.first_seen:
            self.stats.contradictions += 1
            log.warning("capture after decline %s/%s: %s", event_id, charge.key, result.decision)
        return True
