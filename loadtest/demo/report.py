"""The demo's tables and its verdict: what the crowd got at T0, what the winners did, where seats
and money ended, what the nightly reconciliation found, how long a capture we gave back waited
for its refund, the ledger, and the invariants. Printing only; the run is loadtest/demo/main.py."""

import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from engine.model.audit import AuditReport, Invariant
from loadtest.demo.ledger import LedgerView
from loadtest.demo.scenario import PRICE, Burst

Check = tuple[str, bool]  # (what is checked, whether it holds)


@dataclass(frozen=True)
class Outcome:
    """Everything the report reads, gathered once the run settled."""

    event_id: str
    clients: int
    burst: Burst
    kinds: Counter[str]  # what the winners did
    late_sold: int  # seats the second wave bought
    avail: dict[str, Any]  # GET /v1/events/{event_id}
    provider_ledger: dict[str, Any]  # the simulator's GET /v1/ledger
    audit: AuditReport
    settled: bool
    alive: bool
    metrics: str  # the API's /metrics text
    ledger_view: LedgerView | None  # None without a ledger
    should_hold: int  # what the provider should hold, by our charges
    nightly: dict[str, Any] | None  # the nightly reconciliation's JSON report

    @property
    def captures(self) -> list[dict[str, Any]]:
        return [e for e in self.provider_ledger["entries"] if e["kind"] == "capture"]

    @property
    def refunds(self) -> list[dict[str, Any]]:
        return [e for e in self.provider_ledger["entries"] if e["kind"] == "refund"]


def pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def table(title: str, rows: list[tuple[str, object]], head: tuple[str, str]) -> Table:
    t = Table(title=title)
    t.add_column(head[0])
    t.add_column(head[1], justify="right")
    for label, value in rows:
        t.add_row(label, str(value))
    return t


def refunds_we_asked(entries: list[dict[str, Any]]) -> dict[str, float]:
    """From the provider's ledger: when we asked to refund each attempt (by attempt id)."""
    return {
        e["attempt_id"]: e["at_s"]
        for e in entries
        if e["kind"] == "refund" and e.get("requested_by") == "merchant"
    }


