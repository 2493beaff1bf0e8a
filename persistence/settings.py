"""Ledger writer settings (ONSALE_*), each declared here once (engine/config/variables.py; the
database's own in engine/config/settings.py, which the API reads too) and read once at boot."""

from collections.abc import Mapping
from dataclasses import dataclass

from engine.config.settings import (
    LEDGER_DB,
    PG_DSN,
    PG_POOL_MAX,
    PG_TIMEOUT_MS,
    Settings,
)
from engine.config.variables import Flag, Group, Int, read_all

LEDGER_BATCH_MAX = Int(
    "ONSALE_LEDGER_BATCH_MAX", "outbox entries per ledger transaction", 2_000,
    doc="outbox entries per ledger transaction (the lag p99 of an expiry storm: 321 ms at 500, "
    "194-206 ms at 2000)",
)  # fmt: skip
LEDGER_IDLE_MS = Int(
    "ONSALE_LEDGER_IDLE_MS", "longest blocking wait on the drained outboxes", 100,
    doc="with every outbox drained, the writer waits this long at most on a blocking read of "
    "them (a decision is read as it is made; ADR 0031)",
)  # fmt: skip
LEDGER_CLAIM_IDLE_MS = Int(
    "ONSALE_LEDGER_CLAIM_IDLE_MS", "a pending entry idle this long belongs to a dead writer and "
    "is taken over (looked for at most once a second)", 30_000,
)  # fmt: skip
OUTBOX_RETENTION_MS = Int(
    "ONSALE_OUTBOX_RETENTION_MS", "outbox entries kept at least this long, even once in the "
    "ledger", 86_400_000,
)  # fmt: skip
LEDGER_METRICS_PORT = Int(
    "ONSALE_LEDGER_METRICS_PORT", "`onsale ledger`'s Prometheus port (writer lag, throughput)",
    9108,
)  # fmt: skip
AUTO_REBUILD = Flag(
    "ONSALE_AUTO_REBUILD", "0: a lost or fenced event waits for `onsale rebuild`", True,
    doc="`onsale ledger` rebuilds an event it finds lost, fenced or half built from the ledger "
    "by itself (one process at a time, `persistence/auto_rebuild.py`); 0: it waits for "
    "`onsale rebuild` ([docs/recovery.md](recovery.md))",
)  # fmt: skip
LEDGER = Group(
    "the ledger writer",
    (
        LEDGER_BATCH_MAX, LEDGER_IDLE_MS, LEDGER_CLAIM_IDLE_MS, OUTBOX_RETENTION_MS,
        LEDGER_METRICS_PORT, AUTO_REBUILD,
    ),
)  # fmt: skip

DAY_MS = 86_400_000
MERCHANT_WEBHOOK_ = "ONSALE_MERCHANT_WEBHOOK_"
MERCHANT_WEBHOOKS = Flag(
    "ONSALE_MERCHANT_WEBHOOKS", "0: this ledger process sends none (another one does)", True
)
MERCHANT_WEBHOOK_TIMEOUT_MS = Int(
    "ONSALE_MERCHANT_WEBHOOK_TIMEOUT_MS", "one attempt's whole wait (Standard Webhooks: 15-30 s)",
    15_000,
)  # fmt: skip
MERCHANT_WEBHOOK_BATCH_MAX = Int(
    "ONSALE_MERCHANT_WEBHOOK_BATCH_MAX", "deliveries claimed and sent at once", 32
)
MERCHANT_WEBHOOK_INTERVAL_MS = Int(
    "ONSALE_MERCHANT_WEBHOOK_INTERVAL_MS", "pause when nothing was due", 500
)
MERCHANT_WEBHOOK_BACKOFF_MS = Int(
    "ONSALE_MERCHANT_WEBHOOK_BACKOFF_MS", "the first retry's delay (doubled each attempt, "
    "jittered)", 5_000,
)  # fmt: skip
MERCHANT_WEBHOOK_BACKOFF_MAX_MS = Int(
    "ONSALE_MERCHANT_WEBHOOK_BACKOFF_MAX_MS", "the longest delay between two attempts", 3_600_000
)
MERCHANT_WEBHOOK_MAX_AGE_MS = Int(
    "ONSALE_MERCHANT_WEBHOOK_MAX_AGE_MS", "no attempt past this age: the delivery is failed",
    3 * DAY_MS,
)  # fmt: skip
MERCHANT_WEBHOOK_LOG_RETENTION_MS = Int(
    "ONSALE_MERCHANT_WEBHOOK_LOG_RETENTION_MS", "a done delivery is kept this long in the "
    "delivery log after its last attempt (replay needs it there)", 30 * DAY_MS,
)  # fmt: skip
SENDER = Group(
    "merchant webhooks sent by `onsale ledger`",
    (
        MERCHANT_WEBHOOKS, MERCHANT_WEBHOOK_TIMEOUT_MS, MERCHANT_WEBHOOK_BATCH_MAX,
        MERCHANT_WEBHOOK_INTERVAL_MS, MERCHANT_WEBHOOK_BACKOFF_MS,
        MERCHANT_WEBHOOK_BACKOFF_MAX_MS, MERCHANT_WEBHOOK_MAX_AGE_MS,
        MERCHANT_WEBHOOK_LOG_RETENTION_MS,
    ),
)  # fmt: skip


