"""The retail demo's tables and its verdict: what the shoppers did and were answered, the
corrections made during the sale, where every SKU's units ended at each warehouse, the money
and the captures that came after their cart's deadline, the ledger, and the invariants.
Printing only; the run is loadtest/demo/retail.py. The seat demo's helpers are shared."""

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from engine.model.audit import AuditReport, Invariant
from loadtest.demo.ledger import LedgerView, StockLedger
from loadtest.demo.report import (
    Check,
    health_checks,
    invariants_table,
    ledger_table,
    money_checks,
    nightly_table,
    pct,
    refund_bound_table,
    table,
)
from loadtest.demo.retail_shoppers import LAST_MOMENT, Receipt, Shopping
from loadtest.demo.retail_stock import (
    CATALOGUE,
    COUNTERS_SHOWN,
    Corrected,
    Counters,
    expected_on_hand,
)

NAMES = {p.sku: p.name for p in CATALOGUE}


@dataclass(frozen=True)
class RetailOutcome:
    """Everything the report reads, gathered once the run settled."""

    event_id: str
    shoppers: int
    shopping: Shopping
    corrections: list[Corrected]
    initial: dict[str, int]  # '<sku>@<location>' -> initial count
    stock: Counters  # GET /v1/events/{event_id}/stock at the end
    receipts: list[Receipt]
    provider_ledger: dict[str, Any]
    audit: AuditReport
    should_hold: int  # what the provider should hold, by our charges
    confirmed_holds: int  # CONFIRMED holds in Redis
    settled: bool
    alive: bool
    nightly: dict[str, Any] | None
    ledger_view: LedgerView | None = None
    stock_ledger: StockLedger | None = None

    @property
    def orders(self) -> list[dict[str, Any]]:
        return [r.order for r in self.receipts if r.state == "CONFIRMED" and r.order]

    def ordered_units(self) -> Counter[str]:
        """'<sku>@<location>' -> units of the confirmed orders, as the shoppers read them."""
        units: Counter[str] = Counter()
        for order in self.orders:
            for x in order["lines"]:
                units[f"{x['sku']}@{x['location']}"] += int(x["quantity"])
        return units


def shoppers_table(o: RetailOutcome) -> Table:
    s = o.shopping
    return table(
        f"What the {o.shoppers:,} shoppers did",
        [
            *((f"cart held, then: {kind}", n) for kind, n in sorted(s.journeys.items())),
            *((f"no cart: {code}", n) for code, n in sorted(s.refused.items())),
            ("changed the cart after a line ran out, claimed again", s.retried),
            *((f"lines held: {where}", n) for where, n in sorted(s.lines.items())),
        ],
        ("", "shoppers"),
    )


def requests_table(s: Shopping) -> Table:
    t = Table(title="The shoppers' requests over HTTP (latency as the client saw it)")
    t.add_column("request")
    t.add_column("answers")
    t.add_column("p50 / p99 ms", justify="right")
    for name, answers in sorted(s.answers.items()):
        lat = s.latencies_ms[name]
        said = ", ".join(f"{code} {n:,}" for code, n in answers.most_common())
        t.add_row(name, said, f"{pct(lat, 50):.0f} / {pct(lat, 99):.0f}")
    return t


def corrections_table(corrections: list[Corrected]) -> Table:
    t = Table(title="Stock corrections in the middle of the sale (admin API)")
    for name in ("correction", "SKU @ location", "change", "answer"):
        t.add_column(name)
    for c in corrections:
        t.add_row(c.label, c.where, f"{int(c.body['adjust']):+d}", c.said)
    return t


def stock_table(o: RetailOutcome) -> Table:
    t = Table(
        title="Stock per SKU and location at the end (GET /v1/events/{e}/stock)",
        caption="check: available + held + blocked + sold = on hand, and sold = the units of "
        "the confirmed orders",
    )
    t.add_column("SKU @ location")
    t.add_column("part")
    for name in ("initial", *COUNTERS_SHOWN, "orders' units"):
        t.add_column(name.replace("_", " "), justify="right")
    t.add_column("check")
    ordered = o.ordered_units()
    for where, c in sorted(o.stock.items()):
        adds_up = sum(c[k] for k in ("available", "held", "blocked", "sold")) == c["on_hand"]
        ok = adds_up and c["sold"] == ordered[where]
        t.add_row(
            where,
            NAMES.get(where.partition("@")[0], ""),
            str(o.initial.get(where, 0)),
            *(str(c[k]) for k in COUNTERS_SHOWN),
            str(ordered[where]),
            "[green]ok[/]" if ok else "[red]VIOLATED[/]",
        )
    return t


