"""Money at the provider by attempt (the unit the provider moves money by), from its own ledger
of movements: what each attempt captured, gave back and holds now, for reconciliation."""

from collections.abc import Sequence
from dataclasses import dataclass

from engine.model import keys
from engine.providers import LEDGER_MONEY_SIGN, MoneyMovement


@dataclass
class ProviderAttempt:
    """What the provider's ledger says one attempt holds for us."""

    attempt_id: str
    key: str
    captured: int = 0
    net: int = 0
    refunded_amount: int = 0  # what its refunds gave back (a part of an order: some of it)
    withdrawn: bool = False

    @property
    def refunded(self) -> bool:
        """Refunded in full: every part given back (one refund of a part is not the order's)."""
        return self.refunded_amount > 0 and self.refunded_amount >= self.captured


def owner_event(entry: MoneyMovement) -> str:
    """The event an attempt's money belongs to: the one our key names, else its metadata's."""
    return keys.event_of_charge_key(str(entry["idempotency_key"])) or str(entry.get("event_id", ""))


def provider_attempts(
    entries: Sequence[MoneyMovement], event_id: str
) -> dict[str, ProviderAttempt]:
    out: dict[str, ProviderAttempt] = {}
    for e in entries:
        if e["kind"] not in LEDGER_MONEY_SIGN or owner_event(e) != event_id:
            continue
        a = out.setdefault(e["attempt_id"], ProviderAttempt(e["attempt_id"], e["idempotency_key"]))
        a.net += LEDGER_MONEY_SIGN[e["kind"]] * int(e["amount"])
        if e["kind"] == "capture":
            a.captured += int(e["amount"])
        if e["kind"] == "refund":
            a.refunded_amount += int(e["amount"])
        a.withdrawn |= e["kind"] == "dispute_withdrawal"
    return out