@dataclass(frozen=True)
class LedgerDb:
    """The ledger's database alone: all `onsale migrate` reads (no Redis, no provider)."""

    dsn: str
    pool_max: int = PG_POOL_MAX.default
    timeout_ms: int = PG_TIMEOUT_MS.default  # per statement / connection attempt

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "LedgerDb":
        return cls(**read_all(env, LEDGER_DB, strip="ONSALE_PG_", required={PG_DSN: True}))


@dataclass(frozen=True)
class LedgerSettings:
    engine: Settings
    pg_dsn: str
    pg_pool_max: int = PG_POOL_MAX.default
    pg_timeout_ms: int = PG_TIMEOUT_MS.default  # per statement / connection attempt
    batch_max: int = LEDGER_BATCH_MAX.default  # docs/benchmarks-journal.md section 5
    idle_ms: int = LEDGER_IDLE_MS.default  # longest blocking wait once all are drained
    claim_idle_ms: int = LEDGER_CLAIM_IDLE_MS.default  # a dead consumer's pending entries
    outbox_retention_ms: int = OUTBOX_RETENTION_MS.default  # kept even once in the ledger
    metrics_port: int = LEDGER_METRICS_PORT.default  # Prometheus: writer lag and throughput
    auto_rebuild: bool = AUTO_REBUILD.default  # lost, fenced or half built: rebuilt, no person

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "LedgerSettings":
        db = read_all(env, LEDGER_DB, required={PG_DSN: True})
        return cls(
            engine=Settings.from_env(env), **db, **read_all(env, LEDGER, strip="ONSALE_LEDGER_")
        )


@dataclass(frozen=True)
class SenderSettings:
    """The merchant webhook sender (ADR 0024), run by `onsale ledger` beside the writer (the
    provider's callback secret is ONSALE_WEBHOOK_SECRET: another direction, another thing)."""

    merchant_webhooks: bool = MERCHANT_WEBHOOKS.default  # 0: another ledger process sends
    timeout_ms: int = MERCHANT_WEBHOOK_TIMEOUT_MS.default  # one attempt's whole wait
    batch_max: int = MERCHANT_WEBHOOK_BATCH_MAX.default  # deliveries claimed and sent at once
    interval_ms: int = MERCHANT_WEBHOOK_INTERVAL_MS.default  # pause when nothing was due
    backoff_ms: int = MERCHANT_WEBHOOK_BACKOFF_MS.default  # doubled each attempt, jittered
    backoff_max_ms: int = MERCHANT_WEBHOOK_BACKOFF_MAX_MS.default
    max_age_ms: int = MERCHANT_WEBHOOK_MAX_AGE_MS.default  # no attempt past it: failed
    log_retention_ms: int = MERCHANT_WEBHOOK_LOG_RETENTION_MS.default

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "SenderSettings":
        return cls(**read_all(env, SENDER, strip=MERCHANT_WEBHOOK_))
