"""`onsale rebuild EVENT`: after Redis lost an event entirely, rebuild its live state from the
ledger.

- Sold seats stay sold: each confirmed hold comes back with its seat and its winning charge,
  CAPTURED (a confirmed hold implies its winner captured, even if the ledger's charge row lags).
- Every other hold comes back as an ended record without a seat (a replayed claim id gets its
  first outcome, never a new seat); holds that were only reserved or quarantined end, and
  their seats are back on sale. Those that name no charge, holds the trimmer had dropped from
  Redis among them, are indexed for trimming again (ADR 0018): never live, gone after the
  retention. A hold whose buyer was paying (the ledger knows it only
  through its charge) comes back EXPIRED, naming that charge, so its buyer reads where the
  money is.
- Every other charge comes back with its attempt id, resolve-by-refund (its hold is gone): one
  still CHARGING is settled by provider reconciliation (a capture is then refunded); one that
  was captured without winning, or REFUNDING, is queued for its refund.
- While it runs the event is a DRAFT: claims are refused and callbacks are told to retry.
- The next decision is numbered after the ledger's last one.
- It refuses to run over an event that still exists in Redis unless forced, and even forced it
  refuses while the outbox holds decisions the ledger does not have yet (they would be lost),
  unless the ledger refused them or the event is fenced (its Redis went back in time): then
  the ledger wins, and the report lists the superseded decisions (ADR 0017).
- While it runs, a read or claim of the event answers 503 "recovering", not "not found". Its
  first write marks the event rebuilding and numbers it after the ledger (nothing fences it
  half built); one rebuild of an event runs at a time, whoever starts it (a PostgreSQL
  advisory lock); one that failed is started over by the next.
- A ledger process rebuilds a lost or fenced event by itself (persistence/auto_rebuild.py);
  the operator's command stays for what that refuses.
- The deadline policies come back as the ledger's last policy records left them (enforced,
  shadow, what a rollback would restore, versions), not as the event was created (ADR 0020).
- A stock event (ADR 0022) comes back with its SKUs and locations and no initial count (no new
  correction is recorded): each location's on hand is the `on_hand_after` of its last
  correction in the ledger, and every correction is put back as its script keeps it, so a
  replayed correction id is answered as a replay; then the holds, a sold one taking its lines
  from available to sold (all of them or none).
- A waiting room (ADR 0029) and presale codes (ADR 0049) come back as the ledger holds them
  (persistence/waiting_ledger.py, persistence/presale_ledger.py)."""

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace

import asyncpg

from engine.model.event_config import EventConfig
from engine.model.event_details import EventDetails
from engine.model.holds import SeatSpec
from engine.model.records import Marker
from engine.model.replies import PolicyCode, QueueRestoreCode, RestoreCode
from engine.model.states import HoldState
from engine.model.stock_lines import SkuSpec, lines_of
from engine.store import Store
from engine.store.event_catalogue import describe
from engine.store.policies import Policies
from persistence.policy_report import policy_changes, policy_state
from persistence.presale_ledger import restore_presales
from persistence.queries import Q
from persistence.restored_charges import other_charge, parts_given_back, winner_charge
from persistence.stock_ledger import recorded_correction
from persistence.waiting_ledger import restore_waiting_room

# Ended holds that still name their winner (its money moved after the sale).
WINNER_KEPT = (HoldState.CONFIRMED, HoldState.EXCEPTION, HoldState.REVOKED)


class RebuildRefused(RuntimeError):
    pass


class RebuildRunning(RebuildRefused):
    """Another rebuild of the event holds its lock (an operator's, another ledger process's)."""


class NotNeeded(RebuildRefused):
    """The event is whole again (rebuilt meanwhile): an automatic rebuild leaves it alone."""


@dataclass
class RebuildReport:
    event_id: str
    seats: int = 0  # a stock event: the units on hand
    sold: int = 0
    ended_holds: int = 0
    charges: dict[str, int] = field(default_factory=dict)
    # Decisions of the replaced Redis the ledger refused or never got (the ledger won).
    superseded: list[str] = field(default_factory=list)
    places: int = 0  # places in its waiting room (ADR 0029)
    codes: int = 0  # presale access codes (ADR 0049)


async def _superseded(store: Store, conn: asyncpg.Connection, event_id: str) -> list[str]:
    """The decisions of this Redis the ledger does not hold. Those the ledger refused (parked in
    ledger_alerts: it holds another decision for the same seat, hold or number) and, on a fenced
    event (its Redis went back in time, ADR 0017), all of them are superseded: the ledger wins
    and the report lists them. Others are only not mirrored yet: the rebuild waits for them."""
    outbox = [f["decision_id"] for _sid, f in await store.read.outbox_entries(event_id)]
    in_ledger = {r[0] for r in await conn.fetch(Q["decisions_held"], event_id, outbox)}
    refused = {r[0] for r in await conn.fetch(Q["event_refused_decisions"], event_id)}
    missing = [d for d in outbox if d not in in_ledger]
    fenced = await store.read.status(event_id) == "fenced"  # (a half-built event: no reads)
    pending = [d for d in missing if d not in refused]
    if pending and not fenced:
        raise RebuildRefused(
            f"{len(pending)} decisions of {event_id} are in Redis but not yet in the ledger "
            f"(e.g. {pending[0]}); let the ledger writer catch up first"
        )
    return missing