@dataclass
class LateCaptures:
    """The provider's captures, placed against their cart's deadline."""

    late: int = 0  # captured at or after the cart's deadline
    late_refunded: int = 0
    late_confirmed: int = 0  # a late capture that confirmed a cart (must be 0)
    contradicted: int = 0  # captured after the provider's own decline
    contradicted_refunded: int = 0
    unknown: int = 0  # of a charge on no cart a shopper held (must be 0)
    unresolved: list[str] = field(default_factory=list)  # what a failed check is about


def late_captures(o: RetailOutcome) -> LateCaptures:
    entries = o.provider_ledger["entries"]
    refunded = {e["attempt_id"] for e in entries if e["kind"] == "refund"}
    by_charge = {ch["charge_id"]: (r, ch) for r in o.receipts for ch in r.charges}
    out = LateCaptures()
    for e in entries:
        if e["kind"] != "capture":
            continue
        found = by_charge.get(e["idempotency_key"])
        if found is None:
            out.unknown += 1
            out.unresolved.append(f"capture of {e['idempotency_key']}: on no cart read back")
            continue
        r, ch = found
        # Given back: the provider refunded the attempt (the charge itself may read FAILED when
        # reconciliation found no attempt before a slow create reached the provider: the
        # engine then refunds the attempt as a charge of its own).
        given_back = e["attempt_id"] in refunded
        won = bool(r.order and r.order.get("charge_id") == ch["charge_id"])
        late = e["at_s"] * 1000 >= r.expires_ms
        out.contradicted += bool(e.get("contradicted"))
        out.contradicted_refunded += bool(e.get("contradicted")) and given_back
        out.late += late
        out.late_refunded += late and given_back
        out.late_confirmed += late and won
        if (late or e.get("contradicted")) and not given_back:
            out.unresolved.append(
                f"capture of {ch['charge_id']} ({e['attempt_id']}) "
                f"{e['at_s'] * 1000 - r.expires_ms:+.0f} ms after its cart's deadline: cart "
                f"{r.hold_id} {r.state}, charge {ch['state']}, winner {won}, provider refunded "
                f"{e['attempt_id'] in refunded}"
            )
    return out


def money_table(o: RetailOutcome, late: LateCaptures) -> Table:
    c, ledger = o.audit.counts, o.provider_ledger
    captures = sum(e["kind"] == "capture" for e in ledger["entries"])
    refunds = sum(e["kind"] == "refund" for e in ledger["entries"])
    states = Counter(r.state for r in o.receipts)
    last = Counter(r.state for r in o.receipts if o.shopping.journey_of.get(r.login) == LAST_MOMENT)
    callbacks = ledger.get("callbacks", {})
    return table(
        "Carts, money and late captures",
        [
            ("carts by end state", ", ".join(f"{k} {n}" for k, n in sorted(states.items()))),
            (
                "confirmed orders / units sold",
                f"{len(o.orders)} / {sum(o.ordered_units().values())}",
            ),
            ("provider: captures / refunds", f"{captures} / {refunds}"),
            (
                "engine: winning charges / refunded / refund pending",
                f"{c['captured_winners']} / {c['refunded']} / {c['refunding']}",
            ),
            (
                "money kept (provider captured - refunded) / confirmed orders' total",
                f"{(ledger['captured'] - ledger['refunded']) / 100:.2f} / "
                f"{sum(int(x['amount']) for x in o.orders) / 100:.2f}",
            ),
            (
                "captures after their cart's deadline: refunded / confirmed a cart",
                f"{late.late}: {late.late_refunded} / {late.late_confirmed}",
            ),
            (
                "captures after the provider's own decline: refunded",
                f"{late.contradicted}: {late.contradicted_refunded}",
            ),
            (
                "paid in the cart's last moments: confirmed / expired first",
                f"{last['CONFIRMED']} / {last['EXPIRED']}",
            ),
            (
                "callbacks: events / duplicate deliveries / lost (reconciliation finds them)",
                f"{callbacks.get('events', '?')} / {callbacks.get('duplicates', '?')} / "
                f"{callbacks.get('lost', '?')}",
            ),
        ],
        ("", "count"),
    )


