"""`onsale reconcile`: the nightly three-way reconciliation of Redis, the ledger and the
provider's own records. Money is matched per provider attempt (the unit the provider moves money
by), so a charge with several attempts is never a false discrepancy. Every discrepancy is
reported by class; what can be repaired safely is repaired through the same verifying scripts a
callback goes through, and a repair counts only when a re-check confirms it; the rest is left for
a person. Exit 0 only when nothing is left unrepaired. Open exceptions (seats whose money left,
parked and pending refunds, and alerts: provider messages refused or only partly applied, such
as a capture of another amount, 0 included) are listed beside the discrepancies: they are known
and visible, not a disagreement between the three records.

Classes:
- captured_without_seat_not_refunded: the provider holds money for an attempt that is neither the
  winner of a confirmed hold nor on its way back (a lost callback, a capture contradicting a
  decline, money we never heard of). Repaired by applying the provider's record of the capture:
  it confirms a hold that can still win, or goes down the refund path.
- seat_sold_without_money: a confirmed hold (Redis or ledger) whose winning attempt holds no
  money at the provider (refunded from its dashboard, disputed, never captured). Repaired by
  applying the provider's refund or dispute: the hold becomes a visible exception.
- decision_missing_from_ledger: an outbox record older than the grace period, not in the ledger;
  written now, repaired when the ledger then holds it.
- decision_refused_by_ledger: a decision the ledger refused (ledger_alerts): for a person, until
  a rebuild from the ledger replaces the Redis that made it; then it is settled (the ledger won)
  and counted among the open exceptions as superseded_by_rebuild, not a discrepancy.
- ledger_row_unknown_to_redis: a hold or charge the ledger has and Redis does not.
- refund_never_confirmed: a charge Redis is refunding that the provider already refunded
  (recorded now), or whose refund is overdue (re-requested; left for the refund queue).
- money_invariant: what the provider holds for the event differs from what our charges say it
  should hold (captured winners plus captures on their way back).
- sale_lost_by_redis: a sale the ledger holds (a hold CONFIRMED, or EXCEPTION after it) that
  Redis lacks or holds in another state: Redis lost data or went back in time. Never repaired
  here, and its money is never refunded as "captured without a seat": the repair is
  `onsale rebuild` (docs/recovery.md).
- stock_mismatch: a stock event's location whose Redis on hand is not what the ledger's
  corrections add up to, or whose sold units are not its sold lines in the ledger
  (persistence/stock_ledger.py). Never repaired: a person finds out which side is right."""

import contextlib
from collections.abc import Sequence

import asyncpg

from engine.model.holds import Charge, Hold, ProviderReversal
from engine.model.ledger_progress import stream_id
from engine.model.states import ChargeState, HoldState
from engine.providers import DISPUTE_STILL_OUT, MoneyMovement, Provider, ProviderCharge
from engine.store import Store
from engine.workers.reconcile import provider_record_outcome
from persistence.fencing import OutboxReplaced
from persistence.nightly_report import CLASSES, Discrepancy, EventReport
from persistence.provider_money import ProviderAttempt, provider_attempts
from persistence.queries import Q
from persistence.stock_ledger import stock_mismatches
from persistence.writer import LedgerWriter

SOLD = (HoldState.CONFIRMED, HoldState.EXCEPTION)


