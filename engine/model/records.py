"""The outbox record, typed once. `lua/_lib.lua` `emit` writes these fields (a unit test checks
the field list against it); the ledger writer, reconciliation and the tools read them through
`OutboxRecord`, and migration 0001 stores them in `decisions` (0006: the policy version and
the shadow candidate's fields, ADR 0020)."""

from collections.abc import Mapping
from enum import StrEnum
from typing import NamedTuple

from engine.model.states import ChargeState, HoldState


class RecordKind(StrEnum):
    HOLD = "hold"
    CHARGE = "charge"
    ALERT = "alert"
    POLICY = "policy"  # a change of the event's deadline policies (lua/event_policy.lua)
    # A stock correction (lua/stock_correct.lua): `id` the correction id, from/to the on-hand
    # count before/after, `seat` '<sku>@<location>', `login` the operator, `mode`/`value` what
    # was asked (ADR 0022).
    CORRECTION = "correction"
    # An operator ended the sale (lua/event_close.lua, lua/event_cancel.lua): `id` the event,
    # `from` its status before, `to` a Marker, `reason` '<closed|cancelled>_by:<actor>'.
    EVENT = "event"
    # A change of an event's waiting room (lua/queue_*.lua, ADR 0029): `to` a QUEUE_* marker,
    # `id` the login (the event for the room's own moves), `hold` the hold a spend went to.
    QUEUE = "queue"
    # A presale's access codes added (lua/codes_add.lua, ADR 0049): `id` the presale, `to`
    # CODES_ADDED, `codes` the new codes, `presale` their terms.
    PRESALE = "presale"


class Marker(StrEnum):
    """`to` values of records that are not an automaton's state."""

    SEAT_FREED = "SEAT_FREED"  # a released hold's blocked seat is back on sale
    REFUND_ONLY = "REFUND_ONLY"  # a charge marked resolve-by-refund: if it captures, refunded
    REREFUND = "REREFUND"  # a capture after REFUNDED re-requests the idempotent refund
    # A refund or dispute that arrived before the capture it follows (or a dispute's end before
    # its start): kept on the charge, applied when its predecessor lands (ADR 0036).
    MOVE_NOTED = "MOVE_NOTED"
    ALERT = "ALERT"  # a provider message refused or only partly applied (kind alert)
    GRACE = "GRACE"  # deadline passed with a charge in flight: live for the policy's grace
    # Policy changes (kind policy; `id` is the change's version, ADR 0020).
    SHADOW_SET = "SHADOW_SET"  # a candidate runs in shadow (or none, reason shadow_cleared)
    POLICY_PROMOTED = "POLICY_PROMOTED"  # the candidate is enforced for new decisions
    POLICY_ROLLED_BACK = "POLICY_ROLLED_BACK"  # the previous enforced policy is back
    # An operator ended the sale (kind event, ADR 0025).
    EVENT_CLOSED = "EVENT_CLOSED"  # no new claim or charge start; holds run to their deadlines
    EVENT_CANCELLED = "EVENT_CANCELLED"  # closed, and every hold ended, sold money refunded
    # A waiting room's changes (kind queue): what a rebuild needs to put the room back.
    ROOM_SET = "ROOM_SET"  # settings and secret ('per_s|pct|ttl|auto|secret' in `room`)
    PLACE_TAKEN = "PLACE_TAKEN"  # a login joined: its place (`place`), when (`now_ms`)
    ADMITTED = "ADMITTED"  # the places after `place_from` up to `place` admitted (`admissions`)
    ADMISSION_SPENT = "ADMISSION_SPENT"  # a login's admission went to hold `hold`
    CODES_ADDED = "CODES_ADDED"  # a presale's codes (kind presale, ADR 0049)


# The fields `emit` XADDs, in its order.
OUTBOX_FIELDS: tuple[str, ...] = (
    "decision_id",
    "event",
    "kind",
    "id",
    "from",
    "to",
    "terminal",
    "hold",
    "charge",
    "seat",
    "login",
    "winner",
    "amount",
    "attempt",
    "intent",
    "policy",
    "reason",
    "now_ms",
    "captured",
    "seq",
    "policy_version",
    "shadow_policy",
    "shadow_version",
    "shadow_outcome",
)
_KINDS = {k.value: k for k in RecordKind}  # a dict lookup: a fifth of RecordKind()'s cost
HOLD_RECORDED: frozenset[str] = frozenset(s.value for s in HoldState) - {HoldState.RESERVED}
CHARGE_RECORDED: frozenset[str] = frozenset(s.value for s in ChargeState)


