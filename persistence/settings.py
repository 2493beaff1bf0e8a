"""Ledger writer settings (ONSALE_*), read once at boot."""

from collections.abc import Mapping
from dataclasses import dataclass

from engine.config.settings import Settings, _bool, int_setting, refuse


@dataclass(frozen=True)
class LedgerDb:
    """The ledger's database alone: all `onsale migrate` reads (no Redis, no provider)."""

    dsn: str
    pool_max: int = 4
    timeout_ms: int = 5_000  # per statement / connection attempt

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "LedgerDb":
        dsn = env.get("ONSALE_PG_DSN") or ""
        if not dsn:
            refuse("ONSALE_PG_DSN is not set (e.g. postgresql://u@127.0.0.1/db)")
        return cls(
            dsn=dsn,
            pool_max=int_setting(env, "ONSALE_PG_POOL_MAX", cls.pool_max),
            timeout_ms=int_setting(env, "ONSALE_PG_TIMEOUT_MS", cls.timeout_ms),
        )


@dataclass(frozen=True)
class LedgerSettings:
    engine: Settings
    pg_dsn: str
    pg_pool_max: int = 4
    pg_timeout_ms: int = 5_000  # per statement / connection attempt
    batch_max: int = 2_000  # outbox entries per transaction (docs/benchmarks-journal.md section 5)
    idle_ms: int = 100  # longest blocking wait on the outboxes once all are drained
    claim_idle_ms: int = 30_000  # a pending entry idle this long belongs to a dead consumer
    retention_ms: int = 86_400_000  # outbox entries kept this long even once in the ledger
    metrics_port: int = 9108  # Prometheus: writer lag and throughput
    auto_rebuild: bool = True  # a lost, fenced or half-built event is rebuilt without a person

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "LedgerSettings":
        db = LedgerDb.from_env(env)
        return cls(
            engine=Settings.from_env(env),
            pg_dsn=db.dsn,
            pg_pool_max=db.pool_max,
            pg_timeout_ms=db.timeout_ms,
            batch_max=int_setting(env, "ONSALE_LEDGER_BATCH_MAX", cls.batch_max),
            idle_ms=int_setting(env, "ONSALE_LEDGER_IDLE_MS", cls.idle_ms),
            claim_idle_ms=int_setting(env, "ONSALE_LEDGER_CLAIM_IDLE_MS", cls.claim_idle_ms),
            retention_ms=int_setting(env, "ONSALE_OUTBOX_RETENTION_MS", cls.retention_ms),
            metrics_port=int_setting(env, "ONSALE_LEDGER_METRICS_PORT", cls.metrics_port),
            auto_rebuild=_bool(env, "ONSALE_AUTO_REBUILD", cls.auto_rebuild),
        )


@dataclass(frozen=True)
class SenderSettings:
    """The merchant webhook sender (ADR 0024), run by `onsale ledger` beside the writer.
    ONSALE_MERCHANT_WEBHOOK_* (the provider's callback secret is ONSALE_WEBHOOK_SECRET: another
    direction, another thing)."""

    enabled: bool = True  # 0: this ledger process sends nothing (another one does)
    timeout_ms: int = 15_000  # one attempt's whole wait (Standard Webhooks: 15 to 30 s)
    batch_max: int = 32  # deliveries claimed and sent at once
    interval_ms: int = 500  # pause when nothing was due
    backoff_ms: int = 5_000  # the first retry's delay; doubled each attempt, jittered
    backoff_max_ms: int = 3_600_000  # the longest delay between two attempts
    max_age_ms: int = 3 * 86_400_000  # no attempt past this age: the delivery is failed
    log_retention_ms: int = 30 * 86_400_000  # a done delivery is kept this long in the log

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "SenderSettings":
        def ms(name: str, default: int) -> int:
            return int_setting(env, f"ONSALE_MERCHANT_WEBHOOK_{name}", default)

        return cls(
            enabled=_bool(env, "ONSALE_MERCHANT_WEBHOOKS", cls.enabled),
            timeout_ms=ms("TIMEOUT_MS", cls.timeout_ms),
            batch_max=ms("BATCH_MAX", cls.batch_max),
            interval_ms=ms("INTERVAL_MS", cls.interval_ms),
            backoff_ms=ms("BACKOFF_MS", cls.backoff_ms),
            backoff_max_ms=ms("BACKOFF_MAX_MS", cls.backoff_max_ms),
            max_age_ms=ms("MAX_AGE_MS", cls.max_age_ms),
            log_retention_ms=ms("LOG_RETENTION_MS", cls.log_retention_ms),
        )