class _Event:
    """One event's reconciliation: the three records read once, each check a method."""

    def __init__(
        self,
        store: Store,
        conn: asyncpg.Connection,
        writer: LedgerWriter,
        provider: Provider,
        attempts: dict[str, ProviderAttempt],
        event_id: str,
        grace_ms: int,
    ) -> None:
        self.store, self.conn, self.writer, self.provider = store, conn, writer, provider
        self.attempts, self.event_id, self.grace_ms = attempts, event_id, grace_ms
        self.report = EventReport(event_id)
        self.repaired: set[str] = set()  # charges a repair of this run moved
        self.outbox_seen = "0-0"  # the last outbox entry before this run's own repairs
        self.charges: dict[str, Charge] = {}
        self.holds: dict[str, Hold] = {}
        self.by_attempt: dict[str, str] = {}
        self.alerts = 0  # provider messages refused or only partly applied (a wrong amount)
        self.ledger_winners: set[str] = set()  # winning charges of the ledger's sales

    def found(self, cls: str, entity: str, detail: str, repaired: bool) -> None:
        self.report.discrepancies.append(Discrepancy(cls, self.event_id, entity, detail, repaired))

    async def reload(self) -> None:
        self.charges = {c.charge_id: c for c in await self.store.read.scan_charges(self.event_id)}
        self.holds = await self.store.read.holds(self.event_id)
        self.by_attempt = await self.store.read.attempts(self.event_id)
        self.alerts = len(await self.store.read.alerts(self.event_id))

    def charge_of(self, attempt_id: str) -> Charge | None:
        charge_id = self.by_attempt.get(attempt_id)
        return self.charges.get(charge_id) if charge_id else None

    def wins(self, c: Charge) -> bool:
        h = self.holds.get(c.hold_id)
        return h is not None and h.state == HoldState.CONFIRMED and h.winner == c.charge_id

    def accounted(self, c: Charge | None) -> bool:
        """The money of this charge's attempt is where it should be (or on its way back)."""
        if c is None:
            return False
        return (c.state == ChargeState.CAPTURED and self.wins(c)) or c.state in (
            ChargeState.REFUNDING,
            ChargeState.REFUNDED,
        )

    async def record(self, attempt_id: str) -> ProviderCharge | None:
        return await self.provider.get_attempt(attempt_id)

    # -- 1. money at the provider that no seat owns and nobody is giving back --------------

    async def captured_without_seat(self) -> None:
        for att, pa in self.attempts.items():
            c = self.charge_of(att)
            if pa.net <= 0 or self.accounted(c) or pa.key in self.ledger_winners:
                continue  # a ledger sale's money: kept, whatever Redis lost
            ours = c.state if c else "unknown"
            record = await self.record(att)
            if record is not None and record.status == "captured":
                if c is not None and c.state == ChargeState.DISPUTED and record.disputed == "won":
                    await self.reverse(c, record, "DISPUTE_WON")
                else:
                    outcome = provider_record_outcome(f"nightly:{att}:captured", record)
                    await self.store.apply_outcome(self.event_id, outcome)
            await self.reload()
            after = self.charge_of(att)
            if after is not None:
                self.repaired.add(after.charge_id)
            self.found(
                CLASSES[0],
                pa.key,
                f"attempt {att} holds {pa.net} at the provider; ours: {ours}",
                self.accounted(self.charge_of(att)),
            )

    # -- 8. sales the ledger holds that Redis lost -----------------------------------------

    async def sales_lost_by_redis(self) -> None:
        for r in await self.conn.fetch(Q["event_holds"], self.event_id):
            if HoldState(r["state"]) not in SOLD:
                continue
            self.ledger_winners.add(r["winner"])
            h = self.holds.get(r["hold_id"])
            if h is None or h.state not in SOLD or h.winner != r["winner"]:
                ours = f"{h.state} (winner {h.winner or '-'})" if h else "missing"
                detail = f"the ledger sold {r['seat_id']} to it; Redis: {ours}; run onsale rebuild"
                self.found(CLASSES[7], r["hold_id"], detail, False)

    # -- 2. seats sold whose money is not at the provider -----------------------------------

    def paid(self, winner_id: str) -> bool:
        """The winner's attempt holds money at the provider."""
        w = self.charges.get(winner_id)
        pa = self.attempts.get(w.attempt_id) if w else None
        return pa is not None and pa.net > 0

    async def seats_without_money(self, ledger_holds: dict[str, asyncpg.Record]) -> None:
        for h in list(self.holds.values()):
            if h.state == HoldState.CONFIRMED and not self.paid(h.winner):
                await self.follow_money_that_left(h.winner)
                after = self.holds[h.hold_id].state
                self.found(
                    CLASSES[1],
                    h.hold_id,
                    f"redis says sold to {h.winner or '-'}, the provider holds nothing: {after}",
                    after in (HoldState.EXCEPTION, HoldState.REVOKED),
                )
        for hold_id, r in ledger_holds.items():
            ours = self.holds.get(hold_id)
            # Redis is at least as new as the ledger: a hold Redis still has was checked above
            # (or its reversing decision is on its way to the ledger).
            if r["state"] == "CONFIRMED" and ours is None and not self.paid(r["winner"]):
                self.found(
                    CLASSES[1],
                    hold_id,
                    f"ledger says sold to charge {r['winner'] or '-'}; the provider holds nothing",
                    False,
                )

    async def follow_money_that_left(self, winner_id: str) -> None:
        """Apply what the provider's record says happened to the winner's money."""
        w = self.charges.get(winner_id)
        if w is None or w.attempt_id not in self.attempts:
            return  # never captured at the provider: nothing to apply, a person must look
        record = await self.record(w.attempt_id)
        if record is not None and record.refunded:
            await self.reverse(w, record, "REFUND")
        elif record is not None and record.disputed in DISPUTE_STILL_OUT:
            await self.reverse(w, record, "DISPUTE_OPENED")
            if record.disputed == "lost":
                await self.reverse(w, record, "DISPUTE_LOST")
        await self.reload()

    async def reverse(self, c: Charge, record: ProviderCharge, kind: str) -> None:
        await self.store.apply_reversal(
            self.event_id,
            ProviderReversal(
                f"nightly:{c.attempt_id}:{kind.lower()}",
                record.idempotency_key,
                record.attempt_id,
                kind,
                record.amount,
                record.currency,
                (record.metadata or {}).get("event_id", "") or "-",
            ),
        )

    # -- 3. the outbox against the ledger ---------------------------------------------------

    async def refused(self) -> dict[str, str]:
        """Decisions the ledger refused (ledger_alerts), with the reason."""
        rows = await self.conn.fetch(Q["event_refused_decisions"], self.event_id)
        return {r["decision_id"]: r["problem"] for r in rows}

    async def outbox_in_ledger(self, now: int) -> None:
        entries = await self.store.read.outbox_entries(self.event_id)
        refused = await self.refused()
        asked = [*(f["decision_id"] for _sid, f in entries), *refused]
        in_ledger = await self.held(asked)
        missing = [
            (sid, f)
            for sid, f in entries
            if f["decision_id"] not in in_ledger
            and f["decision_id"] not in refused
            and now - int(sid.split("-")[0]) >= self.grace_ms
        ]
        if missing:
            with contextlib.suppress(OutboxReplaced):  # a rebuild runs: listed, not repaired
                await self.writer.write(self.event_id, missing)
            refused = await self.refused()
            in_ledger = await self.held([*asked, *refused])
            for sid, f in missing:
                did = f["decision_id"]
                # Decisions this run's own repairs made are written, not reported.
                if did not in refused and stream_id(sid) <= stream_id(self.outbox_seen):
                    self.found(CLASSES[2], did, sid, did in in_ledger)
        for did, problem in refused.items():
            if did not in in_ledger:
                self.found(CLASSES[3], did, problem[:200], False)
        # Refused decisions of a Redis a rebuild replaced: settled (the ledger won), listed.
        superseded = await self.conn.fetch(Q["event_superseded_decisions"], self.event_id)
        self.report.open_exceptions["superseded_by_rebuild"] = len(superseded)

    async def held(self, decision_ids: list[str]) -> set[str]:
        """Which of these decisions the ledger holds (one query, not every id of the event)."""
        rows = await self.conn.fetch(Q["decisions_held"], self.event_id, list(set(decision_ids)))
        return {r[0] for r in rows}

    # -- 5. refunds the provider and we disagree about --------------------------------------

    async def refunds(self, now: int) -> None:
        for c in list(self.charges.values()):
            if c.state != ChargeState.REFUNDING or c.parked or c.charge_id in self.repaired:
                continue  # (one this run just sent back is the refund queue's, not overdue)
            pa = self.attempts.get(c.attempt_id)
            if pa is not None and pa.refunded and not c.part_of:
                record = await self.record(c.attempt_id)
                if record is not None:
                    await self.reverse(c, record, "REFUND")
                await self.reload()
                repaired = self.charges[c.charge_id].state == ChargeState.REFUNDED
                self.found(CLASSES[5], c.charge_id, "provider refunded; recorded now", repaired)
            elif pa is not None and pa.net > 0 and now - c.decided_ms > self.grace_ms:
                await self.store.refund_result(
                    self.event_id, c.charge_id, refunded=False, retry_delay_ms=0
                )
                self.found(
                    CLASSES[5], c.charge_id, "no refund at the provider; re-requested", False
                )

    # -- 6. the money invariant -------------------------------------------------------------

    def money(self, fresh: dict[str, ProviderAttempt]) -> None:
        """Our charges as they are now against the provider's ledger read after them (money
        moves at the provider first): a refund the provider made that we have not recorded yet
        is on its way, not a discrepancy."""
        provider_net = sum(pa.net for pa in fresh.values())
        # Per attempt: what our charges say it holds, less any of its refunds that already
        # landed (a part of an order is one of several refunds of one attempt, ADR 0043).
        held: dict[str, list[int]] = {}
        for c in self.charges.values():
            if not c.parked:
                due = held.setdefault(c.attempt_id, [0, 0])
                due[0] += c.holds_money
                due[1] += c.holds_money if c.state == ChargeState.REFUNDING else 0

        def holds(attempt_id: str, ours: int, refunding: int) -> int:
            pa = fresh.get(attempt_id)
            landed = pa is not None and ours - refunding <= pa.net < ours
            return pa.net if landed and pa is not None else ours

        expected = sum(holds(a, *due) for a, due in held.items())
        parked = sum(c.holds_money for c in self.charges.values() if c.parked)
        self.report.provider_net, self.report.expected_net = provider_net, expected
        # A parked refund is money the provider's own records say is not this charge's: it is
        # an open exception, not part of what the provider holds for this event.
        if provider_net != expected:
            self.found(
                CLASSES[6],
                self.event_id,
                f"provider holds {provider_net}; our charges say {expected} ({parked} parked)",
                False,
            )

    def exceptions(self) -> None:
        ex = self.report.open_exceptions
        ex["seats_without_money"] = sum(h.state == HoldState.EXCEPTION for h in self.holds.values())
        ex["refunds_parked"] = sum(c.parked for c in self.charges.values())
        ex["refunds_pending"] = sum(
            c.state == ChargeState.REFUNDING and not c.parked for c in self.charges.values()
        )
        ex["alerts"] = self.alerts


