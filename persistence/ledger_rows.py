"""The ledger's rows, built from what Redis holds: one per table and parameter order of its
query in persistence/queries.sql (`decisions`, `holds`, `charges`, `refunds`,
`stock_corrections` from outbox records; `event_configs` from an event hash)."""

from dataclasses import astuple, dataclass, field
from typing import Any

from engine.model import keys
from engine.model.event_config import EventConfig
from engine.model.event_details import EventDetails
from engine.model.ledger_progress import stream_id
from engine.model.records import Marker, OutboxRecord, RecordKind
from engine.waiting.restore import Move, RoomSetup

# Money that went back to the buyer, by who started it.
REFUND_STATES = {"REFUNDED": "merchant", "PROVIDER_REFUNDED": "provider"}


# The columns of a `decisions` row from to_row, and of a `holds` row from Rows.add, in order.
DECISION_COLUMNS = (
    "event_id", "decision_id", "stream_ms", "stream_seq", "kind", "entity_id", "from_state",
    "to_state", "terminal", "hold_id", "charge_id", "seat_id", "login", "winner", "amount",
    "attempt_id", "intent_id", "policy", "reason", "decided_at_ms", "captured", "seq",
    "policy_version", "shadow_policy", "shadow_version", "shadow_outcome",
)  # fmt: skip
HOLD_COLUMNS = (
    "event_id", "hold_id", "seat_id", "login", "state", "winner", "policy", "decided_at_ms",
    "stream_ms", "stream_seq",
)  # fmt: skip


def to_row(event_id: str, entry_id: str, r: OutboxRecord) -> tuple[Any, ...]:
    """The `decisions` row of one outbox record (insert_decision's parameter order)."""
    # Pair the assertion made when the script XADDed the record with one at the ledger.
    assert r.event_id == event_id, f"record of {r.event_id} in the outbox of {event_id}"
    ms, seq = stream_id(entry_id)
    return (
        event_id,
        r.decision_id,
        ms,
        seq,
        str(r.kind),
        r.entity_id,
        r.from_state,
        r.to_state,
        r.terminal,
        r.hold_id,
        r.charge_id,
        r.seat_id,
        r.login,
        r.winner,
        r.amount,
        r.attempt_id,
        r.intent_id,
        r.policy,
        r.reason,
        r.decided_ms,
        r.captured,
        r.seq,
        r.policy_version,
        r.shadow_policy,
        r.shadow_version,
        r.shadow_outcome,
    )


def config_row(event_id: str, ev: dict[Any, Any], seats_total: int) -> tuple[Any, ...]:
    """The `event_configs` row of an event hash (insert_event_config's parameter order)."""
    terms = EventConfig.of(ev)
    return (
        event_id,
        terms.hold_ttl_ms,
        terms.quarantine_ms,
        str(terms.policy),
        int(ev.get("price_minor", 0)),
        int(ev["opens_at_ms"]),
        seats_total,
        terms.currency,
        str(terms.reversal_policy),
        ev.get("kind") or "seats",
        ev.get("locations", ""),
        terms.login_cap,
        terms.max_party,
        *astuple(EventDetails.of(ev)),  # ADR 0041: DETAIL_FIELDS' order
    )


@dataclass
class Rows:
    """What one batch of records writes besides `decisions`, table by table."""

    holds: list[tuple[Any, ...]] = field(default_factory=list)
    charges: list[tuple[Any, ...]] = field(default_factory=list)
    refunds: list[tuple[Any, ...]] = field(default_factory=list)
    corrections: list[tuple[Any, ...]] = field(default_factory=list)
    rooms: list[tuple[Any, ...]] = field(default_factory=list)  # a waiting room's settings
    waiting: list[tuple[Any, ...]] = field(default_factory=list)  # its line's changes
    codes: list[tuple[Any, ...]] = field(default_factory=list)  # a presale's codes (ADR 0049)
    code_uses: list[tuple[Any, ...]] = field(default_factory=list)  # holds that spent one

    def add(self, sid: str, r: OutboxRecord) -> None:
        ms, seq = stream_id(sid)
        common = (r.policy, r.decided_ms, ms, seq)
        if r.moves_hold:
            self.holds.append(
                (r.event_id, r.entity_id, r.seat_id, r.login, r.to_state, r.winner, *common)
            )
            if r.code:
                uses = (r.event_id, r.entity_id, r.code, r.login, r.to_state, r.decided_ms)
                self.code_uses.append(uses)
        elif r.moves_charge:
            self.charges.append(
                (
                    r.event_id, r.entity_id, r.hold_id, r.seat_id, r.to_state, r.amount,
                    r.attempt_id, r.intent_id, *common, r.captured,
                    keys.part_parent(r.entity_id) or "",  # a part of an order: its charge
                )
            )  # fmt: skip
            if r.to_state in REFUND_STATES:
                self.refunds.append(
                    (
                        r.event_id, r.entity_id, r.returned, r.decided_ms,
                        REFUND_STATES[r.to_state],
                    )
                )  # fmt: skip
        elif r.kind == RecordKind.CORRECTION:
            self.corrections.append(correction_row(r.event_id, sid, r))
        elif r.kind == RecordKind.QUEUE:
            self.add_waiting(r)
        elif r.kind == RecordKind.PRESALE:
            self.codes += code_rows(r)

    def add_waiting(self, r: OutboxRecord) -> None:
        """A waiting room's change (ADR 0029): its settings, or a change of its line."""
        if r.to_state == Marker.ROOM_SET:
            self.rooms.append((r.event_id, *astuple(RoomSetup.of_record(r)), r.seq))
        else:
            self.waiting.append((r.event_id, r.decision_id, r.seq, *astuple(Move.of_record(r))))


def correction_row(event_id: str, entry_id: str, r: OutboxRecord) -> tuple[Any, ...]:
    """The `stock_corrections` row of a correction record (ADR 0022): `seat` is
    '<sku>@<location>', from/to the on hand before/after, `login` the operator."""
    assert r.kind == RecordKind.CORRECTION, r
    ms, seq = stream_id(entry_id)
    sku, _, location = r.seat_id.partition("@")
    return (
        event_id, r.entity_id, sku, location, r.mode, r.value, int(r.from_state),
        int(r.to_state), r.reason, r.login, r.decided_ms, ms, seq, r.seq,
    )  # fmt: skip


def code_rows(r: OutboxRecord) -> list[tuple[Any, ...]]:
    """The `presale_codes` rows of a batch's record (ADR 0049): each new code with its window
    and terms ('opens_at_ms|closes_at_ms|uses|per_login|expires_ms')."""
    opens, closes, uses, per_login, expires = (int(x) for x in r.presale.split("|"))
    return [
        (r.event_id, code, r.entity_id, opens, closes, uses, per_login, expires, r.decision_id)
        for code in r.codes.split(",")
    ]
