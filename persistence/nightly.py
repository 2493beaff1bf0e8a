"""`onsale reconcile`: the nightly three-way reconciliation of Redis, the ledger and the
provider's own records. Every discrepancy is reported by class; what can be repaired safely is
repaired (a missing ledger row is written, a refund is re-requested, money the engine never
heard of goes down the refund path); the rest is left for a person. Exit 0 only when nothing is
left unrepaired.

Classes:
- captured_without_seat_not_refunded: the provider captured money that is not the winner of a
  confirmed hold and has not refunded it.
- seat_sold_without_captured_winner: a confirmed hold (Redis or ledger) whose winner the provider
  never captured.
- decision_missing_from_ledger: an outbox record older than the grace period, not in the ledger.
- ledger_row_unknown_to_redis: a hold or charge the ledger has and Redis does not.
- refund_never_confirmed: a charge Redis is refunding that the provider has no refund for, or
  that the provider refunded while Redis still waits."""

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import asyncpg

from engine.holds import ProviderOutcome
from engine.provider import ProviderClient
from engine.states import ChargeState, HoldState
from engine.store import Store
from persistence.writer import LedgerWriter

CLASSES = (
    "captured_without_seat_not_refunded",
    "seat_sold_without_captured_winner",
    "decision_missing_from_ledger",
    "ledger_row_unknown_to_redis",
    "refund_never_confirmed",
)


@dataclass(frozen=True)
class Discrepancy:
    cls: str
    event_id: str
    entity: str
    detail: str
    repaired: bool


async def reconcile_event(
    store: Store,
    conn: asyncpg.Connection,
    writer: LedgerWriter,
    provider_entries: list[dict[str, Any]],
    event_id: str,
    *,
    grace_ms: int,
    progress: Callable[[int], None] | None = None,
) -> list[Discrepancy]:
    out: list[Discrepancy] = []
    now = await store.server_time_ms()
    charges = {c.charge_id: c for c in await store.scan_charges(event_id)}
    holds = await store.holds(event_id)
    captured = {
        e["idempotency_key"]: e
        for e in provider_entries
        if e["kind"] == "capture" and e.get("event_id") == event_id
    }
    refunded = {
        e["idempotency_key"]
        for e in provider_entries
        if e["kind"] == "refund" and e.get("event_id") == event_id
    }
    ledger_holds = {
        r["hold_id"]: r
        for r in await conn.fetch(
            "select hold_id, state, winner from holds where event_id = $1", event_id
        )
    }
    ledger_charges = {
        r["charge_id"]: r
        for r in await conn.fetch(
            "select charge_id, state from charges where event_id = $1", event_id
        )
    }
    winners = {h.winner for h in holds.values() if h.state == HoldState.CONFIRMED}
    winners |= {r["winner"] for r in ledger_holds.values() if r["state"] == "CONFIRMED"}

    # 1. money the provider holds that is not a winner and not refunded. A charge already
    # REFUNDING or REFUNDED is on its way back (its refund is checked in 5); one we never heard
    # of, or still CHARGING, gets the capture through the same script as a callback (a charge
    # we never heard of can only go down the refund path); a declined or failed one is a
    # provider contradiction left for a person.
    for key, entry in captured.items():
        if key in winners or key in refunded:
            continue
        c = charges.get(key)
        if c is not None and c.state in (ChargeState.REFUNDING, ChargeState.REFUNDED):
            continue
        repaired = False
        if c is None or c.state == ChargeState.CHARGING:
            outcome = ProviderOutcome(
                f"nightly:{entry['attempt_id']}:captured", key, entry["attempt_id"], "", "CAPTURED"
            )
            result = await store.apply_outcome(event_id, outcome)
            repaired = result.decision in ("REFUND", "CONFIRMED")
        out.append(
            Discrepancy(
                CLASSES[0],
                event_id,
                key,
                f"captured {entry['amount']}, ours: {c.state if c else 'unknown'}",
                repaired,
            )
        )
    # 2. sold seats whose winner the provider never captured.
    for source, rows in (
        ("redis", {h.hold_id: (h.state, h.winner) for h in holds.values()}),
        ("ledger", {k: (r["state"], r["winner"]) for k, r in ledger_holds.items()}),
    ):
        for hold_id, (state, winner) in rows.items():
            if state == "CONFIRMED" and winner not in captured:
                out.append(
                    Discrepancy(
                        CLASSES[1],
                        event_id,
                        hold_id,
                        f"{source} says sold to charge {winner or '-'}",
                        False,
                    )
                )
    # 3. outbox records the ledger does not hold.
    in_ledger = {
        r[0]
        for r in await conn.fetch("select decision_id from decisions where event_id = $1", event_id)
    }
    entries = await store.outbox_entries(event_id)
    missing = [
        (sid, f)
        for sid, f in entries
        if f["decision_id"] not in in_ledger and now - int(sid.split("-")[0]) > grace_ms
    ]
    if missing:
        await writer.write(event_id, missing)
        for sid, f in missing:
            out.append(Discrepancy(CLASSES[2], event_id, f["decision_id"], sid, True))
    if progress:
        progress(len(entries))
    # 4. ledger rows Redis does not know.
    for hold_id in ledger_holds.keys() - holds.keys():
        out.append(Discrepancy(CLASSES[3], event_id, hold_id, "hold", False))
    for charge_id in ledger_charges.keys() - charges.keys():
        out.append(Discrepancy(CLASSES[3], event_id, charge_id, "charge", False))
    # 5. refunds never confirmed.
    for c in charges.values():
        if c.state != ChargeState.REFUNDING:
            continue
        if c.charge_id in refunded:
            await store.refund_result(event_id, c.charge_id, refunded=True)
            out.append(
                Discrepancy(
                    CLASSES[4], event_id, c.charge_id, "provider refunded; recorded now", True
                )
            )
        elif c.charge_id in captured:
            await store.refund_result(event_id, c.charge_id, refunded=False, retry_delay_ms=0)
            out.append(
                Discrepancy(
                    CLASSES[4],
                    event_id,
                    c.charge_id,
                    "no refund at the provider; re-requested",
                    False,
                )
            )
    return out


def as_json(found: list[Discrepancy]) -> dict[str, Any]:
    by_class = {cls: [asdict(d) for d in found if d.cls == cls] for cls in CLASSES}
    return {
        "unrepaired": sum(not d.repaired for d in found),
        "total": len(found),
        "by_class": by_class,
    }


async def provider_entries(provider: ProviderClient) -> list[dict[str, Any]]:
    ledger = await provider.ledger()
    entries: list[dict[str, Any]] = ledger["entries"]
    return entries
