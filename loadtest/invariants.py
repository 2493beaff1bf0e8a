"""The check that runs after every load test: from the engine's own state (and the ledger when
there is one) and the clients' answers."""

from collections import Counter
from dataclasses import dataclass, field

from engine.store import Store

# Answers a client may get in a burst: a hold, or a clear refusal it can act on.
CLEAR_CODES = {
    "201",
    "200",
    "sold_out",
    "seat_taken",
    "sale_not_open",
    "charge_in_flight",
    "rate_limited",
    "store_unavailable",
}


@dataclass
class Verdict:
    checks: list[tuple[str, bool, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(ok for _n, ok, _d in self.checks)


async def check_burst(
    store: Store, event_id: str, answers: Counter[str], clients: int, seats_total: int
) -> Verdict:
    v = Verdict()
    avail = await store.availability(event_id)
    report = await store.audit(event_id)
    held_or_sold = avail.held + avail.sold + avail.blocked
    v.checks.append(
        ("seats taken <= seats", held_or_sold <= seats_total, f"{held_or_sold} of {seats_total}")
    )
    v.checks.append(
        (
            "no seat twice, counters agree (audit)",
            report.ok,
            "; ".join(report.violations[:3]) or "clean",
        )
    )
    answered = sum(answers.values())
    v.checks.append(("every client answered", answered == clients, f"{answered} of {clients}"))
    unclear = {k: n for k, n in answers.items() if k not in CLEAR_CODES}
    v.checks.append(("no 5xx, no timeout, no unclear answer", not unclear, str(unclear or "none")))
    return v
