"""What `onsale chaos` prints and writes: the schedule before the run; after it, the faults
injected, the load held, what the provider did, the late-capture-to-refund bound, what the
buyers did, and the checks with their violations; and the same figures as JSON (`--json`), for
the test that runs the short version. Printing only; the run is loadtest/chaos/main.py."""

from collections import Counter
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table

from loadtest.chaos.checks import Check, Settled
from loadtest.chaos.faults import Chaos
from loadtest.chaos.load import Seen
from loadtest.chaos.schedule import KINDS, Fault, by_kind, fingerprint
from loadtest.demo.report import answered_to_refund_ms, pct, refund_delays_ms
from loadtest.demo.scenario import Burst


def schedule_table(seed: int, schedule: list[Fault], cluster: bool) -> Table:
    t = Table(title=f"Fault schedule of seed {seed} ({fingerprint(schedule)})")
    for col in ("#", "at (s after T0)", "fault"):
        t.add_column(col, justify="left" if col == "fault" else "right")
    for n, f in enumerate(schedule, 1):
        t.add_row(str(n), f"{f.at_s:.2f}", f.describe(cluster))
    return t


def bound(delays: list[float]) -> dict[str, float | int]:
    if not delays:
        return {"n": 0}
    return {
        "n": len(delays),
        "p50_ms": round(pct(delays, 50)),
        "p99_ms": round(pct(delays, 99)),
        "max_ms": round(max(delays)),
    }


def summary(
    cfg: dict[str, Any],
    schedule: list[Fault],
    chaos: Chaos,
    seen: Seen,
    burst: Burst,
    end: Settled,
    checks: list[Check],
    noticed: list[Check],
) -> dict[str, Any]:
    """The run in figures (the JSON written by --json)."""
    entries = end.provider.get("entries", [])
    every, contradicted = refund_delays_ms(entries)
    downs = [i.back_s - i.at_s for i in chaos.injected if i.back_s >= 0]
    return {
        "config": cfg,
        "schedule": {"fingerprint": fingerprint(schedule), "faults": [asdict(f) for f in schedule]},
        "faults_planned": by_kind(schedule),
        "faults_injected": dict(Counter(i.kind for i in chaos.injected if i.back_s >= 0)),
        "down_s": {"total": round(sum(downs), 1), "max": round(max(downs, default=0.0), 2)},
        "injected": [asdict(i) for i in chaos.injected],
        "unplanned_exits": [asdict(u) for u in chaos.unplanned],
        "recoveries": [asdict(r) for r in chaos.recoveries],
        # With --lose-redis: from an event first seen lost to it selling again, per rebuild.
        "lost_to_selling": bound(
            [(r.done_s - r.at_s) * 1000 for r in chaos.recoveries if r.ok and r.done_s >= 0]
        ),
        "load": {
            "requests": seen.requests,
            "answers": dict(seen.answers.most_common()),
            "server_errors": seen.server_errors,
            "internal_errors": seen.internal_errors,
            "given_up": seen.given_up,
            "t0_clients": sum(burst.statuses.values()),
            "t0_winners": len(burst.winners),
            "flow_arrivals": seen.arrivals,
            "flow_turned_away": seen.turned_away,
            "confirmations_told": len(seen.told),
            "journeys": dict(seen.journeys),
        },
        "provider": {
            "callbacks": end.provider.get("callbacks", {}),
            "deliveries": end.provider.get("deliveries", 0),
            "captures": sum(e["kind"] == "capture" for e in entries),
            "refunds": sum(e["kind"] == "refund" for e in entries),
            "captures_contradicting_a_decline": sum(bool(e.get("contradicted")) for e in entries),
        },
        "late_capture_to_refund": bound(every),
        "contradicting_capture_to_refund": bound(contradicted),
        "answered_callback_to_refund": bound(answered_to_refund_ms(entries)),
        "ledger_lag_reported": end.reported,  # XINFO's lag once the ledger holds everything
        "nightly": [{"unrepaired": n["unrepaired"], "found": n["total"]} for n in end.nightly],
        "checks": [asdict(c) for c in checks],
        "violations": sum(c.violations for c in checks),
        "findings": [asdict(c) for c in noticed],
    }


def rows_table(title: str, head: tuple[str, str], rows: list[tuple[str, object]]) -> Table:
    t = Table(title=title)
    t.add_column(head[0])
    t.add_column(head[1], justify="right")
    for label, value in rows:
        t.add_row(label, str(value))
    return t


