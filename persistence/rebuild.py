"""`onsale rebuild EVENT`: after Redis lost an event entirely, rebuild its live state from the
ledger. Sold seats stay sold (each confirmed hold with its winning charge); every other charge
the ledger knows comes back with its state and attempt id, resolve-by-refund since its hold is
gone: one still CHARGING is settled by provider reconciliation (a capture is then refunded),
one REFUNDING is queued for its refund again. Holds that were only reserved are gone: their
seats are back on sale. Refuses to run over an event that still exists in Redis unless forced."""

from collections.abc import Callable
from dataclasses import dataclass, field

import asyncpg

from engine.holds import Charge, SeatSpec
from engine.states import ChargeState, LatePolicy
from engine.store import Store


class RebuildRefused(RuntimeError):
    pass


@dataclass
class RebuildReport:
    event_id: str
    seats: int = 0
    sold: int = 0
    charges: dict[str, int] = field(default_factory=dict)


async def rebuild(
    store: Store,
    conn: asyncpg.Connection,
    event_id: str,
    *,
    force: bool = False,
    progress: Callable[[int], None] | None = None,
) -> RebuildReport:
    if await store.event_exists(event_id):
        if not force:
            raise RebuildRefused(
                f"event {event_id} still exists in Redis; pass --force to replace it"
            )
        await store.drop_event(event_id)
    config = await conn.fetchrow("select * from event_configs where event_id = $1", event_id)
    if config is None:
        raise RebuildRefused(f"the ledger has no configuration for event {event_id}")
    seat_rows = await conn.fetch(
        "select seat_id, rank, section from seats where event_id = $1 order by rank", event_id
    )
    report = RebuildReport(event_id)

    def seats() -> list[SeatSpec]:
        return [SeatSpec(r["seat_id"], r["rank"], r["section"]) for r in seat_rows]

    report.seats = await store.create_event(
        event_id,
        seats(),
        hold_ttl_ms=config["hold_ttl_ms"],
        quarantine_ms=config["quarantine_ms"],
        policy=LatePolicy(config["policy"]),
        price_minor=config["price_minor"],
    )
    if progress:
        progress(report.seats)
    charges = {
        r["charge_id"]: r
        for r in await conn.fetch("select * from charges where event_id = $1", event_id)
    }
    winners: set[str] = set()
    for h in await conn.fetch(
        "select * from holds where event_id = $1 and state = 'CONFIRMED'", event_id
    ):
        await store.restore_hold(
            event_id, h["hold_id"], h["login"], h["seat_id"], h["winner"], h["decided_at_ms"]
        )
        winners.add(h["winner"])
        report.sold += 1
    for charge_id, r in charges.items():
        state = ChargeState(r["state"])
        won = charge_id in winners and state == ChargeState.CAPTURED
        await store.restore_charge(
            event_id,
            Charge(
                charge_id=charge_id,
                hold_id=r["hold_id"] if won else "",
                seat_id=r["seat_id"],
                login="",
                state=state,
                attempt_id=r["attempt_id"],
                intent_id=r["intent_id"],
                refund_only=not won,
                amount=r["amount"],
                created_ms=r["decided_at_ms"],
                decided_ms=r["decided_at_ms"],
                refund_attempts=0,
                reason="restored",
            ),
        )
        report.charges[state] = report.charges.get(state, 0) + 1
    now = await store.server_time_ms()
    await store.mark_restored(event_id, now)
    await store.open_sale(event_id, config["opens_at_ms"])
    return report
