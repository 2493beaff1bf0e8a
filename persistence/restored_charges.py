"""The charges a rebuild puts back (persistence/rebuild.py), each made from its ledger row: a
confirmed hold's winner, captured (or as the provider's later movement left it), and every other
charge resolve-by-refund; a part of an order (ADR 0043) on its order's provider key."""

from collections.abc import Iterable
from dataclasses import replace

import asyncpg

from engine.model.holds import Charge
from engine.model.states import ChargeState, HoldState


def winner_charge(
    charge_id: str,
    r: asyncpg.Record | None,
    winner_of: tuple[str, str, HoldState],
    price: int,
) -> Charge:
    """A confirmed hold implies its winner captured, even if the ledger's charge row lags
    (then it captured `price`); after the sale the winner is in whatever state the provider's
    movement left it."""
    hold_id, seat_id, hold_state = winner_of
    state = ChargeState.CAPTURED
    if r is not None and hold_state != HoldState.CONFIRMED:
        state = ChargeState(r["state"])
    return Charge(
        charge_id=charge_id,
        hold_id=hold_id,
        seat_id=seat_id,
        login="",
        state=state,
        attempt_id=r["attempt_id"] if r else "",
        intent_id=r["intent_id"] if r else "",
        refund_only=False,
        amount=r["amount"] if r else price,
        created_ms=r["decided_at_ms"] if r else 0,
        decided_ms=r["decided_at_ms"] if r else 0,
        refund_attempts=0,
        reason="restored",
        captured=(r["captured"] or r["amount"]) if r else price,
        final=True,
    )


def parts_given_back(rows: Iterable[asyncpg.Record]) -> dict[str, int]:
    """What the parts of each order gave back (ADR 0043), by the charge they are parts of."""
    out: dict[str, int] = {}
    for r in rows:
        if r["part_of"]:
            out[r["part_of"]] = out.get(r["part_of"], 0) + int(r["amount"])
    return out


def other_charge(charge_id: str, r: asyncpg.Record, final: bool, hold_id: str) -> Charge:
    """Every other charge: resolve-by-refund (its hold is gone, or restored as an ended record
    when the ledger knew it only through this charge); captured without winning a hold we still
    have, it is refunded."""
    state = ChargeState(r["state"])
    if state == ChargeState.CAPTURED:
        state = ChargeState.REFUNDING
    charge = Charge(
        charge_id=charge_id,
        hold_id=hold_id,
        seat_id=r["seat_id"],
        login="",
        state=state,
        attempt_id=r["attempt_id"],
        intent_id=r["intent_id"],
        refund_only=True,
        amount=r["amount"],
        created_ms=r["decided_at_ms"],
        decided_ms=r["decided_at_ms"],
        refund_attempts=0,
        reason="restored",
        captured=r["captured"] or (r["amount"] if state == ChargeState.REFUNDING else 0),
        final=final,
    )
    parent = r["part_of"]
    if not parent:
        return charge
    # A part of an order (ADR 0043): its hold's, refunded on its order's provider key.
    return replace(charge, hold_id=r["hold_id"], refund_only=False, key=parent, part_of=parent)
