"""The benchmarks: `make bench` (main), the claim path's guard (guard, bench_guard.json), the
attribution of a claim (claim_parts), the bare reference app, and each measured cost."""
