"""`onsale chaos`: a seeded whole-system run with processes killed at random instants
(docs/reliability.md). The run itself is a tool, `python -m loadtest.chaos.main`: it starts its own
servers and the whole stack through the load tools' process runner, which no product module may
import (ADR 0015). So this command only defines the options (the tool reads the same ones,
from here) and runs the tool as a child process, handing on its exit code."""

import argparse
import subprocess
import sys

DESCRIPTION = (
    "Starts a private Redis (AOF, fsync always; or a local cluster with --cluster), a private "
    "PostgreSQL and the whole stack on spare loopback ports; plays a T0 burst and a purchase "
    "flow against a misbehaving provider while processes are killed (kill -9) and restarted "
    "on a schedule built from the seed alone; then settles, reconciles and checks every "
    "invariant. Exit 0 when there is no violation, 1 otherwise."
)


def add_chaos_options(parser: argparse.ArgumentParser) -> None:
    """The options of `onsale chaos` and of `python -m loadtest.chaos.main` (one definition)."""
    parser.add_argument(
        "--seed", type=int, default=1, help="seed of the schedule and the load (default 1)"
    )
    parser.add_argument(
        "--duration", type=float, default=None, help="seconds of load (default 300; --short 40)"
    )
    parser.add_argument(
        "--faults", type=int, default=None, help="faults to inject (default 110; --short 12)"
    )
    parser.add_argument(
        "--cluster", action="store_true", help="a local Redis Cluster (3 primaries + replicas)"
    )
    parser.add_argument(
        "--wait-replicas",
        type=int,
        default=0,
        help="with --cluster: answer once this many replicas hold a decision (default 0)",
    )
    parser.add_argument(
        "--short", action="store_true", help="the CI version: about a minute, a smaller crowd"
    )
    parser.add_argument(
        "--lose-redis",
        action="store_true",
        help="Redis comes back empty after each of its faults (its files deleted): the ledger "
        "process rebuilds every lost event by itself, with nobody at the keyboard",
    )
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated kinds of fault to inject (api, worker, ledger, redis, postgres; "
        "default all)",
    )
    parser.add_argument(
        "--flow-seats", type=int, default=None, help="seats of each flow event (default 1000)"
    )
    parser.add_argument("--json", default="", help="also write the figures to this JSON file")
    parser.add_argument(
        "--log-dir", default="", help="the processes' logs (default .services/chaos-logs/<run>)"
    )


def add_chaos_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    chaos = sub.add_parser(
        "chaos",
        help="seeded whole-system run with processes killed and restarted (docs/reliability.md)",
        description=DESCRIPTION,
    )
    add_chaos_options(chaos)


def forwarded(args: argparse.Namespace) -> list[str]:
    """The parsed options, as the tool's command line."""
    argv = ["--seed", str(args.seed), "--wait-replicas", str(args.wait_replicas)]
    for flag, value in (
        ("--duration", args.duration),
        ("--faults", args.faults),
        ("--flow-seats", args.flow_seats),
    ):
        if value is not None:
            argv += [flag, str(value)]
    for flag, value in (("--json", args.json), ("--log-dir", args.log_dir), ("--only", args.only)):
        if value:
            argv += [flag, value]
    argv += ["--cluster"] * args.cluster + ["--short"] * args.short
    argv += ["--lose-redis"] * args.lose_redis
    return argv


def run_chaos(args: argparse.Namespace) -> int:
    """Run the tool in a child process and hand on its exit code (130 on Ctrl-C: the child,
    in the same process group, got it too and stops its servers)."""
    command = [sys.executable, "-m", "loadtest.chaos.main", *forwarded(args)]
    child = subprocess.Popen(command)
    try:
        return child.wait()
    except KeyboardInterrupt:
        return child.wait()
