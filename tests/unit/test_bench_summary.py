"""`make bench`'s summary (loadtest/bench/main.py): the medians of each burst's trials, the API's
CPU ratio beside the time ratio, and the JSON it leaves with the date and the machine."""

from pathlib import Path

import orjson
from rich.console import Console

from loadtest.bench.main import SHAPES, medians_of, summary


def trial(ms: float, vs: float, cpu: float, answers: dict[str, int]) -> dict[str, object]:
    return {
        "all_answered_ms": ms,
        "last_seat_ms": ms / 2,
        "latency_ms": {"p50": ms / 3, "p99": ms * 0.9},
        "answers": answers,
        "invariants_ok": True,
        "vs_trivial": vs,
        "cpu_vs_trivial": cpu,
        "durability": "Redis appendonly=yes appendfsync=always",
    }


def test_medians_and_the_cpu_ratio(tmp_path: Path) -> None:
    runs = [
        trial(900, 1.5, 1.6, {"201": 80, "sold_out": 9920}),
        trial(1000, 1.3, 1.4, {"201": 80, "sold_out": 9919, "503": 1}),
        trial(1200, 1.4, 1.5, {"201": 80, "sold_out": 9920}),
    ]
    m = medians_of(runs)
    assert (m["all_answered_ms"], m["vs_trivial"], m["cpu_vs_trivial"]) == (1000, 1.4, 1.5)
    assert m["errors"] == 1 and m["trials"] == 3
    bursts = {
        (target, seats): runs
        for target in ("engine", "pg", "engine-no-aof")
        for _c, seats in SHAPES
    }
    bare = [trial(800, 1.1, 1.2, {"201": 80, "sold_out": 9920})] * 3
    bursts |= {("bare", seats): bare for _c, seats in SHAPES}
    console = Console(record=True, width=240)
    summary(console, bursts, {"ledger": {"rows_per_s": 7000.0}}, tmp_path)
    text = console.export_text()
    assert "API CPU vs trivial" in text and "engine / this" in text
    saved = orjson.loads((tmp_path / "summary.json").read_bytes())
    assert saved["bursts"]["engine_80"]["cpu_vs_trivial"] == 1.5
    # The engine's time against each reference's, shape by shape (issue 33: <= 1.05x the
    # bare claim's on 10,000 seats)
    assert saved["engine_vs"]["bare_10000"] == 1000 / 800
    assert saved["engine_vs"]["pg_80"] == 1.0
    assert saved["date"] and saved["machine"] and saved["ledger"] == {"rows_per_s": 7000.0}