async def reconcile_event(
    store: Store,
    conn: asyncpg.Connection,
    writer: LedgerWriter,
    entries: Sequence[MoneyMovement],
    event_id: str,
    *,
    provider: Provider,
    grace_ms: int,
) -> EventReport:
    run = _Event(
        store,
        conn,
        writer,
        provider,
        provider_attempts(entries, event_id),
        event_id,
        grace_ms,
    )
    now = await store.read.server_time_ms()
    last = await store.read.outbox_entries(event_id, count=1, newest=True)
    run.outbox_seen = last[0][0] if last else "0-0"
    await run.reload()
    await run.sales_lost_by_redis()
    await run.captured_without_seat()
    await run.refunds(now)
    # Decisions made so far (including the repairs above) reach the ledger before it is read.
    await run.outbox_in_ledger(await store.read.server_time_ms())
    ledger_holds = {r["hold_id"]: r for r in await conn.fetch(Q["event_holds"], event_id)}
    await run.seats_without_money(ledger_holds)
    ledger_charges = {r["charge_id"] for r in await conn.fetch(Q["event_charges"], event_id)}
    for hold_id in ledger_holds.keys() - run.holds.keys():
        run.found(CLASSES[4], hold_id, "hold", False)
    for charge_id in ledger_charges - run.charges.keys():
        run.found(CLASSES[4], charge_id, "charge", False)
    for where, figures in await stock_mismatches(store, conn, event_id):
        run.found(CLASSES[8], where, figures, False)
    await run.reload()
    run.money(provider_attempts(await provider_entries(provider), event_id))
    run.exceptions()
    return run.report


async def provider_entries(provider: Provider) -> list[MoneyMovement]:
    """Every money movement the provider holds for us, through the provider interface (the
    simulator's ledger, or Stripe's charges and disputes: ADR 0023)."""
    return await provider.money_movements()
