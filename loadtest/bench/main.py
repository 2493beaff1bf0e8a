"""Every benchmark of docs/benchmarks.md in one run, one tool after the other (never two at once:
on two cores they would measure each other).

    python -m loadtest.bench.main [--out DIR] [--trials 3] [--quick]      (or: make bench)

1. Claim script vs SET on private Redis servers (persistence_cost, redis-benchmark).
2. Claim endpoint vs /healthz, the bare JSON+EVALSHA endpoint and the PostgreSQL baseline,
   with one and with two uvicorn workers (claim_rate, wrk); and with production tokens (RS256
   JWTs of a local identity provider) instead of the demo login's.
3-4. The T0 burst, the engine, the PostgreSQL baseline and the bare JSON+EVALSHA claim
   alternated, `--trials` times each, in both shapes: 10,000 clients on 80 seats and on 10,000
   seats (burst).
5. Write-behind: the 10k-on-10k burst with the ledger writer, then every hold expires at once;
   and the writer itself on a backlog, staged batches against row by row (ledger_bench).
6. Cost against size: 80, 10k, 100k, 1M seats (size_cost).
The engine runs at Redis `appendfsync always` against PostgreSQL's synchronous commit (the
tools' defaults), with a no-persistence column for the bursts and the sustained claims. Each
tool prints its own tables; their JSON lands in DIR, each with its durability; the summary at
the end gives the burst medians, their ratio to the trivial burst of the same run and the
engine's time against the baseline's and the bare claim's, with the date, the machine and the
command. Needs wrk and redis-benchmark."""

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.table import Table

SHAPES = ((10_000, 80), (10_000, 10_000))
BURST_TARGETS = ("engine", "pg", "bare", "engine-no-aof")
Bursts = dict[tuple[str, int], list[dict[str, object]]]  # (target, seats) -> each trial's JSON


def run(console: Console, title: str, *args: str, checked: Path | None = None) -> None:
    """One tool, which must succeed; or, with `checked` (the JSON it writes), one whose failed
    checks are a result (a burst: its errors and checks are in that JSON and in the summary),
    so the run goes on."""
    console.rule(f"[bold]{title}")
    console.print(f"$ python -m {' '.join(args)}", style="dim")
    started = time.monotonic()
    # Wide tables: the tools' rich output is not on a terminal here.
    done = subprocess.run([sys.executable, "-m", *args], env={**os.environ, "COLUMNS": "150"})
    if done.returncode != 0 and (checked is None or not checked.exists()):
        raise subprocess.CalledProcessError(done.returncode, done.args)
    if done.returncode != 0:
        console.print(f"[yellow]exit {done.returncode}: its checks failed (kept in the summary)")
    console.print(f"({time.monotonic() - started:.0f} s)", style="dim")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m loadtest.bench.main", description=__doc__)
    ap.add_argument("--out", default=f"reports/bench/{time.strftime('%Y%m%d-%H%M%S')}")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small numbers: checks the wiring only")
    args = ap.parse_args(argv)
    console = Console(width=150)
    missing = [t for t in ("wrk", "redis-benchmark", "redis-server") if shutil.which(t) is None]
    if missing:
        console.print(f"[red]missing: {', '.join(missing)} (apt-get install wrk redis-tools)")
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    q = args.quick
    clients = 200 if q else 10_000
    seconds = "1" if q else "6"
    run(
        console,
        "1. claim script vs SET",
        *("loadtest.bench.persistence_cost", "--requests", "2000" if q else "100000"),
        *("--seats", "5000" if q else "300000"),
    )
    run_claim_rates(console, out, q, seconds)
    bursts = run_bursts(console, out, clients, args.trials)
    ledger_path = out / "burst_ledger.json"
    run(
        console,
        "5. write-behind: 10k holds expire at once",
        *(
            "loadtest.burst.main",
            "--clients",
            str(clients),
            "--seats",
            str(clients),
            "--workers",
            "2",
        ),
        *("--ledger", "--ledger-drain", "--hold-ttl-ms", "5000", "--json", str(ledger_path)),
    )
    run(
        console,
        "5. the ledger writer on a backlog of expiries",
        *("loadtest.bench.ledger_bench", "--records", "2000" if q else "20000"),
        *("--batch", "500" if q else "2000", "--rounds", "1" if q else "3"),
    )
    run(
        console,
        "6. cost against size",
        *("loadtest.bench.size_cost", "--sizes", "80,1000" if q else "80,10000,100000,1000000"),
        *("--claims", "200" if q else "20000", "--json", str(out / "size_cost.json")),
    )
    summary(console, bursts, orjson.loads(ledger_path.read_bytes()), out)
    return 0


def run_claim_rates(console: Console, out: Path, q: bool, seconds: str) -> None:
    """2. The sustained claim beside its references: one and two workers, both durabilities;
    then with production tokens."""
    for workers, aof in (("1", "always"), ("2", "always"), ("2", "no")):
        run(
            console,
            f"2. claim endpoint vs references, {workers} worker(s), Redis AOF {aof}",
            *("loadtest.bench.claim_rate", "--workers", workers, "--seconds", seconds, "--pg"),
            *("--redis-aof", aof, "--seats", "5000" if q else "200000"),
            *("--json", str(out / f"claim_rate_w{workers}_{aof}.json")),
        )
    run(
        console,
        "2. the claim with production tokens (RS256 JWTs, a new login each), 2 workers, AOF always",
        *("loadtest.bench.claim_rate", "--workers", "2", "--seconds", seconds, "--tokens", "jwt"),
        *("--seats", "5000" if q else "200000", "--json", str(out / "claim_rate_w2_jwt.json")),
    )


