"""Engine settings, read once at boot from ONSALE_* variables. Domain code receives values,
never reads the environment. Every client option is set here explicitly."""

import contextlib
import sys
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from engine.store.replicas import ReplicaWait


class MissingSetting(RuntimeError):
    pass


_FOUND: ContextVar[list[str] | None] = ContextVar("onsale_setting_problems", default=None)


def refuse(message: str) -> None:
    """A missing or weak setting: MissingSetting at once, unless `every_problem` collects; then
    it is noted and the reader goes on with its default, so a boot names every problem at once."""
    found = _FOUND.get()
    if found is None:
        raise MissingSetting(message)
    found.append(message)


def say_missing(exc: MissingSetting) -> None:
    """Each problem of a refused boot on a line of its own, on stderr."""
    for line in str(exc).splitlines():
        print(f"onsale: {line}", file=sys.stderr)


@contextlib.contextmanager
def every_problem() -> Iterator[None]:
    """Read settings inside; at the end, one MissingSetting naming every refusal (one a line),
    if any. A reader that could not go on after a refusal ends the reading early: the problems
    noted so far are still the ones named."""
    found: list[str] = []
    token = _FOUND.set(found)
    try:
        yield
    except Exception:
        if not found:
            raise
    finally:
        _FOUND.reset(token)
    if found:
        raise MissingSetting("\n".join(found))


def int_setting(env: Mapping[str, str], name: str, default: int, minimum: int = 1) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        refuse(f"{name} must be an integer, got {raw!r}")
        return default
    if value < minimum:
        word = "positive" if minimum == 1 else f"at least {minimum}"
        refuse(f"{name} must be {word}, got {value}")
        return default
    return value


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    refuse(f"{name} must be 1 or 0, got {raw!r}")
    return default


PROVIDERS = ("simulator", "stripe")  # ONSALE_PROVIDER: which payment provider (ADR 0023)
HOLD_RECORDS = ("sparse", "full")  # ONSALE_HOLD_RECORD (ADR 0034)


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    value = env.get(name) or default
    if value not in choices:
        refuse(f"{name} must be one of {', '.join(choices)}, got {value!r}")
        return default
    return value


@dataclass(frozen=True)
class StripeSettings:
    """Stripe through its official library (ADR 0023); the secrets stay out of any repr."""

    api_key: str = field(repr=False)
    webhook_secret: str = field(repr=False)
    api_base: str = ""  # "": Stripe's own API; else a Stripe-compatible server (tests, demo)
    max_network_retries: int = 2  # the library's retries (same idempotency key, backoff)
    lookback_days: int = 180  # nightly reconciliation lists money moved since then
    # The buyer's page pays through Stripe.js with these (ADR 0039); no key: no payment form.
    publishable_key: str = ""
    js_url: str = "https://js.stripe.com/v3/"  # tests and the demo: the simulator's stand-in

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "StripeSettings":
        key = env.get("ONSALE_STRIPE_API_KEY", "")
        if not key.startswith(("sk_", "rk_")):
            refuse(
                "ONSALE_STRIPE_API_KEY is not set to a secret key (sk_... or rk_...); "
                "ONSALE_PROVIDER=stripe needs it"
            )
        secret = env.get("ONSALE_STRIPE_WEBHOOK_SECRET", "")
        if not secret.startswith("whsec_") or len(secret) < 24:
            refuse(
                "ONSALE_STRIPE_WEBHOOK_SECRET is not set to the endpoint's signing secret "
                "(whsec_...); ONSALE_PROVIDER=stripe needs it"
            )
        base = env.get("ONSALE_STRIPE_API_BASE", "")
        if base and not base.startswith(("https://", "http://")):
            refuse(f"ONSALE_STRIPE_API_BASE must be an http(s) URL, not {base!r}")
        publishable = env.get("ONSALE_STRIPE_PUBLISHABLE_KEY", "")
        if publishable and not publishable.startswith("pk_"):
            refuse("ONSALE_STRIPE_PUBLISHABLE_KEY must be a publishable key (pk_...)")
        js_url = env.get("ONSALE_STRIPE_JS_URL", cls.js_url)
        if not js_url.startswith(("https://", "http://")):
            refuse(f"ONSALE_STRIPE_JS_URL must be an http(s) URL, not {js_url!r}")
        return cls(
            api_key=key,
            webhook_secret=secret,
            api_base=base.rstrip("/"),
            publishable_key=publishable,
            js_url=js_url,
            max_network_retries=int_setting(
                env, "ONSALE_STRIPE_MAX_NETWORK_RETRIES", cls.max_network_retries
            ),
            lookback_days=int_setting(env, "ONSALE_STRIPE_LOOKBACK_DAYS", cls.lookback_days),
        )