def _restored(code: RestoreCode | QueueRestoreCode, what: str) -> None:
    if code != "RESTORED":
        raise RebuildRefused(f"could not restore {what}: {code}")


async def _make_room(
    store: Store, conn: asyncpg.Connection, event_id: str, *, force: bool
) -> list[str]:
    if not await store.read.event_exists(event_id):
        return []
    # A rebuild that began and did not finish is finished by the next run: it starts over.
    if not force and not await store.restore.half_built(event_id):
        raise RebuildRefused(f"event {event_id} still exists in Redis; pass --force to replace it")
    superseded = await _superseded(store, conn, event_id)
    await store.restore.drop_event(event_id)
    return superseded


Winners = dict[str, tuple[str, str, HoldState]]  # charge id -> (hold, seat, hold state)
AmountOf = Callable[[str], int]  # what a sale of these seats (or this line list) cost


def rebuild_lock_key(event_id: str) -> str:
    """The advisory lock one rebuild of the event holds, whoever runs it (an operator's
    `onsale rebuild`, a ledger process's automatic rebuild): two never run at once."""
    return f"onsale:rebuild:{event_id}"


async def rebuild(
    store: Store,
    conn: asyncpg.Connection,
    event_id: str,
    *,
    force: bool = False,
    if_needed: bool = False,
) -> RebuildReport:
    """`if_needed`: only an event Redis lost, fenced or left half built (an automatic rebuild,
    decided on a look that may be older than a rebuild that has just finished)."""
    key = rebuild_lock_key(event_id)
    if not await conn.fetchval("select pg_try_advisory_lock(hashtext($1))", key):
        raise RebuildRunning(
            f"another rebuild of {event_id} is running, or the ledger is writing a batch of it"
        )
    try:
        if if_needed and not await store.read.recovering(event_id):
            status = (await store.read.event_fields(event_id, "status"))[0]
            if status is not None:
                raise NotNeeded(f"{event_id} is {status}: nothing to rebuild")
        return await _rebuild(store, conn, event_id, force=force)
    finally:
        await conn.execute("select pg_advisory_unlock(hashtext($1))", key)


async def _rebuild(
    store: Store, conn: asyncpg.Connection, event_id: str, *, force: bool
) -> RebuildReport:
    config = await conn.fetchrow(Q["event_config"], event_id)
    if config is None:
        raise RebuildRefused(f"the ledger has no configuration for event {event_id}")
    if config["redis_prefix"] not in ("", store.prefix):  # ADR 0037
        raise RebuildRefused(
            f"event {event_id} belongs to another deployment (Redis prefix "
            f"{config['redis_prefix']!r}, this one {store.prefix!r})"
        )
    superseded = await _make_room(store, conn, event_id, force=force)
    report = RebuildReport(event_id, superseded=superseded)
    # Rebuilding and numbered after the ledger before anything else is written (ADR 0017).
    await store.restore.begin(event_id, await conn.fetchval(Q["event_last_seq"], event_id))
    create = _create_stock if config["kind"] == "stock" else _create
    report.seats, amount_of = await create(store, conn, event_id, config)
    await describe(store.runner, event_id, asdict(EventDetails.of(config)))  # ADR 0041
    await _restore_policies(store, conn, event_id)
    winners = await _restore_holds(store, conn, event_id, report)
    paying = await _restore_paying(store, conn, event_id, report)
    await _restore_charges(store, conn, event_id, amount_of, winners, paying, report)
    code, report.places = await restore_waiting_room(store, conn, event_id)
    _restored(code, "the waiting room")
    report.codes = await restore_presales(store, conn, event_id)
    now_ms = await store.read.server_time_ms()
    await store.restore.mark(event_id, now_ms)
    # What the ledger refused of the replaced Redis is settled: listed, no longer open.
    await conn.execute(Q["supersede_refused_decisions"], event_id, now_ms, superseded)
    await _reopen(store, conn, event_id, config["opens_at_ms"])
    await store.restore.rebuilding(event_id, on=False)
    return report


async def _reopen(store: Store, conn: asyncpg.Connection, event_id: str, opens_at_ms: int) -> None:
    """Open the sale again, unless the ledger says an operator closed or cancelled it (ADR
    0025): then it goes from DRAFT straight to closed, and a cancel resumes (what it had done
    is restored already; what it had not, it does now; its records repeat decision ids the
    ledger holds, which the writer skips)."""
    ended = await conn.fetchval(Q["event_lifecycle"], event_id)
    if ended is None:
        await store.open_sale(event_id, opens_at_ms)
        return
    await store.lifecycle.close(event_id, "rebuild")
    if ended == Marker.EVENT_CANCELLED:
        await store.lifecycle.cancel(event_id, "rebuild")


