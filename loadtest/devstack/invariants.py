"""The check that runs after every load test: from the engine's own state (and the ledger when
there is one) and the clients' answers."""

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.table import Table

from engine.model.audit import AuditReport, Invariant
from engine.model.states import HoldState
from engine.store import Store

# Answers a client may get in a burst: a hold, or a clear refusal it can act on.
CLEAR_CODES = {
    "201",
    "200",
    "sold_out",
    "not_enough_seats",  # a party larger than the seats still free
    "seat_taken",
    "sale_not_open",
    "charge_in_flight",
    "store_unavailable",
}


@dataclass
class Verdict:
    checks: list[tuple[str, bool, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(ok for _n, ok, _d in self.checks)

    def table(self, title: str) -> Table:
        t = Table(title=title)
        for col in ("check", "result", "detail"):
            t.add_column(col)
        for name, ok, detail in self.checks:
            t.add_row(name, "[green]ok[/]" if ok else "[red]VIOLATED[/]", detail)
        return t


async def check_burst(
    store: Store, event_id: str, answers: Counter[str], clients: int, seats_total: int
) -> Verdict:
    v = Verdict()
    avail = await store.read.availability(event_id)
    report = await store.read.audit(event_id)
    held_or_sold = avail.held + avail.sold + avail.blocked
    v.checks.append(
        ("seats taken <= seats", held_or_sold <= seats_total, f"{held_or_sold} of {seats_total}")
    )
    v.checks.append(
        (
            "no seat twice, counters agree (audit)",
            report.ok,
            "; ".join(map(str, report.violations[:3])) or "clean",
        )
    )
    _check_answers(v, answers, clients)
    return v


def check_burst_pg(
    audit: Mapping[str, int], answers: Counter[str], clients: int, seats_total: int
) -> Verdict:
    """The same checks on the PostgreSQL baseline, from its audit
    (loadtest/pg_baseline/server.py), or on the bare claim from its counts (its hash of
    owners holds each seat once by construction)."""
    v = Verdict()
    held = audit["held"]
    v.checks.append(
        (
            "seats taken <= seats",
            held <= seats_total and audit["seats"] == seats_total,
            f"{held} of {audit['seats']} (set up {seats_total})",
        )
    )
    agree = held == audit["holds"] == audit["distinct_seats_held"] == audit["holds_matching_seat"]
    v.checks.append(
        (
            "no seat twice, holds and seats agree (audit)",
            agree,
            "clean"
            if agree
            else f"seats held {held}, holds {audit['holds']}, distinct seats in holds "
            f"{audit['distinct_seats_held']}, holds matching their seat "
            f"{audit['holds_matching_seat']}",
        )
    )
    won = answers.get("201", 0)
    v.checks.append(
        ("one 201 per hold", won == audit["holds"], f"{won} x 201, {audit['holds']} holds")
    )
    _check_answers(v, answers, clients)
    return v


def _check_answers(v: Verdict, answers: Counter[str], clients: int) -> None:
    answered = sum(answers.values())
    v.checks.append(("every client answered", answered == clients, f"{answered} of {clients}"))
    unclear = {k: n for k, n in answers.items() if k not in CLEAR_CODES}
    v.checks.append(("no 5xx, no timeout, no unclear answer", not unclear, str(unclear or "none")))


# Answers a buyer may get in the purchase flow: success, or a refusal it can act on.
FLOW_CLEAR_CODES = CLEAR_CODES | {"202", "hold_expired", "already_confirmed"}


@dataclass(frozen=True)
class FlowSeen:
    """What the load generator saw during a purchase-flow run."""

    answers: Counter[str]  # every answer, by code
    confirmed_seats: list[str]  # seats the buyers saw CONFIRMED (one entry per seat)
    surprises: list[str]  # the engine accepted something it must refuse
    settled: bool  # no charge in flight, no refund pending, no callback pending at the end


async def check_flow(
    store: Store,
    event_id: str,
    seats_total: int,
    price_minor: int,
    provider_ledger: dict[str, Any],
    seen: FlowSeen,
) -> Verdict:
    """The engine's state against docs/invariants.md, the money against the provider's own
    ledger (GET /v1/ledger of the simulator), and what the buyers saw against both."""
    v = Verdict()
    avail = await store.read.availability(event_id)
    report = await store.read.audit(event_id)
    _check_engine_state(v, report, avail.held + avail.sold + avail.blocked, seats_total)
    v.checks.append(("everything settled before the checks", seen.settled, ""))
    should_hold = sum(ch.holds_money for ch in await store.read.scan_charges(event_id))
    _check_money(v, report.counts, provider_ledger, should_hold, avail.sold, price_minor)
    sold_seats = {
        h.listing
        for h in (await store.read.holds(event_id)).values()
        if h.state == HoldState.CONFIRMED
    }
    _check_seen(v, seen, sold_seats)
    return v


def _check_engine_state(v: Verdict, report: AuditReport, taken: int, seats_total: int) -> None:
    """No more seats taken than there are, none sold twice, none sold unpaid, a clean audit."""
    c = report.counts
    v.checks.append(("seats taken <= seats", taken <= seats_total, f"{taken} of {seats_total}"))
    sold_twice = report.of(Invariant.NEVER_OVERSELL)
    v.checks.append(
        ("no seat sold twice", not sold_twice, "; ".join(map(str, sold_twice[:3])) or "none")
    )
    unpaid = report.of(Invariant.SEAT_HAS_MONEY)
    v.checks.append(
        (
            "no CONFIRMED hold without a captured charge",
            not unpaid,
            "; ".join(map(str, unpaid[:3])) or f"{c['captured_winners']} captured winners",
        )
    )
    v.checks.append(
        (
            "full audit (docs/invariants.md)",
            report.ok,
            "; ".join(map(str, report.violations[:3])) or "clean",
        )
    )


def _check_money(
    v: Verdict,
    c: Mapping[str, int],
    provider_ledger: dict[str, Any],
    should_hold: int,
    sold: int,
    price_minor: int,
) -> None:
    """The provider's money movements against the engine's charges and the seats sold."""
    captures = [e for e in provider_ledger["entries"] if e["kind"] == "capture"]
    refunds = [e for e in provider_ledger["entries"] if e["kind"] == "refund"]
    v.checks.append(
        (
            "every provider capture is a winner or refunded",
            len(captures) == c["captured_winners"] + c["refunded"] + c["refunding"],
            f"{len(captures)} captures; {c['captured_winners']} winners, "
            f"{c['refunded']} refunded, {c['refunding']} refunding",
        )
    )
    v.checks.append(
        (
            "every refund recorded was made by the provider",
            len(refunds) == c["refunded"],
            f"provider {len(refunds)}, engine {c['refunded']}",
        )
    )
    v.checks.append(
        (
            "the provider holds what our charges say (money invariant)",
            provider_ledger["net"] == should_hold,
            f"provider net {provider_ledger['net']}, charges say {should_hold}",
        )
    )
    kept = provider_ledger["captured"] - provider_ledger["refunded"]
    v.checks.append(
        (
            "money kept = seats sold x price",
            kept == sold * price_minor,
            f"{kept} kept, {sold} sold x {price_minor}",
        )
    )


def _check_seen(v: Verdict, seen: FlowSeen, sold_seats: set[str]) -> None:
    """What the buyers saw: their CONFIRMED seats sold once each, every refusal where one was
    due, and no answer they could not act on."""
    not_sold = sorted(set(seen.confirmed_seats) - sold_seats)
    v.checks.append(
        (
            "seats buyers saw CONFIRMED are sold, each once",
            not not_sold and len(set(seen.confirmed_seats)) == len(seen.confirmed_seats),
            f"{len(seen.confirmed_seats)} seen, {len(sold_seats)} sold; not sold: {not_sold[:3]}",
        )
    )
    v.checks.append(
        (
            "the engine refused what it must refuse",
            not seen.surprises,
            "; ".join(seen.surprises[:3]) or "none",
        )
    )
    unclear = {k: n for k, n in seen.answers.items() if k not in FLOW_CLEAR_CODES}
    v.checks.append(("no 5xx, no timeout, no unclear answer", not unclear, str(unclear or "none")))
