"""`onsale policy report EVENT`: what an event's deadline policies decided and what a candidate in
shadow would have decided instead, read from the ledger (ADR 0020). Decisions are counted by the
policy and version enforced when each was made; a candidate's classifications by the real
decision against its own (agreements included, so a rate can be read); a few disagreements of
each kind are shown whole. The ledger's `policy` records also give back the policies an event
had last, which a rebuild restores."""

from dataclasses import asdict, dataclass, field
from typing import Any

import asyncpg

from engine.model.records import Marker
from engine.store.policies import PolicyState
from persistence.queries import Q

EXAMPLES_MAX = 3  # disagreements shown per kind


@dataclass(frozen=True, slots=True)
class Enforced:
    """Decisions made under one enforced policy version."""

    policy: str
    version: int
    decisions: int
    terminal: int
    classified: int  # of them, classified by a shadow candidate


@dataclass(frozen=True, slots=True)
class Classified:
    """How often a candidate classified a decision of one kind, real `to` against its own."""

    shadow_policy: str
    shadow_version: int
    kind: str
    real: str
    shadow: str
    count: int

    @property
    def agrees(self) -> bool:
        return self.real == self.shadow


@dataclass(frozen=True, slots=True)
class Example:
    """One disagreement: what happened, and what the candidate would have done."""

    shadow_policy: str
    shadow_version: int
    kind: str
    hold_id: str
    charge_id: str
    decision_id: str
    happened: str  # from -> to (reason), under the enforced policy
    shadow: str
    policy: str
    policy_version: int
    decided_ms: int


@dataclass(frozen=True, slots=True)
class Change:
    """One policy change as recorded (the version it took, what it left)."""

    version: int
    change: str  # SHADOW_SET | POLICY_PROMOTED | POLICY_ROLLED_BACK
    before: str  # the enforced policy before it
    policy: str
    policy_version: int
    shadow_policy: str
    shadow_version: int
    decided_ms: int


@dataclass
class PolicyReport:
    event_id: str
    enforced: list[Enforced] = field(default_factory=list)
    classified: list[Classified] = field(default_factory=list)
    examples: list[Example] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)

    @property
    def agreements(self) -> int:
        return sum(c.count for c in self.classified if c.agrees)

    @property
    def disagreements(self) -> int:
        return sum(c.count for c in self.classified if not c.agrees)


async def policy_report(
    conn: asyncpg.Connection, event_id: str, examples_max: int = EXAMPLES_MAX
) -> PolicyReport:
    report = PolicyReport(event_id)
    for r in await conn.fetch(Q["policy_decisions"], event_id):
        report.enforced.append(Enforced(*r.values()))
    for r in await conn.fetch(Q["policy_shadow_counts"], event_id):
        report.classified.append(Classified(*r.values()))
    for r in await conn.fetch(Q["policy_shadow_examples"], event_id, examples_max):
        report.examples.append(_example(r))
    report.changes = await policy_changes(conn, event_id)
    return report


def _example(r: asyncpg.Record) -> Example:
    return Example(
        shadow_policy=r["shadow_policy"],
        shadow_version=r["shadow_version"],
        kind=r["kind"],
        hold_id=r["hold_id"],
        charge_id=r["charge_id"],
        decision_id=r["decision_id"],
        happened=f"{r['from_state']} -> {r['to_state']} ({r['reason']})",
        shadow=r["shadow_outcome"],
        policy=r["policy"],
        policy_version=r["policy_version"],
        decided_ms=r["decided_at_ms"],
    )


async def policy_changes(conn: asyncpg.Connection, event_id: str) -> list[Change]:
    return [
        Change(
            version=int(r["entity_id"]),
            change=r["to_state"],
            before=r["from_state"],
            policy=r["policy"],
            policy_version=r["policy_version"],
            shadow_policy=r["shadow_policy"],
            shadow_version=r["shadow_version"],
            decided_ms=r["decided_at_ms"],
        )
        for r in await conn.fetch(Q["policy_changes"], event_id)
    ]


def policy_state(changes: list[Change]) -> tuple[PolicyState, int] | None:
    """The policies the recorded changes left, with the last version taken; None when the
    event's policy never changed. A promotion remembers the policy it replaced, a rollback
    forgets it (lua/event_policy.lua)."""
    if not changes:
        return None
    previous = ""
    for c in changes:
        if c.change == Marker.POLICY_PROMOTED:
            previous = c.before
        elif c.change == Marker.POLICY_ROLLED_BACK:
            previous = ""
    last = changes[-1]
    state = PolicyState(
        last.policy, last.policy_version, last.shadow_policy, last.shadow_version, previous
    )
    return state, max(c.version for c in changes)


def as_json(report: PolicyReport) -> dict[str, Any]:
    return {
        "event_id": report.event_id,
        "enforced": [asdict(e) for e in report.enforced],
        "shadow": {
            "agreements": report.agreements,
            "disagreements": report.disagreements,
            "classified": [asdict(c) | {"agrees": c.agrees} for c in report.classified],
            "examples": [asdict(e) for e in report.examples],
        },
        "changes": [asdict(c) for c in report.changes],
    }