def faults_table(s: dict[str, Any]) -> Table:
    t = Table(title="Faults injected (kill -9, restart after the seeded delay)")
    for col in ("fault", "planned", "injected and healed"):
        t.add_column(col, justify="left" if col == "fault" else "right")
    for kind in KINDS:
        t.add_row(kind, str(s["faults_planned"][kind]), str(s["faults_injected"].get(kind, 0)))
    t.add_row(
        "total", str(sum(s["faults_planned"].values())), str(sum(s["faults_injected"].values()))
    )
    t.add_row(
        "time down, total / longest (s)", "", f"{s['down_s']['total']} / {s['down_s']['max']}"
    )
    t.add_row("events rebuilt from the ledger", "", str(len(s["recoveries"])))
    lost = s["lost_to_selling"]
    if lost["n"]:
        t.add_row(
            "an event lost -> selling again, p50 / p99 / max (ms)",
            "",
            f"{lost['p50_ms']} / {lost['p99_ms']} / {lost['max_ms']}",
        )
    return t


def load_table(s: dict[str, Any], duration_s: float) -> Table:
    load = s["load"]
    rows: list[tuple[str, object]] = [
        ("requests (every try counted)", f"{load['requests']:,}"),
        ("requests/s over the load", f"{load['requests'] / duration_s:,.0f}"),
        ("T0 burst: clients / holds won", f"{load['t0_clients']:,} / {load['t0_winners']}"),
        (
            "flow buyers arrived / turned away",
            f"{load['flow_arrivals']:,} / {load['flow_turned_away']}",
        ),
        ("confirmations told to buyers", load["confirmations_told"]),
        (
            "5xx answers (retried) / other than 503",
            f"{load['server_errors']:,} / {load['internal_errors']}",
        ),
        ("requests never answered (client gave up)", load["given_up"]),
    ]
    rows += [(f"answer: {code}", f"{n:,}") for code, n in load["answers"].items()]
    return rows_table("Load held", ("measure", "value"), rows)


def provider_table(s: dict[str, Any]) -> Table:
    p = s["provider"]
    cb = p["callbacks"]
    return rows_table(
        "The misbehaving provider (its own books)",
        ("", "count"),
        [
            (
                "callbacks: events / extra copies / never sent",
                f"{cb.get('events', 0)} / {cb.get('duplicates', 0)} / {cb.get('lost', 0)}",
            ),
            ("deliveries tried (retries included)", p["deliveries"]),
            ("captures / refunds", f"{p['captures']} / {p['refunds']}"),
            ("captures after its own decline", p["captures_contradicting_a_decline"]),
        ],
    )


def bound_table(s: dict[str, Any]) -> Table:
    def row(label: str, b: dict[str, Any]) -> tuple[str, str]:
        if not b["n"]:
            return (label, "none this run")
        return (label, f"{b['n']}: {b['p50_ms']} / {b['p99_ms']} / {b['max_ms']}")

    return rows_table(
        "Late-capture-to-refund bound: capture at the provider -> our refund request",
        ("", "n: p50 / p99 / max ms"),
        [
            row("every capture given back", s["late_capture_to_refund"]),
            row("captures after the provider's own decline", s["contradicting_capture_to_refund"]),
            row("from our 2xx answer to its callback", s["answered_callback_to_refund"]),
        ],
    )


def checks_table(s: dict[str, Any]) -> Table:
    t = Table(title=f"Violations: {s['violations']}")
    for col in ("check", "violations", "detail"):
        t.add_column(col, justify="right" if col == "violations" else "left")
    for c in s["checks"]:
        mark = "[green]0[/]" if not c["violations"] else f"[red]{c['violations']}[/]"
        t.add_row(c["name"], mark, c["detail"])
    return t


def findings_table(s: dict[str, Any]) -> Table:
    t = Table(title="Findings: wrong, but no invariant broken (the exit code ignores them)")
    for col in ("finding", "count", "detail"):
        t.add_column(col, justify="right" if col == "count" else "left")
    for c in s["findings"]:
        mark = "0" if not c["violations"] else f"[yellow]{c['violations']}[/]"
        t.add_row(c["name"], mark, c["detail"])
    return t


def report(console: Console, s: dict[str, Any], duration_s: float) -> int:
    """Print every table; the exit code: 0 when there is no violation, else 1."""
    console.print(faults_table(s))
    console.print(load_table(s, duration_s))
    console.print(
        rows_table(
            "What the buyers did", ("journey", "buyers"), sorted(s["load"]["journeys"].items())
        )
    )
    console.print(provider_table(s))
    console.print(bound_table(s))
    console.print(checks_table(s))
    console.print(findings_table(s))
    return 0 if s["violations"] == 0 else 1