def refund_delays_ms(entries: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """From the provider's ledger: for every capture we gave back, the time from the capture to
    our refund request; (all of them, those contradicting the provider's own decline)."""
    refunds = refunds_we_asked(entries)
    every, contradicted = [], []
    for e in entries:
        if e["kind"] == "capture" and e["attempt_id"] in refunds:
            delay = (refunds[e["attempt_id"]] - e["at_s"]) * 1000
            every.append(delay)
            if e.get("contradicted"):
                contradicted.append(delay)
    return every, contradicted


def answered_to_refund_ms(entries: list[dict[str, Any]]) -> list[float]:
    """For every capture we gave back whose callback we answered 2xx: the time from our first
    2xx answer to our refund request (0 when the refund was asked first, e.g. found by
    reconciliation). The part of the bound that is ours once a callback is delivered."""
    refunds = refunds_we_asked(entries)
    return [
        max(0.0, (refunds[e["attempt_id"]] - e["answered_at_s"]) * 1000)
        for e in entries
        if e["kind"] == "capture" and e["attempt_id"] in refunds and "answered_at_s" in e
    ]


def refund_bound_table(entries: list[dict[str, Any]]) -> Table:
    every, contradicted = refund_delays_ms(entries)
    return table(
        "Captures given back: capture at the provider -> our refund request",
        [
            bound_row("every capture refunded (n: p50 / p99 / max ms)", every),
            bound_row("captures after the provider's own decline", contradicted),
            bound_row("from our 2xx answer to its callback", answered_to_refund_ms(entries)),
        ],
        ("", "value"),
    )


def bound_row(label: str, delays: list[float]) -> tuple[str, str]:
    if not delays:
        return (label, "none this run")
    return (
        label,
        f"{len(delays)}: {pct(delays, 50):.0f} / {pct(delays, 99):.0f} / {max(delays):.0f}",
    )


def burst_table(clients: int, result: Burst) -> Table:
    return table(
        "T0 burst over HTTP (one client process, 200 connections)",
        [
            ("clients", f"{clients:,}"),
            *((f"answer: {k}", f"{v:,}") for k, v in sorted(result.statuses.items())),
            (
                "client-observed latency p50 / p99 / max (ms, incl. client queue)",
                f"{pct(result.latencies_ms, 50):.0f} / "
                f"{pct(result.latencies_ms, 99):.0f} / {max(result.latencies_ms):.0f}",
            ),
            (
                "winning holds by seats held",
                ", ".join(f"{n} seats: {k}" for n, k in sorted(result.parties.items())),
            ),
            (
                "winning holds that were parties / seats they took",
                f"{result.party_holds} of {len(result.winners)} holds / "
                f"{result.party_seats} of {sum(n * k for n, k in result.parties.items())} seats",
            ),
            *(
                (f"won / asked at T0: {kind}", f"{result.won[kind]:,} / {asked:,}")
                for kind, asked in sorted(result.asked.items())
            ),
            ("last seat held at (ms after T0)", f"{result.last_seat_ms:.0f}"),
            ("every client answered at (ms after T0)", f"{result.all_answered_ms:.0f}"),
        ],
        ("measure", "value"),
    )


def winners_table(kinds: Counter[str], late_sold: int) -> Table:
    return table(
        "What the winners did",
        [
            *sorted(kinds.items()),
            ("second wave: sold-out fans who got a returned seat", late_sold),
        ],
        ("behaviour", "buyers"),
    )


def money_table(o: Outcome) -> Table:
    c, avail, ledger = o.audit.counts, o.avail, o.provider_ledger
    return table(
        "Where seats and money ended",
        [
            (
                "seats sold / free / held / blocked",
                f"{avail['sold']} / {avail['free']} / {avail['held']} / {avail['blocked']}",
            ),
            ("provider: captures / refunds", f"{len(o.captures)} / {len(o.refunds)}"),
            (
                "engine: winning charges / refunded / refund pending",
                f"{c['captured_winners']} / {c['refunded']} / {c['refunding']}",
            ),
            (
                "money kept (provider captured - refunded)",
                f"{(ledger['captured'] - ledger['refunded']) / 100:.2f}",
            ),
            ("callback deliveries (duplicates included)", ledger["deliveries"]),
        ],
        ("", "count"),
    )


def nightly_table(nightly: dict[str, Any]) -> Table:
    found = [(cls, len(rows)) for cls, rows in nightly["by_class"].items() if rows]
    return table(
        "Nightly reconciliation at the end (what no callback told us)",
        [
            *((f"found: {cls}", n) for cls, n in found),
            ("left unrepaired", nightly["unrepaired"]),
        ],
        ("", "count"),
    )


def ledger_table(view: LedgerView) -> Table:
    samples = view.samples
    rates = [
        (b[1] - a[1]) / (b[0] - a[0])
        for a, b in zip(samples.written, samples.written[10:], strict=False)
        if b[0] > a[0]
    ]
    return table(
        "Ledger (write-behind into PostgreSQL, sampled every 100 ms)",
        [
            ("decisions in the outbox / in the ledger", f"{view.outbox} / {view.decisions}"),
            ("peak rows/s (1 s window)", f"{max(rates, default=0.0):,.0f}"),
            (
                "lag p99 / max (s)",
                f"{pct(samples.lag_seconds or [0.0], 99):.2f} / "
                f"{max(samples.lag_seconds, default=0.0):.2f}",
            ),
            ("lag max (entries)", f"{max(samples.lag_entries, default=0.0):.0f}"),
        ],
        ("measure", "value"),
    )


def money_checks(
    provider_ledger: dict[str, Any], counts: dict[str, int], should_hold: int
) -> list[Check]:
    """The money against the provider's own ledger: every capture it made is a winner of ours
    or given back, every refund we recorded it made, and it holds what our charges say."""
    entries, c = provider_ledger["entries"], counts
    captures = sum(e["kind"] == "capture" for e in entries)
    refunds = sum(e["kind"] == "refund" for e in entries)
    return [
        (
            "every provider capture is a winner or refunded",
            captures == c["captured_winners"] + c["refunded"] + c["refunding"],
        ),
        ("every refund we recorded, the provider made", refunds == c["refunded"]),
        (
            "provider holds what our charges say (money invariant)",
            provider_ledger["net"] == should_hold,
        ),
    ]


def health_checks(
    audit: AuditReport, nightly: dict[str, Any] | None, settled: bool, alive: bool
) -> list[Check]:
    """The engine's own audit, the nightly reconciliation, and the run's end state."""
    return [
        (
            "nightly reconciliation left nothing unrepaired",
            nightly is None or nightly["unrepaired"] == 0,
        ),
        (
            "one terminal outbox record per hold and charge",
            not audit.of(Invariant.ONE_TERMINAL_RECORD),
        ),
        ("full audit (docs/invariants.md)", audit.ok),
        ("everything settled (no live holds, refunds or callbacks pending)", settled),
        ("API, worker and simulator still running", alive),
    ]


def invariant_checks(o: Outcome) -> list[Check]:
    """The engine's audit, the money against the provider's ledger, and the run's health."""
    c, avail, ledger, audit = o.audit.counts, o.avail, o.provider_ledger, o.audit
    statuses = o.burst.statuses
    server_errors = sum(
        v for k, v in statuses.items() if k.startswith(("5", "transport")) or k == "internal"
    )
    return [
        (
            "no seat sold twice; counters agree with the seat map",
            not audit.of(Invariant.NEVER_OVERSELL, Invariant.COUNTERS_AGREE, Invariant.SEAT_MAP),
        ),
        (
            "seats sold = seats of the holds a captured charge won",
            avail["sold"] == c["seats_confirmed"],
        ),
        *money_checks(ledger, c, o.should_hold),
        (
            "money kept = seats sold x price",
            ledger["captured"] - ledger["refunded"] == avail["sold"] * PRICE,
        ),
        (
            "every client answered, no 5xx, no transport error",
            server_errors == 0 and sum(statuses.values()) == o.clients,
        ),
        *health_checks(audit, o.nightly, o.settled, o.alive),
    ]


def ledger_checks(view: LedgerView, sold: int) -> list[Check]:
    return [
        ("ledger holds every decision of the outbox", view.decisions == view.outbox),
        ("ledger's confirmed seats = seats sold", view.confirmed == sold),
    ]


def invariants_table(checks: list[Check]) -> Table:
    t = Table(title="Invariants")
    t.add_column("check")
    t.add_column("result")
    for label, ok in checks:
        t.add_row(label, "[green]ok[/]" if ok else "[red]VIOLATED[/]")
    return t


def report(console: Console, o: Outcome) -> int:
    """Print every table; the exit code: 0 when every invariant holds, else 1."""
    console.print(burst_table(o.clients, o.burst))
    console.print(winners_table(o.kinds, o.late_sold))
    console.print(money_table(o))
    if o.nightly is not None:
        console.print(nightly_table(o.nightly))
    console.print(refund_bound_table(o.provider_ledger["entries"]))
    checks = invariant_checks(o)
    if o.ledger_view is not None:
        console.print(ledger_table(o.ledger_view))
        checks += ledger_checks(o.ledger_view, o.avail["sold"])
    console.print(invariants_table(checks))
    for v in o.audit.violations[:20]:
        console.print(f"[red]violation:[/] {v}")
    series = sum(1 for line in o.metrics.splitlines() if line.startswith("onsale_"))
    console.print(f"event {o.event_id}; API metrics at the end: {series} series")
    return 0 if all(ok for _l, ok in checks) else 1