@dataclass(frozen=True)  # no slots: from_env reads the defaults off the class
class Settings:
    redis_url: str
    key_prefix: str = "onsale:v1"  # every key starts with it; tests and tenants use their own
    redis_timeout_ms: int = 2_000  # a call's whole wait (pool, reply, retry); 503 after
    redis_connect_timeout_ms: int = 1_000
    redis_pool_max: int = 64  # connections per process; waiting for one is bounded too
    redis_autopipeline: bool = True  # script calls of one event-loop tick share a round trip
    sold_out_memory: bool = True  # API: answer sold_out from memory once Redis said so
    sold_out_memory_ms: int = 250  # ... for at most this long without a fresh SOLD_OUT
    claim_window: int = 1024  # API: claims of one event in flight per process (0: no gate)
    sweep_interval_ms: int = 200  # pause between sweeps when nothing was due
    sweep_batch_max: int = 50  # holds examined per script call (ADR 0033)
    sweep_rounds_max: int = 50  # script calls per event per sweep (bounds one pass)
    # Ended holds without a charge are dropped from Redis once the ledger has them and this
    # long has passed since their decision: longer than any client retries a claim (ADR 0018).
    trim_retention_ms: int = 600_000
    trim_interval_ms: int = 5_000  # pause between trim passes when nothing was left over
    trim_without_ledger: bool = False  # trim events with no ledger group by the retention alone
    # API: a new hold stores only the fields its claim set (sparse), or every field (full), as
    # versions before ADR 0034 read it: a rolling upgrade from one (docs/deploy.md).
    hold_record: str = "sparse"
    # Answer a batch of script calls only once this many replicas of each server involved
    # hold it (WAIT, engine/store/replicas.py, ADR 0030); 0: do not wait.
    redis_wait_replicas: int = 0
    redis_wait_ms: int = 50
    provider: str = "simulator"  # simulator | stripe (ADR 0023)
    provider_url: str = ""  # the simulator's; required by its worker and API
    provider_timeout_ms: int = 2_000
    stripe: StripeSettings | None = None  # set (and complete) when provider is stripe
    refund_interval_ms: int = 500
    reconcile_interval_ms: int = 10_000
    reconcile_stale_ms: int = 120_000  # a charge CHARGING longer than this is asked about
    reconcile_watch_ms: int = 600_000  # a decline this recent is asked about again

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "Settings":
        url = env.get("ONSALE_REDIS_URL") or ""
        if not url:
            refuse("ONSALE_REDIS_URL is not set (e.g. redis://127.0.0.1:6379/0)")
        provider = _choice(env, "ONSALE_PROVIDER", PROVIDERS, cls.provider)
        return cls(
            redis_url=url,
            key_prefix=env.get("ONSALE_KEY_PREFIX") or cls.key_prefix,
            redis_timeout_ms=int_setting(env, "ONSALE_REDIS_TIMEOUT_MS", cls.redis_timeout_ms),
            redis_connect_timeout_ms=int_setting(
                env, "ONSALE_REDIS_CONNECT_TIMEOUT_MS", cls.redis_connect_timeout_ms
            ),
            redis_pool_max=int_setting(env, "ONSALE_REDIS_POOL_MAX", cls.redis_pool_max),
            redis_autopipeline=_bool(env, "ONSALE_REDIS_AUTOPIPELINE", cls.redis_autopipeline),
            sold_out_memory=_bool(env, "ONSALE_SOLD_OUT_MEMORY", cls.sold_out_memory),
            sold_out_memory_ms=int_setting(
                env, "ONSALE_SOLD_OUT_MEMORY_MS", cls.sold_out_memory_ms
            ),
            claim_window=int_setting(env, "ONSALE_CLAIM_WINDOW", cls.claim_window, minimum=0),
            sweep_interval_ms=int_setting(env, "ONSALE_SWEEP_INTERVAL_MS", cls.sweep_interval_ms),
            sweep_batch_max=int_setting(env, "ONSALE_SWEEP_BATCH_MAX", cls.sweep_batch_max),
            sweep_rounds_max=int_setting(env, "ONSALE_SWEEP_ROUNDS_MAX", cls.sweep_rounds_max),
            trim_retention_ms=int_setting(env, "ONSALE_TRIM_RETENTION_MS", cls.trim_retention_ms),
            trim_interval_ms=int_setting(env, "ONSALE_TRIM_INTERVAL_MS", cls.trim_interval_ms),
            trim_without_ledger=_bool(env, "ONSALE_TRIM_WITHOUT_LEDGER", cls.trim_without_ledger),
            hold_record=_choice(env, "ONSALE_HOLD_RECORD", HOLD_RECORDS, cls.hold_record),
            redis_wait_replicas=int_setting(
                env, "ONSALE_REDIS_WAIT_REPLICAS", cls.redis_wait_replicas, minimum=0
            ),
            redis_wait_ms=int_setting(env, "ONSALE_REDIS_WAIT_MS", cls.redis_wait_ms),
            provider=provider,
            provider_url=env.get("ONSALE_PROVIDER_URL", ""),
            stripe=StripeSettings.from_env(env) if provider == "stripe" else None,
            provider_timeout_ms=int_setting(
                env, "ONSALE_PROVIDER_TIMEOUT_MS", cls.provider_timeout_ms
            ),
            refund_interval_ms=int_setting(
                env, "ONSALE_REFUND_INTERVAL_MS", cls.refund_interval_ms
            ),
            reconcile_interval_ms=int_setting(
                env, "ONSALE_RECONCILE_INTERVAL_MS", cls.reconcile_interval_ms
            ),
            reconcile_watch_ms=int_setting(
                env, "ONSALE_RECONCILE_WATCH_MS", cls.reconcile_watch_ms
            ),
            reconcile_stale_ms=int_setting(
                env, "ONSALE_RECONCILE_STALE_MS", cls.reconcile_stale_ms
            ),
        )

    def redis_client(self) -> "aioredis.Redis":
        """A client with every option we rely on set explicitly (strings, bounded pool).

        The pool wait, the socket timeout and the retry below are each bounded, but they add
        up: a call could wait for a connection, then for its reply, then try again. The engine
        therefore puts one deadline of `redis_timeout_ms` around each whole call (Store,
        Reads, AutoPipeline: asyncio.timeout from the moment the call is made); these options
        are the backstops of any other caller."""
        cluster = cluster_url(self.redis_url)
        if cluster is not None:
            return self._cluster_client(cluster)
        pool = aioredis.BlockingConnectionPool.from_url(
            self.redis_url,
            decode_responses=True,
            max_connections=self.redis_pool_max,
            timeout=self.redis_timeout_ms / 1000,  # wait for a free connection
            socket_timeout=self.redis_timeout_ms / 1000,
            socket_connect_timeout=self.redis_connect_timeout_ms / 1000,
            socket_keepalive=True,
            health_check_interval=30,
            # One more try on a fresh connection after a connection error (a pooled connection
            # to a server that restarted fails on first use); none after a timeout, whose
            # command may still be running: the caller's deadline is the timeout, once.
            retry=Retry(NoBackoff(), retries=1, supported_errors=(RedisConnectionError,)),
        )
        return aioredis.Redis.from_pool(pool)

    def replica_wait(self, client: "aioredis.Redis") -> ReplicaWait | None:
        if self.redis_wait_replicas <= 0:
            return None
        return ReplicaWait(
            client,
            prefix=self.key_prefix,
            replicas=self.redis_wait_replicas,
            timeout_ms=self.redis_wait_ms,
        )

    def _cluster_client(self, url: str) -> "aioredis.Redis":
        """Redis Cluster (ADR 0030): the same bounds per node; the client follows MOVED and ASK,
        refreshes its slot map after a failover, and retries a connection error on the new
        owner. Typed as the single-server client: the engine uses the commands both share, and
        the few places that differ ask `is_cluster` (engine/store/cluster.py)."""
        client = RedisCluster.from_url(
            url,
            decode_responses=True,
            max_connections=self.redis_pool_max,
            socket_timeout=self.redis_timeout_ms / 1000,
            socket_connect_timeout=self.redis_connect_timeout_ms / 1000,
            socket_keepalive=True,
            health_check_interval=30,
        )
        return cast("aioredis.Redis", client)


def cluster_url(url: str) -> str | None:
    """The URL of a cluster (`redis+cluster://host:port` or `redis://host:port?cluster=true`,
    any node a seed) as the cluster client takes it; None for a single server."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query)
    query = [(k, v) for k, v in pairs if k != "cluster"]
    flagged = any(k == "cluster" and v.lower() in ("1", "true", "yes") for k, v in pairs)
    if parts.scheme not in ("redis+cluster", "rediss+cluster") and not flagged:
        return None
    if parts.path.strip("/") not in ("", "0"):
        raise MissingSetting("ONSALE_REDIS_URL: a cluster has database 0 only")
    scheme = parts.scheme.replace("+cluster", "")
    return urlunsplit((scheme, parts.netloc, "", urlencode(query), ""))
