"""Deadline policies (ADR 0020): what an event does when a hold passes its deadline with a charge
in flight. An event enforces one and may run one candidate in shadow: at every deadline decision
the candidate's classification is recorded beside the real one, acting on nothing. Each change
(shadow, promote, rollback) is one call of lua/event_policy.lua, takes the next version number
and is recorded in the outbox; none rewrites a decision already recorded."""

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.model import errors
from engine.model.replies import PolicyCode
from engine.model.states import GRACE_MS_MAX, GRACE_MS_MIN, GRACE_POLICY_PREFIX, LatePolicy

if TYPE_CHECKING:
    from engine.store import Store

_GRACE = re.compile(re.escape(GRACE_POLICY_PREFIX) + r"([1-9][0-9]{0,8})")


@dataclass(frozen=True, slots=True)
class DeadlinePolicy:
    """A LatePolicy, after a grace when grace_ms > 0 (`grace:<ms>` is release_refund after one)."""

    late: LatePolicy
    grace_ms: int = 0

    def __post_init__(self) -> None:
        if self.grace_ms:
            assert self.late == LatePolicy.RELEASE_REFUND, "a grace ends in release_refund"
            assert GRACE_MS_MIN <= self.grace_ms <= GRACE_MS_MAX, self.grace_ms

    @property
    def name(self) -> str:
        return f"{GRACE_POLICY_PREFIX}{self.grace_ms}" if self.grace_ms else str(self.late)

    @classmethod
    def parse(cls, name: str) -> "DeadlinePolicy":
        if name in set(LatePolicy):
            return cls(LatePolicy(name))
        m = _GRACE.fullmatch(name)
        if m and GRACE_MS_MIN <= int(m[1]) <= GRACE_MS_MAX:
            return cls(LatePolicy.RELEASE_REFUND, int(m[1]))
        raise ValueError(
            f"unknown deadline policy {name!r}: quarantine, release_refund or "
            f"{GRACE_POLICY_PREFIX}<ms> with {GRACE_MS_MIN} <= ms <= {GRACE_MS_MAX}"
        )


@dataclass(frozen=True, slots=True)
class PolicyState:
    """An event's deadline policies after a change (or a refused one)."""

    enforced: str
    enforced_version: int
    shadow: str  # "" when no candidate runs
    shadow_version: int
    previous: str  # what a rollback would enforce again ("" when nothing to roll back)


@dataclass(frozen=True, slots=True)
class PolicyChange:
    code: PolicyCode
    state: PolicyState

    @property
    def changed(self) -> bool:
        return self.code in (PolicyCode.SHADOWED, PolicyCode.PROMOTED, PolicyCode.ROLLED_BACK)


class Policies:
    """The policy operations of one store (an operator's, through `onsale policy`)."""

    def __init__(self, store: "Store") -> None:
        self._run = store.runner.run

    async def shadow(self, event_id: str, candidate: DeadlinePolicy | None) -> PolicyChange:
        """Run `candidate` in shadow (replacing any other); None stops shadowing."""
        return await self._change(event_id, "SHADOW", candidate.name if candidate else "")

    async def promote(self, event_id: str) -> PolicyChange:
        """Enforce the shadow candidate for every decision made from now on."""
        return await self._change(event_id, "PROMOTE")

    async def rollback(self, event_id: str) -> PolicyChange:
        """Enforce again the policy the last promotion replaced, from now on."""
        return await self._change(event_id, "ROLLBACK")

    async def restore(self, event_id: str, state: PolicyState, last_version: int) -> PolicyChange:
        """A rebuild (the event a draft) puts back the policies the ledger's records left;
        nothing is recorded again, and the next change takes a version after `last_version`."""
        return await self._change(
            event_id,
            "RESTORE",
            state.enforced,
            state.enforced_version,
            state.shadow,
            state.shadow_version,
            state.previous,
            last_version,
        )

    async def _change(self, event_id: str, op: str, *args: Any) -> PolicyChange:
        reply = await self._run("event_policy", event_id, [op, *args])
        code = PolicyCode(reply[0])
        if code == PolicyCode.NOT_FOUND:
            raise errors.EventNotFound(event_id)
        state = PolicyState(
            str(reply[1]), int(reply[2]), str(reply[3]), int(reply[4]), str(reply[5])
        )
        return PolicyChange(code, state)