def stock_checks(o: RetailOutcome) -> list[Check]:
    view, ordered = o.stock, o.ordered_units()
    expected = expected_on_hand(o.initial, o.corrections)
    by_label = {c.body["correction_id"]: c for c in o.corrections if c.status != 200}
    replays = [c for c in o.corrections if c.status == 200]
    write_off = by_label.get("write-off-1")
    return [
        (
            "per SKU and location: available + held + blocked + sold = on hand, none below zero",
            not o.audit.of(Invariant.STOCK_AGREES, Invariant.COUNTERS_AGREE)
            and all(
                min(c.values()) >= 0
                and c["available"] + c["held"] + c["blocked"] + c["sold"] == c["on_hand"]
                for c in view.values()
            ),
        ),
        (
            "per SKU and location: sold = units of the confirmed orders",
            all(c["sold"] == ordered[w] for w, c in view.items()) and set(ordered) <= set(view),
        ),
        (
            "units sold = units of the holds a captured charge won",
            sum(c["sold"] for c in view.values()) == o.audit.counts["seats_confirmed"],
        ),
        (
            "on hand = initial counts + corrections applied, per SKU and location",
            {w: c["on_hand"] for w, c in view.items()} == expected,
        ),
        (
            "a write-off below what carts and sales own is refused (stock_below_zero)",
            write_off is not None and write_off.code == "stock_below_zero",
        ),
        (
            "a correction sent again is answered as a replay, applied once",
            bool(replays) and all(c.answer.get("replay") is True for c in replays),
        ),
    ]


def retail_checks(o: RetailOutcome, late: LateCaptures) -> list[Check]:
    ledger, c = o.provider_ledger, o.audit.counts
    errors = sum(
        n
        for answers in o.shopping.answers.values()
        for code, n in answers.items()
        if code.startswith(("5", "transport")) or code == "internal"
    )
    return [
        *stock_checks(o),
        (
            "every capture after its cart's deadline refunded, none confirmed a cart",
            late.late == late.late_refunded and late.late_confirmed == 0,
        ),
        ("every capture is of a cart a shopper held", late.unknown == 0),
        *money_checks(ledger, c, o.should_hold),
        (
            "money kept = sum of the confirmed orders (captured - refunded = winning charges)",
            ledger["captured"] - ledger["refunded"] == sum(int(x["amount"]) for x in o.orders),
        ),
        ("no 5xx, no transport error on the shoppers' requests", errors == 0),
        *health_checks(o.audit, o.nightly, o.settled, o.alive),
    ]


def ledger_checks(o: RetailOutcome, view: LedgerView, sl: StockLedger) -> list[Check]:
    applied = sum(c.applied for c in o.corrections)
    return [
        ("ledger holds every decision of the outbox", view.decisions == view.outbox),
        (
            "ledger: stock_corrections rows = corrections applied (initial counts included)",
            sl.corrections == len(o.initial) + applied,
        ),
        (
            "ledger: on hand per SKU and location = the sum of its corrections = Redis",
            sl.on_hand == {w: c["on_hand"] for w, c in o.stock.items()},
        ),
        (
            "ledger: confirmed holds = confirmed holds in Redis",
            sl.confirmed_holds == o.confirmed_holds,
        ),
        (
            "ledger: units sold per SKU and location = Redis",
            sl.sold == {w: c["sold"] for w, c in o.stock.items() if c["sold"]},
        ),
    ]


def report(console: Console, o: RetailOutcome) -> int:
    """Print every table; the exit code: 0 when every invariant holds, else 1."""
    late = late_captures(o)
    console.print(shoppers_table(o))
    console.print(requests_table(o.shopping))
    console.print(corrections_table(o.corrections))
    console.print(stock_table(o))
    console.print(money_table(o, late))
    if o.nightly is not None:
        console.print(nightly_table(o.nightly))
    console.print(refund_bound_table(o.provider_ledger["entries"]))
    checks = retail_checks(o, late)
    if o.ledger_view is not None and o.stock_ledger is not None:
        console.print(ledger_table(o.ledger_view))
        checks += ledger_checks(o, o.ledger_view, o.stock_ledger)
    console.print(invariants_table(checks))
    for v in o.audit.violations[:20]:
        console.print(f"[red]violation:[/] {v}")
    for line in late.unresolved[:20]:
        console.print(f"[red]not given back:[/] {line}")
    console.print(f"event {o.event_id}")
    return 0 if all(ok for _l, ok in checks) else 1