def run_bursts(console: Console, out: Path, clients: int, trials: int) -> Bursts:
    """The T0 burst in each shape, the engine, the PostgreSQL baseline and the bare claim
    alternated, `trials` times."""
    bursts: Bursts = {}
    for _clients, seats in SHAPES:
        for trial in range(trials):
            # engine at AOF always (the burst tool's default) and PostgreSQL alternated; the
            # engine without persistence once per shape, for the other column
            for target in ("engine", "pg", "bare", *(("engine-no-aof",) if trial == 0 else ())):
                path = out / f"burst_{target}_{seats}_{trial}.json"
                path.unlink(missing_ok=True)
                run(
                    console,
                    f"3-4. T0 burst on {target}: {clients:,} clients, {seats:,} seats, "
                    f"trial {trial + 1}/{trials}",
                    *("loadtest.burst.main", "--target", target.removesuffix("-no-aof")),
                    *(("--redis-aof", "no") if target.endswith("-no-aof") else ()),
                    *("--clients", str(clients)),
                    *("--seats", str(min(seats, clients)), "--workers", "2", "--json", str(path)),
                    checked=path,
                )
                bursts.setdefault((target, seats), []).append(orjson.loads(path.read_bytes()))
    return bursts


def medians_of(runs: list[dict[str, object]]) -> dict[str, Any]:
    """One target's trials of one shape: their medians, errors and checks."""
    lat = [r["latency_ms"] for r in runs]
    m: dict[str, Any] = {
        "all_answered_ms": statistics.median(float(r["all_answered_ms"]) for r in runs),  # type: ignore[arg-type]
        "last_seat_ms": statistics.median(float(r["last_seat_ms"] or 0) for r in runs),  # type: ignore[arg-type]
        "p50": statistics.median(float(x["p50"]) for x in lat),  # type: ignore[index]
        "p99": statistics.median(float(x["p99"]) for x in lat),  # type: ignore[index]
        "errors": sum(
            n
            for r in runs
            for k, n in r["answers"].items()  # type: ignore[attr-defined]
            if k not in ("201", "200", "sold_out", "seat_taken")
        ),
        "invariants_ok": all(r["invariants_ok"] for r in runs),
        "vs_trivial": statistics.median(float(r["vs_trivial"]) for r in runs),  # type: ignore[arg-type]
        # the API processes' CPU, claims against trivial (loadtest/burst/main.py): steadier than
        # time
        "cpu_vs_trivial": statistics.median(float(r["cpu_vs_trivial"]) for r in runs),  # type: ignore[arg-type]
        "durability": runs[0]["durability"],
        "trials": len(runs),
    }
    return m


def summary(
    console: Console,
    bursts: Bursts,
    ledger_run: dict[str, object],
    out: Path,
) -> None:
    t = Table(title="T0 burst, 2 workers each, medians over the trials (engine, PostgreSQL, bare)")
    for col in (
        "shape",
        "target",
        "all answered ms",
        "last seat ms",
        "p50 / p99 ms",
        "errors",
        "invariants",
        "vs trivial burst",
        "API CPU vs trivial",
        "engine / this (all answered)",
    ):
        t.add_column(col, justify="right")
    rows: dict[str, object] = {}
    engine_vs: dict[str, float] = {}  # the engine's time against each reference's, per shape
    for _clients, seats in SHAPES:
        medians = {target: medians_of(bursts[(target, seats)]) for target in BURST_TARGETS}
        rows |= {f"{target}_{seats}": m for target, m in medians.items()}
        engine_ms = medians["engine"]["all_answered_ms"]
        for target in ("pg", "bare"):
            ratio = engine_ms / max(medians[target]["all_answered_ms"], 1)
            engine_vs[f"{target}_{seats}"] = ratio
        for target, m in medians.items():
            t.add_row(
                f"{seats:,} seats",
                f"{target} ({m['durability']})",
                f"{m['all_answered_ms']:.0f}",
                f"{m['last_seat_ms']:.0f}",
                f"{m['p50']:.0f} / {m['p99']:.0f}",
                str(m["errors"]),
                "ok" if m["invariants_ok"] else "[red]VIOLATED",
                f"{m['vs_trivial']:.2f}",
                f"{m['cpu_vs_trivial']:.2f}",
                f"{engine_vs[f'{target}_{seats}']:.2f}" if f"{target}_{seats}" in engine_vs else "",
            )
    console.print(t)
    ledger = ledger_run.get("ledger") or {}
    console.print(f"write-behind during the expiry storm: {ledger}")
    meta = machine()
    console.print(f"measured {meta['date']} on {meta['machine']}")
    (out / "summary.json").write_bytes(
        orjson.dumps(
            {**meta, "bursts": rows, "engine_vs": engine_vs, "ledger": ledger},
            option=orjson.OPT_INDENT_2,
        )
    )
    console.print(f"results in {out}/")


def machine() -> dict[str, str]:
    """When and where: every figure is this machine's, on this day."""
    redis = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
    return {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": f"{os.cpu_count()} cores, {platform.platform()}, Python "
        f"{platform.python_version()}, {redis.split(' sha=')[0].strip()}",
        "command": "python -m loadtest.bench.main " + " ".join(sys.argv[1:]),
    }


if __name__ == "__main__":
    raise SystemExit(main())
