"""The table `python -m loadtest.bench.size_cost` prints: cost by event size, and for each size the
other clients' calls that mixed into its readings and its audit. Printing only."""

from rich.console import Console
from rich.table import Table

from loadtest.bench.size_cost_measure import CLAIM_BATCH, SizeResult


def print_table(results: list[SizeResult], claims_n: int, console: Console) -> None:
    t = Table(
        title=f"cost by event size: {claims_n:,} claim steps per size (a login trades its hold "
        f"for the best free seat), {CLAIM_BATCH} in flight; µs from INFO commandstats"
    )
    for col in (
        "seats",
        "bytes/seat\nused_memory\n/ keys",
        "bytes/hold\nused_memory\n/ keys",
        "claim µs\n(median\nbatch)",
        "ZPOPMIN\nµs",
        "claims/s\n(client)",
        "sweep µs\n/ expired\nhold",
        "sweep wall\nµs / expired\nhold",
        "claim µs /\nsmallest\nsize's",
    ):
        t.add_column(col, justify="right")
    for r in results:
        t.add_row(
            f"{r.size:,}",
            f"{r.bytes_per_seat:,.0f} / {r.key_bytes_per_seat:,.0f}",
            f"{r.bytes_per_hold:,.0f} / {r.key_bytes_per_hold:,.0f}",
            f"{r.claim_usec:.1f}{'' if r.claim_batches_clean else ' *'}",
            f"{r.claim_zpopmin_usec:.2f}",
            f"{r.claims_per_s:,.0f}",
            f"{r.sweep_usec_per_hold:.1f}",
            f"{r.sweep_wall_usec_per_hold:.1f}",
            f"{r.claim_ratio:.2f}",
        )
    console.print(t)
    console.print(
        "bytes: the INFO used_memory delta (moves with client buffers too) / the delta of the "
        "event keys' MEMORY USAGE; a hold is net of its seat's free-set entry. * no claim batch "
        "free of other clients' FCALL calls"
    )
    for r in results:
        if r.foreign_fcalls:
            console.print(
                f"[yellow]size {r.size:,}: {r.foreign_fcalls:,} FCALL calls by other "
                f"clients; {r.claim_batches_clean} of {r.claim_batches} claim batches were free "
                "of them (the medians use those; with none, every number includes other "
                "clients' work); used_memory may be off too (use a quiet server or "
                "--own-server)[/]"
            )
        audit = "clean" if r.audit_ok else "VIOLATED: " + "; ".join(r.audit_violations)
        console.print(f"size {r.size:,}: audit {audit}")
