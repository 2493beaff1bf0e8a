"""The terms an event is sold under, declared once (ADR 0052): how long a hold lives, how long a
quarantine may last, the late-capture and reversal policies, the currency, the cap of units per
login and the largest party. The admin parser builds one, both `create_event`s take one (seats
and stock), the event read answers one, listings and the seat map read their fields by its
names, the ledger's `event_configs` row and a rebuild go through it. What an event sells (its
kind, locations, seats, prices) and how it is described (engine/model/event_details.py) are not
terms: they have their own types."""

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from engine.model.states import LatePolicy, ReversalPolicy

HOLD_TTL_MS = 480_000  # 8 minutes to pay (the brief's hold)
QUARANTINE_MS = 900_000  # 15 minutes for a late capture to be decided


@dataclass(frozen=True, slots=True)
class EventConfig:
    hold_ttl_ms: int = HOLD_TTL_MS
    quarantine_ms: int = QUARANTINE_MS  # a QUARANTINED hold's hard timeout
    policy: LatePolicy = LatePolicy.QUARANTINE  # a capture after the hold's deadline
    currency: str = "EUR"  # ISO 4217
    reversal_policy: ReversalPolicy = ReversalPolicy.MANUAL  # money taken back after the sale
    login_cap: int | None = None  # units a login may hold and buy (None: the deployment's, 0: none)
    max_party: int = 0  # seats one claim may ask for (0: the API's limit; stock events: 0)

    def script_args(self, kind: str, locations: str = "") -> list[Any]:
        """lua/event_create.lua's ARGV after the event id (its header says each one)."""
        cap = "" if self.login_cap is None else self.login_cap
        return [
            self.hold_ttl_ms, self.quarantine_ms, str(self.policy), self.currency,
            str(self.reversal_policy), kind, locations, self.max_party, cap,
        ]  # fmt: skip

    @classmethod
    def of(cls, stored: Mapping[str, Any]) -> "EventConfig":
        """From where the terms are kept: an event hash (strings, as the script wrote them,
        absent fields their defaults) or a ledger `event_configs` row (typed, NULL cap)."""
        cap = stored.get("login_cap")
        return cls(
            hold_ttl_ms=int(stored["hold_ttl_ms"]),
            quarantine_ms=int(stored["quarantine_ms"]),
            policy=LatePolicy(stored["policy"]),
            currency=stored.get("currency") or "EUR",
            reversal_policy=ReversalPolicy(stored.get("reversal_policy") or "manual"),
            login_cap=None if cap is None or cap == "" else int(cap),
            max_party=int(stored.get("max_party") or 0),
        )


FIELDS = tuple(f.name for f in fields(EventConfig))
# The terms stored as integers in the event hash (strings there; listings answer numbers).
INTEGER_FIELDS = tuple(f.name for f in fields(EventConfig) if f.type in (int, int | None))