class OutboxRecord(NamedTuple):
    """One outbox record, immutable. A named tuple rather than a frozen dataclass: the ledger
    writer makes one per decision it mirrors, and a frozen dataclass's constructor cost 12 of
    the 19 µs a record took to read (benchmarks section 14)."""

    decision_id: str
    event_id: str
    kind: RecordKind
    entity_id: str
    from_state: str
    to_state: str  # a HoldState or ChargeState value, or a Marker
    terminal: bool  # the entity's one terminal decision
    hold_id: str
    charge_id: str
    seat_id: str
    login: str
    winner: str
    amount: int  # minor units asked
    attempt_id: str
    intent_id: str
    policy: str
    reason: str
    decided_ms: int  # the deciding script's server clock
    captured: int  # minor units the provider reported captured
    seq: int = 0  # the event's decision number (1, 2, ...); 0 in records older than it
    # The enforced deadline policy's version: 1 until the event's first policy change, as in
    # records older than versions (no policy could change before them).
    policy_version: int = 1
    # The candidate in shadow when the record was made ("" and 0: none), and, at a deadline
    # decision, the `to` it would have written instead (ADR 0020); it acted on nothing.
    shadow_policy: str = ""
    shadow_version: int = 0
    shadow_outcome: str = ""
    # A correction's own fields (kind correction): 'set' or 'adjust', and its signed value.
    mode: str = ""
    value: int = 0
    # The money a charge's refund record gives back, when not its whole capture: an order that
    # gave back parts first, or that the provider refunded only in part (ADR 0043).
    returned_part: int = 0
    # A waiting room's change (kind queue): a place (an exact integer below 2^53, as text), the
    # place an admission started after, how many it admitted, the room's settings.
    place: str = ""
    place_from: str = ""
    admissions: int = 0
    room: str = ""
    # A presale's codes added (kind presale): the codes, comma-separated, and their terms
    # 'opens_at_ms|closes_at_ms|uses|per_login|expires_ms'; on a hold's terminal record, the
    # access code it spent (ADR 0049).
    codes: str = ""
    presale: str = ""
    code: str = ""

    @classmethod
    def from_fields(cls, f: Mapping[str, str]) -> "OutboxRecord":
        assert f["terminal"] in ("0", "1"), f
        return cls(
            decision_id=f["decision_id"],
            event_id=f["event"],
            kind=_KINDS.get(f["kind"]) or RecordKind(f["kind"]),  # unknown: ValueError
            entity_id=f["id"],
            from_state=f["from"],
            to_state=f["to"],
            terminal=f["terminal"] == "1",
            hold_id=f["hold"],
            charge_id=f["charge"],
            seat_id=f["seat"],
            login=f["login"],
            winner=f["winner"],
            amount=int(f["amount"]),
            attempt_id=f["attempt"],
            intent_id=f["intent"],
            policy=f["policy"],
            reason=f["reason"],
            decided_ms=int(f["now_ms"]),
            captured=int(f.get("captured") or 0),
            seq=int(f.get("seq") or 0),
            policy_version=int(f.get("policy_version") or 1),
            shadow_policy=f.get("shadow_policy", ""),
            shadow_version=int(f.get("shadow_version") or 0),
            shadow_outcome=f.get("shadow_outcome", ""),
            mode=f.get("mode", ""),
            value=int(f.get("value") or 0),
            returned_part=int(f.get("returned") or 0),
            place=f.get("place", ""),
            place_from=f.get("place_from", ""),
            admissions=int(f.get("count") or 0),
            room=f.get("room", ""),
            codes=f.get("codes", ""),
            presale=f.get("presale", ""),
            code=f.get("code", ""),
        )

    @property
    def returned(self) -> int:
        """The money a refund record of this charge gives back."""
        return self.returned_part or self.captured or self.amount

    @property
    def moves_hold(self) -> bool:
        return self.kind == RecordKind.HOLD and self.to_state in HOLD_RECORDED

    @property
    def moves_charge(self) -> bool:
        return self.kind == RecordKind.CHARGE and self.to_state in CHARGE_RECORDED

    @property
    def shadow_agrees(self) -> bool | None:
        """Whether the shadow candidate would have decided this record's `to`; None when it
        classified nothing here (no shadow, or not a deadline decision)."""
        if not self.shadow_outcome:
            return None
        return self.shadow_outcome == self.to_state
