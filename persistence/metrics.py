"""The ledger writer's Prometheus series (served by `onsale ledger` on its metrics port)."""


class LedgerMetrics:
    """Prometheus series of the writer: throughput, refusals, and lag per event."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge

        self.registry = CollectorRegistry()
        self.entries = Counter(
            "onsale_ledger_entries_total", "Outbox entries written", registry=self.registry
        )
        self.alerts = Counter(
            "onsale_ledger_alerts_total", "Rows the ledger refused", registry=self.registry
        )
        self.lag_entries = Gauge(
            "onsale_ledger_lag_entries",
            "Outbox entries not in the ledger",
            ["event"],
            registry=self.registry,
        )
        self.lag_seconds = Gauge(
            "onsale_ledger_lag_seconds",
            "Age of the oldest of them",
            ["event"],
            registry=self.registry,
        )
