"""What `onsale reconcile` reports: the discrepancy classes (described in
persistence/nightly.py), one record per discrepancy, and the JSON report."""

from dataclasses import asdict, dataclass, field
from typing import Any

CLASSES = (
    "captured_without_seat_not_refunded",
    "seat_sold_without_money",
    "decision_missing_from_ledger",
    "decision_refused_by_ledger",
    "ledger_row_unknown_to_redis",
    "refund_never_confirmed",
    "money_invariant",
    "sale_lost_by_redis",
    "stock_mismatch",
)


@dataclass(frozen=True)
class Discrepancy:
    cls: str
    event_id: str
    entity: str
    detail: str
    repaired: bool


@dataclass
class EventReport:
    event_id: str
    discrepancies: list[Discrepancy] = field(default_factory=list)
    open_exceptions: dict[str, int] = field(default_factory=dict)
    provider_net: int = 0
    expected_net: int = 0


def as_json(reports: list[EventReport]) -> dict[str, Any]:
    found = [d for r in reports for d in r.discrepancies]
    by_class = {cls: [asdict(d) for d in found if d.cls == cls] for cls in CLASSES}
    return {
        "unrepaired": sum(not d.repaired for d in found),
        "total": len(found),
        "by_class": by_class,
        "events": {
            r.event_id: {
                "provider_net": r.provider_net,
                "expected_net": r.expected_net,
                "open_exceptions": r.open_exceptions,
            }
            for r in reports
        },
    }
