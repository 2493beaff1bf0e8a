"""Small helpers shared by the scenario, race and property tests."""

import asyncio
import itertools
from collections.abc import Callable

from engine.holds import OutcomeResult, ProviderOutcome
from tests.conftest import Sale

_event_ids = itertools.count()


async def callback(
    sale: Sale,
    charge_id: str,
    outcome: str,
    *,
    attempt: str | None = None,
    event_id: str | None = None,
) -> OutcomeResult:
    """Deliver one provider callback; by default a fresh provider event id, attempt = charge."""
    return await sale.store.apply_outcome(
        sale.event_id,
        ProviderOutcome(
            provider_event_id=event_id or f"pev-{next(_event_ids)}",
            charge_id=charge_id,
            attempt_id=attempt or f"att-{charge_id}",
            intent_id=f"pi-{charge_id}",
            outcome=outcome,
        ),
    )


async def terminal_records(sale: Sale, kind: str, ident: str) -> list[dict[str, str]]:
    return [
        r
        for r in await sale.store.outbox(sale.event_id)
        if r["kind"] == kind and r["id"] == ident and r["terminal"] == "1"
    ]


async def wait_until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Poll `predicate` for at most `timeout_s` (bounded: a hung condition fails the test)."""
    step_s = 0.01
    for _ in range(int(timeout_s / step_s)):
        if predicate():
            return
        await asyncio.sleep(step_s)
    raise AssertionError(f"condition not met within {timeout_s}s")
