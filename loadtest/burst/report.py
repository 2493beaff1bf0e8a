"""The T0 burst's result and report (`python -m loadtest.burst.main`): answers, timings from the
release instant, the trivial burst it is compared with, the durability it ran at, the checks."""

import argparse
import statistics
from collections import Counter
from typing import Any

from rich.console import Console
from rich.table import Table

from loadtest.burst.client import BurstClient
from loadtest.devstack.invariants import Verdict

ENGINE_COUNTERS = {
    "onsale_pipeline_calls_total": "script calls sent to Redis",
    "onsale_sold_out_answered_total": "claims refused from memory",
    'onsale_early_lane_total{outcome="answered"}': "of them answered by their connection",
    "onsale_claims_held_total": "claims that waited at the gate",
    "onsale_sold_out_probes_total": "claims sent on to renew the memory",
    "onsale_pipeline_expired_total": "calls failed unsent (queued too long)",
}


def burst_result(
    args: argparse.Namespace,
    clients: list[BurstClient],
    t0: float,
    verdict: Verdict,
    ledger: dict[str, float] | None,
) -> dict[str, Any]:
    """The run as --json writes it: answers, timings from the release instant `t0`, checks."""
    latencies = sorted((c.done - c.sent) * 1000 for c in clients)
    won = [c.done for c in clients if c.answer == "201"]
    return {
        "target": args.target,
        "durability": durability(args),
        "clients": args.clients,
        "seats": args.seats,
        "api_workers": args.workers,
        "parties": args.parties,
        "answers": dict(Counter(c.answer for c in clients)),
        "last_seat_ms": (max(won) - t0) * 1000 if won else None,
        "all_answered_ms": (max(c.done for c in clients) - t0) * 1000,
        "last_sent_ms": (max(c.sent for c in clients) - t0) * 1000,
        "latency_ms": {
            "p50": statistics.median(latencies),
            "p99": latencies[int(len(latencies) * 0.99) - 1],
            "max": latencies[-1],
        },
        "invariants_ok": verdict.ok,
        "ledger": ledger,
        "checks": [{"check": n, "ok": ok, "detail": d} for n, ok, d in verdict.checks],
    }


def durability(args: argparse.Namespace) -> str:
    """What a decision's durability was on the target: PostgreSQL syncs every commit (the
    baseline runs with synchronous_commit on, the server's default); the engine's Redis as
    asked for."""
    if getattr(args, "target", "engine") == "pg":
        return "PostgreSQL synchronous_commit=on"
    if args.redis_aof == "shared":
        return "Redis as configured (the shared server)"
    return f"Redis appendonly={'no' if args.redis_aof == 'no' else 'yes'}" + (
        f" appendfsync={args.redis_aof}" if args.redis_aof != "no" else ""
    )


def print_report(
    console: Console, args: argparse.Namespace, result: dict[str, Any], verdict: Verdict
) -> None:
    t = Table(
        title=f"T0 burst on {args.target}: {args.clients:,} clients, one connection each, "
        f"{args.seats} seats, {args.workers} API worker(s)"
        + (f", {args.parties:.0%} of clients parties of 2-6" if args.parties else "")
    )
    t.add_column("measure")
    t.add_column("value", justify="right")
    for k, n in sorted(result["answers"].items()):
        t.add_row(f"answer {k}", f"{n:,}")
    t.add_row("last seat held (ms after release)", f"{result['last_seat_ms'] or 0:.0f}")
    t.add_row("last request sent (ms after release)", f"{result['last_sent_ms']:.0f}")
    t.add_row("every client answered (ms after release)", f"{result['all_answered_ms']:.0f}")
    t.add_row(
        "the same burst of GET /healthz, every client answered (ms)",
        f"{result['trivial_all_answered_ms']:.0f}",
    )
    t.add_row("claim burst / trivial burst", f"{result['vs_trivial']:.2f}")
    cpu = result.get("api_cpu_us") or {}
    if cpu.get("trivial") and cpu.get("claims"):
        t.add_row(
            "API CPU per request, trivial / claim (µs)",
            f"{cpu['trivial']:.0f} / {cpu['claims']:.0f}",
        )
        t.add_row("API CPU, claim burst / trivial burst", f"{result['cpu_vs_trivial']:.2f}")
    t.add_row("durability", result["durability"])
    for name, value in (result.get("engine") or {}).items():
        t.add_row(f"engine: {ENGINE_COUNTERS[name]}", f"{value:,.0f}")
    lat = result["latency_ms"]
    t.add_row(
        "latency p50 / p99 / max (ms)", f"{lat['p50']:.0f} / {lat['p99']:.0f} / {lat['max']:.0f}"
    )
    ledger = result["ledger"]
    if ledger:
        t.add_row(
            "ledger: EXPIRED rows written / rows per s",
            f"{ledger['expired_rows']:,.0f} / {ledger['rows_per_s']:,.0f}",
        )
        if "drain_rows_per_s" in ledger:
            t.add_row(
                "ledger: a backlog of EXPIRED rows drained / rows per s",
                f"{ledger['drain_rows']:,.0f} / {ledger['drain_rows_per_s']:,.0f}",
            )
        t.add_row(
            "ledger: write-behind lag p50 / p99 / max (ms)",
            f"{ledger['lag_p50_ms']:.0f} / {ledger['lag_p99_ms']:.0f} / {ledger['lag_max_ms']:.0f}",
        )
    console.print(t)
    console.print(verdict.table("After the run"))
