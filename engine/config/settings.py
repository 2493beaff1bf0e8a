"""Engine settings, read once at boot from ONSALE_* variables, each declared here once
(engine/config/variables.py). Domain code receives values, never reads the environment. Every
client option is set here explicitly."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from engine.config.variables import (
    Choice,
    Flag,
    Group,
    Int,
    MissingSetting,
    Secret,
    Text,
    read_all,
    refuse,
)
from engine.store.replicas import ReplicaWait

ADR = "decisions/"  # docs/configuration.md links to the decisions beside it
STRIPE_API_KEY = Secret(
    "ONSALE_STRIPE_API_KEY",
    "secret key, sk_... or rk_... (required; never logged)",
    doc="a secret or restricted key (`sk_...`, `rk_...`); boot refuses one missing or malformed",
)
STRIPE_WEBHOOK_SECRET = Secret(
    "ONSALE_STRIPE_WEBHOOK_SECRET",
    "the endpoint's signing secret, whsec_... (required)",
    doc="the webhook endpoint's signing secret (`whsec_...`); boot refuses one missing or "
    "malformed",
)
STRIPE_API_BASE = Text(
    "ONSALE_STRIPE_API_BASE",
    "another Stripe-compatible server",
    said="Stripe's",
    doc="a Stripe-compatible server instead (the simulator's `--wire stripe`, in tests and the "
    "demo)",
)
STRIPE_MAX_NETWORK_RETRIES = Int(
    "ONSALE_STRIPE_MAX_NETWORK_RETRIES", "the library's retries (same idempotency key, backoff)", 2
)
STRIPE_LOOKBACK_DAYS = Int(
    "ONSALE_STRIPE_LOOKBACK_DAYS", "nightly reconciliation lists Stripe's charges and disputes "
    "this far back", 180,
)  # fmt: skip
STRIPE_PUBLISHABLE_KEY = Text(
    "ONSALE_STRIPE_PUBLISHABLE_KEY",
    "pk_...: the buyer's page pays through Stripe.js",
    said="none: no payment form",
    doc="the buyer's page takes the card through Stripe's Payment Element with this "
    f"publishable key (`pk_...`, [0039]({ADR}0039-pay-on-the-page.md)); without a key the page "
    "has no payment form for Stripe",
)
STRIPE_JS_URL = Text(
    "ONSALE_STRIPE_JS_URL", "where the page loads Stripe.js (the simulator's stand-in in tests "
    "and the demo)", "https://js.stripe.com/v3/",
)  # fmt: skip
STRIPE = Group(
    "Stripe (ONSALE_PROVIDER=stripe)",
    (
        STRIPE_API_KEY, STRIPE_WEBHOOK_SECRET, STRIPE_API_BASE, STRIPE_MAX_NETWORK_RETRIES,
        STRIPE_LOOKBACK_DAYS, STRIPE_PUBLISHABLE_KEY, STRIPE_JS_URL,
    ),
)  # fmt: skip


@dataclass(frozen=True)
class StripeSettings:
    """Stripe through its official library (ADR 0023); the secrets stay out of any repr."""

    api_key: str = field(repr=False)
    webhook_secret: str = field(repr=False)
    api_base: str = STRIPE_API_BASE.default  # "": Stripe's own API; else a compatible server
    max_network_retries: int = STRIPE_MAX_NETWORK_RETRIES.default
    lookback_days: int = STRIPE_LOOKBACK_DAYS.default
    # The buyer's page pays through Stripe.js with these (ADR 0039); no key: no payment form.
    publishable_key: str = STRIPE_PUBLISHABLE_KEY.default
    js_url: str = STRIPE_JS_URL.default

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "StripeSettings":
        key, secret = STRIPE_API_KEY.raw(env), STRIPE_WEBHOOK_SECRET.raw(env)
        if not key.startswith(("sk_", "rk_")):
            refuse(
                f"{STRIPE_API_KEY.name} is not set to a secret key (sk_... or rk_...); "
                f"{PROVIDER.name}=stripe needs it"
            )
        if not secret.startswith("whsec_") or len(secret) < 24:
            refuse(
                f"{STRIPE_WEBHOOK_SECRET.name} is not set to the endpoint's signing secret "
                f"(whsec_...); {PROVIDER.name}=stripe needs it"
            )
        base, js_url = STRIPE_API_BASE.read(env), STRIPE_JS_URL.read(env)
        for url, setting in ((base, STRIPE_API_BASE), (js_url, STRIPE_JS_URL)):
            if url and not url.startswith(("https://", "http://")):
                refuse(f"{setting.name} must be an http(s) URL, not {url!r}")
        publishable = STRIPE_PUBLISHABLE_KEY.read(env)
        if publishable and not publishable.startswith("pk_"):
            refuse(f"{STRIPE_PUBLISHABLE_KEY.name} must be a publishable key (pk_...)")
        return cls(
            api_key=key,
            webhook_secret=secret,
            api_base=base.rstrip("/"),
            publishable_key=publishable,
            js_url=js_url,
            max_network_retries=STRIPE_MAX_NETWORK_RETRIES.read(env),
            lookback_days=STRIPE_LOOKBACK_DAYS.read(env),
        )


REDIS_URL = Text(
    "ONSALE_REDIS_URL", "Redis to use, e.g. redis://127.0.0.1:6379/0", required=True,
    eg="redis://127.0.0.1:6379/0",
    doc="e.g. `redis://127.0.0.1:6379/0`; a Redis Cluster: `redis+cluster://host:port` or "
    "`redis://host:port?cluster=true`, any node a seed "
    f"([0030]({ADR}0030-redis-cluster-and-failover.md))",
)  # fmt: skip
KEY_PREFIX = Text(
    "ONSALE_KEY_PREFIX", "prefix of every key (tests and tenants use their own)", "onsale:v1"
)
REDIS_TIMEOUT_MS = Int(
    "ONSALE_REDIS_TIMEOUT_MS", "a Redis call's whole wait, then 503", 2_000,
    doc="a call's whole wait: queue, pooled connection, reply and the retry on a fresh "
    "connection share one deadline; then 503 `store_unavailable`",
)  # fmt: skip
REDIS_CONNECT_TIMEOUT_MS = Int("ONSALE_REDIS_CONNECT_TIMEOUT_MS", "connecting to Redis", 1_000)
REDIS_POOL_MAX = Int("ONSALE_REDIS_POOL_MAX", "Redis connections per process", 64)
REDIS_AUTOPIPELINE = Flag(
    "ONSALE_REDIS_AUTOPIPELINE", "1: script calls and reads of one loop tick share a round trip",
    True,
    doc="script calls made in the same event-loop tick, and a request's plain reads and notes "
    "(a hold, its charges, an event's fields, a callback's raw copy), leave in one pipelined "
    "round trip on the pipeline's own connections (ADR 0011); 0 sends each alone",
)  # fmt: skip
SOLD_OUT_MEMORY = Flag(
    "ONSALE_SOLD_OUT_MEMORY", "1: the API answers sold_out from memory", True,
    doc="API: once Redis answers SOLD_OUT, refuse further claims of that event from memory "
    "until a seat comes back (ADR 0012)",
)  # fmt: skip
SOLD_OUT_MEMORY_MS = Int(
    "ONSALE_SOLD_OUT_MEMORY_MS", "... for at most this long without Redis", 250,
    doc="the longest such a memory is used without a fresh SOLD_OUT (the bound if a restock "
    "message were lost)",
)  # fmt: skip
CLAIM_WINDOW = Int(
    "ONSALE_CLAIM_WINDOW", "claims of one event in flight per process (0: no gate)", 1024,
    minimum=0,
    doc="API: claims of one event in flight to Redis per process, reached from 128 by one more "
    "per claim that won; the rest wait and a sold-out event answers them from memory "
    "(ADR 0012); 0: no gate, only the memory",
)  # fmt: skip
SWEEP_INTERVAL_MS = Int(
    "ONSALE_SWEEP_INTERVAL_MS", "pause between sweeps when nothing was due", 200
)
SWEEP_BATCH_MAX = Int(
    "ONSALE_SWEEP_BATCH_MAX", "holds examined per sweep call (about 3 ms of Redis; ADR 0033)", 50
)
SWEEP_ROUNDS_MAX = Int(
    "ONSALE_SWEEP_ROUNDS_MAX", "sweep calls per event per pass (bounds one pass)", 50
)
TRIM_RETENTION_MS = Int(
    "ONSALE_TRIM_RETENTION_MS", "ended holds kept in Redis this long", 600_000,
    doc="worker: a hold that ended without ever having had a charge is dropped from Redis this "
    "long after its decision, once the ledger holds it (a claim retried within it still gets "
    f"its replay; [0018]({ADR}0018-bounded-state-trim-ended-holds.md))",
)  # fmt: skip
TRIM_INTERVAL_MS = Int(
    "ONSALE_TRIM_INTERVAL_MS", "pause between trim passes when nothing was left over", 5_000
)
TRIM_WITHOUT_LEDGER = Flag(
    "ONSALE_TRIM_WITHOUT_LEDGER", "1: trim events no ledger reads, by the retention alone", False,
    doc="1: trim events whose outbox no ledger writer reads, by the retention alone (a "
    "deployment without a ledger); 0: such events are never trimmed",
)  # fmt: skip
HOLD_RECORD = Choice(
    "ONSALE_HOLD_RECORD", "sparse or full: a new hold's stored fields (ADR 0034)", "sparse",
    choices=("sparse", "full"),
    doc="API: a new hold stores only the fields its claim set; `full` stores every field, as "
    f"versions before [0034]({ADR}0034-lean-claim-script.md) read it: set it while such a "
    "version still runs (a rolling upgrade, docs/deploy.md)",
)  # fmt: skip
REDIS_WAIT_REPLICAS = Int(
    "ONSALE_REDIS_WAIT_REPLICAS", "answer only once this many replicas hold a decision (WAIT; "
    "0: do not wait)", 0, minimum=0,
    doc="answer a batch of script calls only once this many replicas of each server involved "
    f"hold it (WAIT); 0: do not wait ([0030]({ADR}0030-redis-cluster-and-failover.md))",
)  # fmt: skip
REDIS_WAIT_MS = Int(
    "ONSALE_REDIS_WAIT_MS", "... waiting at most this long", 50,
    doc="how long that wait may take; fewer replicas in time: 503 and the client retries",
)  # fmt: skip
PROVIDER = Choice(
    "ONSALE_PROVIDER", "payment provider: simulator or stripe", "simulator",
    choices=("simulator", "stripe"),
    doc="the payment provider of this deployment: `simulator` or `stripe` "
    f"([0023]({ADR}0023-provider-interface-and-stripe.md)); every process of a deployment "
    "reads the same",
)  # fmt: skip
PROVIDER_URL = Text(
    "ONSALE_PROVIDER_URL", "the simulator's URL (required by serve and worker with it)",
    said="",
)  # fmt: skip
PROVIDER_TIMEOUT_MS = Int(
    "ONSALE_PROVIDER_TIMEOUT_MS", "a provider call's wait", 2_000,
    doc="per provider call (the simulator's client: two retries on transport errors / 5xx; "
    "Stripe: per request, retried by the library)",
)  # fmt: skip
REFUND_INTERVAL_MS = Int("ONSALE_REFUND_INTERVAL_MS", "pause between refund passes", 500)
RECONCILE_INTERVAL_MS = Int(
    "ONSALE_RECONCILE_INTERVAL_MS", "pause between reconciliation passes", 10_000
)
RECONCILE_STALE_MS = Int(
    "ONSALE_RECONCILE_STALE_MS", "a charge CHARGING this long is asked about", 120_000
)
RECONCILE_WATCH_MS = Int(
    "ONSALE_RECONCILE_WATCH_MS", "a decline this recent is asked about again", 600_000,
    doc="a decline younger than this is asked about again each pass (a capture contradicting "
    "it, whose webhook was lost, is given back then; older ones by the nightly run)",
)  # fmt: skip
ENGINE = Group(
    "Redis and the engine",
    (
        REDIS_URL, KEY_PREFIX, REDIS_TIMEOUT_MS, REDIS_CONNECT_TIMEOUT_MS, REDIS_POOL_MAX,
        REDIS_AUTOPIPELINE, SOLD_OUT_MEMORY, SOLD_OUT_MEMORY_MS, CLAIM_WINDOW,
        SWEEP_INTERVAL_MS, SWEEP_BATCH_MAX, SWEEP_ROUNDS_MAX, TRIM_RETENTION_MS,
        TRIM_INTERVAL_MS, TRIM_WITHOUT_LEDGER, HOLD_RECORD, REDIS_WAIT_REPLICAS, REDIS_WAIT_MS,
        PROVIDER, PROVIDER_URL, PROVIDER_TIMEOUT_MS, REFUND_INTERVAL_MS, RECONCILE_INTERVAL_MS,
        RECONCILE_STALE_MS, RECONCILE_WATCH_MS,
    ),
)  # fmt: skip


@dataclass(frozen=True)  # the defaults are the declarations' (above)
class Settings:
    redis_url: str
    key_prefix: str = KEY_PREFIX.default
    redis_timeout_ms: int = REDIS_TIMEOUT_MS.default  # a call's whole wait; 503 after
    redis_connect_timeout_ms: int = REDIS_CONNECT_TIMEOUT_MS.default
    redis_pool_max: int = REDIS_POOL_MAX.default
    redis_autopipeline: bool = REDIS_AUTOPIPELINE.default  # one round trip per loop tick
    sold_out_memory: bool = SOLD_OUT_MEMORY.default  # API: sold_out from memory
    sold_out_memory_ms: int = SOLD_OUT_MEMORY_MS.default
    claim_window: int = CLAIM_WINDOW.default  # API: claims of one event in flight per process
    sweep_interval_ms: int = SWEEP_INTERVAL_MS.default
    sweep_batch_max: int = SWEEP_BATCH_MAX.default  # ADR 0033
    sweep_rounds_max: int = SWEEP_ROUNDS_MAX.default
    trim_retention_ms: int = TRIM_RETENTION_MS.default  # ADR 0018
    trim_interval_ms: int = TRIM_INTERVAL_MS.default
    trim_without_ledger: bool = TRIM_WITHOUT_LEDGER.default
    hold_record: str = HOLD_RECORD.default  # ADR 0034: sparse, or full for a rolling upgrade
    redis_wait_replicas: int = REDIS_WAIT_REPLICAS.default  # engine/store/replicas.py
    redis_wait_ms: int = REDIS_WAIT_MS.default
    provider: str = PROVIDER.default  # simulator | stripe (ADR 0023)
    provider_url: str = PROVIDER_URL.default  # the simulator's; required by its worker and API
    provider_timeout_ms: int = PROVIDER_TIMEOUT_MS.default
    stripe: StripeSettings | None = None  # set (and complete) when provider is stripe
    refund_interval_ms: int = REFUND_INTERVAL_MS.default
    reconcile_interval_ms: int = RECONCILE_INTERVAL_MS.default
    reconcile_stale_ms: int = RECONCILE_STALE_MS.default  # CHARGING this long: asked about
    reconcile_watch_ms: int = RECONCILE_WATCH_MS.default  # a decline this recent: asked again

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "Settings":
        values = read_all(env, ENGINE)
        stripe = StripeSettings.from_env(env) if values["provider"] == "stripe" else None
        return cls(**values, stripe=stripe)

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


# The ledger's database, read by the ledger's commands and by the API's webhook routes.
PG_DSN = Text(
    "ONSALE_PG_DSN", "PostgreSQL DSN of the ledger (the API without it: webhook routes 503)",
    eg="postgresql://u@127.0.0.1/db",
    doc="the ledger database, required by `migrate`, `ledger`, `rebuild`, `reconcile`; "
    "`onsale serve` without it answers the webhook admin routes 503 `webhooks_unavailable` "
    "(the demo uses its own database, `ONSALE_DEMO_DATABASE`, default `onsale_demo`, on that "
    "server)",
)  # fmt: skip
PG_POOL_MAX = Int("ONSALE_PG_POOL_MAX", "the ledger process's connections", 4)
PG_TIMEOUT_MS = Int("ONSALE_PG_TIMEOUT_MS", "per statement or connection attempt", 5_000)
LEDGER_DB = Group("the ledger's database", (PG_DSN, PG_POOL_MAX, PG_TIMEOUT_MS))
