"""API settings (ONSALE_*), read once at boot; a missing, malformed or weak setting stops boot
naming the variable."""

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from api.identity import JwtSettings
from engine.config.settings import Settings, _bool, int_setting, refuse
from engine.model.holds import LoginLimits

SECRET_CHARS_MIN = 32
SECRET_BITS_MIN = 96  # estimated from the characters' spread; a mistake catcher, not a meter


def secret_weakness(value: str) -> str | None:
    """Why `value` is too weak to be a secret, or None. Catches the usual mistakes (short,
    repeated, placeholder) — `openssl rand -base64 32` always passes."""
    if len(value) < SECRET_CHARS_MIN:
        return f"is {len(value)} characters; at least {SECRET_CHARS_MIN} are required"
    counts = Counter(value)
    bits = -sum(n * math.log2(n / len(value)) for n in counts.values())
    if bits < SECRET_BITS_MIN:
        return f"looks guessable (about {bits:.0f} bits; at least {SECRET_BITS_MIN} required)"
    for period in range(1, len(value) // 2 + 1):
        if value == (value[:period] * (len(value) // period + 1))[: len(value)]:
            return "is a repeated pattern"
    return None


def secret(env: Mapping[str, str], name: str, *, required: bool = True) -> str:
    value = env.get(name, "")
    if not value:
        if required:
            refuse(f"{name} is not set (e.g. `openssl rand -base64 32`)")
        return ""
    weakness = secret_weakness(value)
    if weakness is not None:
        refuse(f"{name} {weakness} (e.g. `openssl rand -base64 32`)")
    return value


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name)
    if not value:
        refuse(f"{name} is not set")
        return ""
    return value


def _choice(env: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str:
    value = env.get(name, allowed[0])
    if value not in allowed:
        refuse(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
        return allowed[0]
    return value


def _count(env: Mapping[str, str], name: str, default: int) -> int:
    """A non-negative integer; 0 turns the limit off."""
    raw = env.get(name, "")
    if raw == "":
        return default
    if not raw.isdigit():
        refuse(f"{name} must be a non-negative integer (0: off), got {raw!r}")
        return default
    return int(raw)


@dataclass(frozen=True)
class Limits:
    """Per login and event, enforced inside the deciding scripts (no extra round trip); per
    client address, in each process. 0 turns a limit off."""

    claims_per_s: int = 2  # a login's claim bucket refills this fast ...
    claims_burst: int = 10  # ... up to this many
    charges_per_s: int = 1  # charge starts, likewise
    charges_burst: int = 5
    login_cap: int = 6  # seats a login may hold and buy in one event
    address_per_s: int = 5  # login and admin requests per client address
    address_burst: int = 20

    def login(self) -> LoginLimits:
        return LoginLimits(
            self.claims_per_s, self.claims_burst, self.charges_per_s, self.charges_burst,
            self.login_cap,
        )  # fmt: skip

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "Limits":
        return cls(
            claims_per_s=_count(env, "ONSALE_CLAIMS_PER_S", cls.claims_per_s),
            claims_burst=_count(env, "ONSALE_CLAIMS_BURST", cls.claims_burst),
            charges_per_s=_count(env, "ONSALE_CHARGES_PER_S", cls.charges_per_s),
            charges_burst=_count(env, "ONSALE_CHARGES_BURST", cls.charges_burst),
            login_cap=_count(env, "ONSALE_LOGIN_CAP", cls.login_cap),
            address_per_s=_count(env, "ONSALE_ADDRESS_PER_S", cls.address_per_s),
            address_burst=_count(env, "ONSALE_ADDRESS_BURST", cls.address_burst),
        )


def jwt_settings(env: Mapping[str, str]) -> JwtSettings:
    algorithms = tuple(
        a.strip() for a in env.get("ONSALE_JWT_ALGORITHMS", "RS256,ES256").split(",")
    )
    for a in algorithms:
        if a[:2] not in ("RS", "ES", "PS") and a != "EdDSA":
            refuse(f"ONSALE_JWT_ALGORITHMS: {a!r} is not an asymmetric algorithm")
    return JwtSettings(
        jwks_url=_required(env, "ONSALE_JWT_JWKS_URL"),
        issuer=_required(env, "ONSALE_JWT_ISSUER"),
        audience=_required(env, "ONSALE_JWT_AUDIENCE"),
        leeway_s=_count(env, "ONSALE_JWT_LEEWAY_S", JwtSettings.leeway_s),
        algorithms=algorithms,
        admin_claim=env.get("ONSALE_JWT_ADMIN_CLAIM", ""),
        events_claim=env.get("ONSALE_JWT_EVENTS_CLAIM", JwtSettings.events_claim),
        jwks_refresh_s=int_setting(env, "ONSALE_JWKS_REFRESH_S", JwtSettings.jwks_refresh_s),
        jwks_retry_s=int_setting(env, "ONSALE_JWKS_RETRY_S", JwtSettings.jwks_retry_s),
    )


@dataclass(frozen=True)
class ApiSettings:
    engine: Settings
    admin_token: str  # bearer token of the admin endpoints
    webhook_secret: str  # shared with the simulator, verifies its callbacks ("" with Stripe)
    provider_url: str  # the simulator's ("" with Stripe: engine.stripe says where)
    # Buyer identity: the identity provider's JWTs, or (demo and load runs only) signed names.
    jwt: JwtSettings | None = None
    demo_login: bool = False
    token_secret: str = ""  # signs demo login tokens
    token_ttl_s: int = 3_600  # demo tokens
    # The callback secret being rotated out: accepted beside webhook_secret during a rollover.
    webhook_secret_previous: str = ""
    metrics_token: str = ""  # bearer token of /metrics and /openapi.json ("": the admin token)
    limits: Limits = Limits()
    revocation_poll_ms: int = 1_000  # each process reloads revoked logins this often
    body_max_bytes: int = 16 * 1024  # buyer and callback bodies
    admin_body_max_bytes: int = 8 * 1024 * 1024  # seat maps
    webhook_tolerance_s: int = 300
    provider_timeout_ms: int = 2_000
    # "ledger": a sale is told (buyer, provider) once the ledger holds it; "redis": at once
    confirm_after: str = "ledger"
    durable_wait_ms: int = 2_000  # a callback waits this long for its sale to be durable
    access_log: bool = True  # one line per request (api/logs.py)
    gc_gen0: int = 50_000  # young-garbage collection every n allocations (0: Python's 700)

    @property
    def webhook_secrets(self) -> tuple[str, ...]:
        """Every callback secret accepted now: the current one, and the previous one during a
        rollover."""
        return tuple(x for x in (self.webhook_secret, self.webhook_secret_previous) if x)

    def __post_init__(self) -> None:
        if (self.jwt is None) == (not self.demo_login):
            refuse(
                "buyer identity: set ONSALE_JWT_JWKS_URL (with ONSALE_JWT_ISSUER and "
                "ONSALE_JWT_AUDIENCE), or ONSALE_DEMO_LOGIN=1 for demo and load runs, not both"
            )
        if self.demo_login and not self.token_secret:
            refuse("ONSALE_TOKEN_SECRET is not set (required by ONSALE_DEMO_LOGIN)")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "ApiSettings":
        demo = _bool(env, "ONSALE_DEMO_LOGIN", False)
        engine = Settings.from_env(env)
        simulator = engine.provider == "simulator"  # Stripe's callbacks have their own secret
        return cls(
            engine=engine,
            admin_token=secret(env, "ONSALE_ADMIN_TOKEN"),
            webhook_secret=secret(env, "ONSALE_WEBHOOK_SECRET", required=simulator),
            webhook_secret_previous=secret(env, "ONSALE_WEBHOOK_SECRET_PREVIOUS", required=False),
            metrics_token=secret(env, "ONSALE_METRICS_TOKEN", required=False),
            provider_url=_required(env, "ONSALE_PROVIDER_URL") if simulator else "",
            jwt=jwt_settings(env) if env.get("ONSALE_JWT_JWKS_URL") or not demo else None,
            demo_login=demo,
            token_secret=secret(env, "ONSALE_TOKEN_SECRET", required=demo),
            token_ttl_s=int_setting(env, "ONSALE_TOKEN_TTL_S", cls.token_ttl_s),
            limits=Limits.from_env(env),
            revocation_poll_ms=int_setting(
                env, "ONSALE_REVOCATION_POLL_MS", cls.revocation_poll_ms
            ),
            body_max_bytes=int_setting(env, "ONSALE_BODY_MAX_BYTES", cls.body_max_bytes),
            admin_body_max_bytes=int_setting(
                env, "ONSALE_ADMIN_BODY_MAX_BYTES", cls.admin_body_max_bytes
            ),
            webhook_tolerance_s=int_setting(
                env, "ONSALE_WEBHOOK_TOLERANCE_S", cls.webhook_tolerance_s
            ),
            provider_timeout_ms=int_setting(
                env, "ONSALE_PROVIDER_TIMEOUT_MS", cls.provider_timeout_ms
            ),
            confirm_after=_choice(env, "ONSALE_CONFIRM_AFTER", ("ledger", "redis")),
            durable_wait_ms=int_setting(env, "ONSALE_DURABLE_WAIT_MS", cls.durable_wait_ms),
            access_log=_bool(env, "ONSALE_ACCESS_LOG", cls.access_log),
            gc_gen0=int_setting(env, "ONSALE_GC_GEN0", cls.gc_gen0, minimum=0),
        )