async def _create(
    store: Store, conn: asyncpg.Connection, event_id: str, config: asyncpg.Record
) -> tuple[int, AmountOf]:
    """The event as a DRAFT with every seat free: claims refused, callbacks told to retry.
    Returns its seats and the amount of a sale: the sum of its seats' prices (each its own,
    ADR 0038, else the event's)."""
    seat_rows = await conn.fetch(Q["event_seats"], event_id)
    seats = await store.create_event(
        event_id,
        [SeatSpec(r["seat_id"], r["rank"], r["section"], r["price_minor"]) for r in seat_rows],
        EventConfig.of(config),
        price_minor=config["price_minor"],
    )
    price: int = config["price_minor"]
    own = {r["seat_id"]: r["price_minor"] for r in seat_rows if r["price_minor"] is not None}
    return seats, lambda listed: sum(own.get(s, price) for s in listed.split(",") if s)


async def _create_stock(
    store: Store, conn: asyncpg.Connection, event_id: str, config: asyncpg.Record
) -> tuple[int, AmountOf]:
    """The stock event as a DRAFT with its SKUs, each location's on hand from its last
    correction, and every correction's record; returns the units on hand and the amount of a
    line list at the SKUs' prices."""
    prices = {r["sku"]: r["price_minor"] for r in await conn.fetch(Q["event_skus"], event_id)}
    await store.stock.create_event(
        event_id,
        config["locations"].split(","),
        [SkuSpec(sku, price) for sku, price in prices.items()],  # no count: no correction
        EventConfig.of(config),
    )
    corrections = await conn.fetch(Q["event_stock_corrections"], event_id)
    on_hand = {(r["sku"], r["location"]): r["on_hand_after"] for r in corrections}  # the last
    for (sku, location), units in on_hand.items():
        code = await store.restore.stock(event_id, sku, location, units)
        _restored(code, f"the on hand of {sku}@{location}")
    for r in corrections:
        code = await store.restore.correction(event_id, r["correction_id"], recorded_correction(r))
        _restored(code, f"correction {r['correction_id']}")

    def amount_of(listed: str) -> int:
        return sum(line.quantity * prices.get(line.sku, 0) for line in lines_of(listed))

    return sum(on_hand.values()), amount_of


async def _restore_policies(store: Store, conn: asyncpg.Connection, event_id: str) -> None:
    recorded = policy_state(await policy_changes(conn, event_id))
    if recorded is not None:
        change = await Policies(store).restore(event_id, *recorded)
        if change.code != PolicyCode.RESTORED:
            raise RebuildRefused(f"could not restore the deadline policies: {change.code}")


async def _restore_holds(
    store: Store, conn: asyncpg.Connection, event_id: str, report: RebuildReport
) -> Winners:
    """Every hold the ledger has: sold ones with their seat, ended ones as records."""
    winners: Winners = {}
    for h in await conn.fetch(Q["event_holds"], event_id):
        state = HoldState(h["state"])
        if state == HoldState.QUARANTINED:
            state = HoldState.EXPIRED  # its seat is free again; its charge is resolve-by-refund
        code = await store.restore.hold(
            event_id, h["hold_id"], h["login"], h["seat_id"], h["winner"], h["decided_at_ms"], state
        )
        _restored(code, f"hold {h['hold_id']}")
        if state in WINNER_KEPT:
            winners[h["winner"]] = (h["hold_id"], h["seat_id"], state)
        if state in (HoldState.CONFIRMED, HoldState.EXCEPTION):
            report.sold += 1
        else:
            report.ended_holds += 1
    return winners


async def _restore_paying(
    store: Store, conn: asyncpg.Connection, event_id: str, report: RebuildReport
) -> dict[str, str]:
    """Holds the ledger knows only by their charges (their buyer was paying at the loss) come
    back EXPIRED, without a seat, naming their charge: the buyer reads a terminal state and
    what became of the money (the charge is resolve-by-refund). Charge id -> hold id."""
    paying: dict[str, str] = {}
    for r in await conn.fetch(Q["event_holds_paying"], event_id):
        code = await store.restore.hold(
            event_id, r["hold_id"], r["login"], r["seat_id"], r["charge_id"],
            r["decided_at_ms"], HoldState.EXPIRED,
        )  # fmt: skip
        _restored(code, f"hold {r['hold_id']}")
        paying[r["charge_id"]] = r["hold_id"]
        report.ended_holds += 1
    return paying


async def _restore_charges(
    store: Store,
    conn: asyncpg.Connection,
    event_id: str,
    amount_of: AmountOf,
    winners: Winners,
    paying: dict[str, str],
    report: RebuildReport,
) -> None:
    final = {r[0] for r in await conn.fetch(Q["event_final_charges"], event_id)}
    rows = {r["charge_id"]: r for r in await conn.fetch(Q["event_charges"], event_id)}
    parted = parts_given_back(rows.values())
    restored = [
        replace(winner_charge(c, rows.pop(c, None), w, amount_of(w[1])), parted=parted.get(c, 0))
        for c, w in winners.items()
    ]
    restored += [other_charge(c, r, c in final, paying.get(c, "")) for c, r in rows.items()]
    for charge in restored:
        _restored(await store.restore.charge(event_id, charge), f"charge {charge.charge_id}")
        report.charges[charge.state] = report.charges.get(charge.state, 0) + 1
