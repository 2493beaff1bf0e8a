"""Small helpers shared by the scenario, race and property tests."""

import asyncio
import contextlib
import itertools
from collections.abc import Callable
from typing import Any

from engine.model.errors import ChargeNotFound
from engine.model.holds import Charge, OutcomeResult, ProviderOutcome, ProviderReversal
from tests.conftest import REDIS_URL, Sale

_event_ids = itertools.count()


async def callback(
    sale: Sale,
    charge_id: str,
    outcome: str,
    *,
    attempt: str | None = None,
    event_id: str | None = None,
    **claims: Any,
) -> OutcomeResult:
    """Deliver one provider callback that agrees with our charge record (amount, currency,
    hold), unless `claims` override a field of ProviderOutcome; by default a fresh provider
    event id and attempt = charge."""
    known: Charge | None = None
    with contextlib.suppress(ChargeNotFound):
        known = await sale.store.read.charge(sale.event_id, charge_id)
    fields: dict[str, Any] = {
        "provider_event_id": event_id or f"pev-{next(_event_ids)}",
        "charge_id": charge_id,
        "attempt_id": attempt or f"att-{charge_id}",
        "intent_id": f"pi-{charge_id}",
        "outcome": outcome,
        "amount": known.amount if known else 0,
        "meta_hold": known.hold_id if known else "",
    }
    fields.update(claims)
    return await sale.store.apply_outcome(sale.event_id, ProviderOutcome(**fields))


async def reversal(
    sale: Sale,
    charge_id: str,
    kind: str,
    *,
    event_id: str | None = None,
    **claims: Any,
) -> OutcomeResult:
    """Deliver one provider money movement (REFUND, DISPUTE_*) for the charge's attempt."""
    c = await sale.store.read.charge(sale.event_id, charge_id)
    fields: dict[str, Any] = {
        "provider_event_id": event_id or f"pev-{next(_event_ids)}",
        "charge_id": c.key,
        "attempt_id": c.attempt_id or f"att-{charge_id}",
        "kind": kind,
        "amount": c.captured or c.amount,
        "currency": "EUR",
        "meta_event": sale.event_id,
    }
    fields.update(claims)
    return await sale.store.apply_reversal(sale.event_id, ProviderReversal(**fields))


async def terminal_records(sale: Sale, kind: str, ident: str) -> list[dict[str, str]]:
    return [
        r
        for r in await sale.store.read.outbox(sale.event_id)
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


def memory_api_env(prefix: str, token_secret: str, **extra: str) -> dict[str, str]:
    """The environment of an API made in a test process for the sold-out lanes' tests: real
    Redis under `prefix`, demo logins signed with `token_secret`, no per-login limits,
    decisions told at once (no ledger), and a sold-out memory that does not lapse while a test
    runs."""
    from loadtest.devstack.scratch import api_env

    return api_env(
        REDIS_URL,
        ONSALE_KEY_PREFIX=prefix,
        ONSALE_TOKEN_SECRET=token_secret,
        ONSALE_SOLD_OUT_MEMORY_MS="600000",
        **extra,
    )
