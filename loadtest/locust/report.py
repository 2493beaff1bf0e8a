"""The tables `python -m loadtest.locust.main` prints after a run: Locust's own request stats, the
answers the buyers got by request and code, what the run did (users, spawn, T0, journeys), and
the invariants' verdict. Printing only; the run is loadtest/locust/main.py."""

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from loadtest.devstack.invariants import Verdict


def print_report(
    console: Console,
    args: argparse.Namespace,
    out: Path,
    stats: list[dict[str, str]],
    report: dict[str, Any],
    verdict: Verdict,
) -> None:
    console.print(stats_table(stats))
    console.print(answers_table(report))
    console.print(run_table(args, report))
    console.print(verdict.table("Invariants (after the run)"))
    console.print(f"reports: {out}/{args.scenario}_stats.csv, {out}/{args.scenario}.html")


def stats_table(rows: list[dict[str, str]]) -> Table:
    t = Table(title="Locust: requests (clear refusals count as successes)")
    t.add_column("request")
    for name in ("count", "failures", "p50 ms", "p95 ms", "p99 ms", "max ms", "req/s"):
        t.add_column(name, justify="right")
    for r in rows:
        t.add_row(
            f"{r['Type']} {r['Name']}".strip(),
            r["Request Count"],
            r["Failure Count"],
            r["50%"],
            r["95%"],
            r["99%"],
            f"{float(r['Max Response Time']):.0f}",
            f"{float(r['Requests/s']):.1f}",
        )
    return t


def answers_table(report: dict[str, Any]) -> Table:
    t = Table(title="Answers by request and code")
    t.add_column("request")
    t.add_column("code")
    t.add_column("count", justify="right")
    for name, codes in sorted(report.get("answers", {}).items()):
        for code, n in sorted(codes.items()):
            t.add_row(name, code, f"{n:,}")
    return t


def run_table(args: argparse.Namespace, report: dict[str, Any]) -> Table:
    t = Table(title=f"Locust {args.scenario}: {args.users:,} users on {args.seats} seats")
    t.add_column("measure")
    t.add_column("value", justify="right")

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:,.0f}"

    spawn_s = report.get("spawn_s")
    t.add_row("users started / target", f"{report.get('users_started', 0):,} / {args.users:,}")
    t.add_row("spawn rate asked (users/s)", f"{args.spawn_rate or args.users:,.0f}")
    if spawn_s is not None:
        t.add_row("every user spawned after (ms)", ms(spawn_s * 1000))
        t.add_row(
            "users / time to spawn them all (users/s)",
            f"{report.get('users_target', 0) / spawn_s:,.0f}" if spawn_s > 0 else "-",
        )
    if args.scenario == "burst":
        gate = report.get("gate_opened_s")
        t.add_row(
            "T0: all logged in, gate opened (ms after start)", ms(gate * 1000 if gate else None)
        )
        t.add_row("last claim sent (ms after T0)", ms(report.get("last_sent_after_t0_ms")))
        t.add_row("last claim answered (ms after T0)", ms(report.get("last_answer_after_t0_ms")))
    if "cpu_s" in report:
        t.add_row(
            "Locust process: CPU s / peak RSS MiB",
            f"{report['cpu_s']:.1f} / {report['peak_rss_mb']:.0f}",
        )
    for kind, n in sorted(report.get("journeys", {}).items()):
        t.add_row(f"journey: {kind}", f"{n:,}")
    for outcome, n in sorted(report.get("outcomes", {}).items()):
        t.add_row(f"ended: {outcome}", f"{n:,}")
    return t
