"""API settings (ONSALE_*), each declared here once (engine/config/variables.py) and read once at
boot; a missing, malformed or weak setting stops boot naming the variable."""

from collections.abc import Mapping
from dataclasses import dataclass

from api.identity import JwtSettings
from engine.config.settings import ADR, PROVIDER_URL, Settings
from engine.config.variables import (
    PREFIX,
    Choice,
    Count,
    Flag,
    Group,
    Int,
    Secret,
    Text,
    read_all,
    refuse,
)
from engine.model.holds import LoginLimits

GC_GEN0 = Int(
    "ONSALE_GC_GEN0", "young GC every n allocations, none while claims wait (0: Python's)",
    50_000, minimum=0,
    doc="API: the collector's youngest generation is collected every n allocations (Python's "
    "default 700; 0 keeps it); what boot made is frozen out of collections, and the collector "
    "is paused while claims wait at the sold-out gate (a second at most per wave; 0: neither)",
)  # fmt: skip
ADMIN_TOKEN = Secret(
    "ONSALE_ADMIN_TOKEN", "bearer token of the admin endpoints (required by serve; never "
    "logged)", required=True,
    doc="the admin bearer token (required by `onsale serve`; the admin commands send it). Every "
    "secret must be at least 32 characters and not guessable (boot refuses a weak one, naming "
    "it): `openssl rand -base64 32`",
)  # fmt: skip
METRICS_TOKEN = Secret(
    "ONSALE_METRICS_TOKEN", "bearer token of /metrics for the scraper (default: admin only)",
    doc="bearer token for `/metrics` and `/openapi.json` (the scraper's); the admin credential "
    "works too; without either they answer 401",
)  # fmt: skip
WEBHOOK_SECRET = Secret(
    "ONSALE_WEBHOOK_SECRET", "verifies the simulator's callbacks (required with it)",
    doc="the simulator's callback HMAC secret (required by `onsale serve` with the simulator)",
)  # fmt: skip
WEBHOOK_SECRET_PREVIOUS = Secret(
    "ONSALE_WEBHOOK_SECRET_PREVIOUS", "the secret being rotated out, accepted meanwhile",
    doc="the callback secret being rotated out: accepted beside the new one during a rollover, "
    "then removed",
)  # fmt: skip
DEMO_LOGIN = Flag(
    "ONSALE_DEMO_LOGIN", "1: demo logins by name (demo and load runs only)", False,
    doc="demo and load runs only: `POST /v1/login` gives a signed token for any name (never "
    "with a JWT provider configured)",
)  # fmt: skip
TOKEN_SECRET = Secret(
    "ONSALE_TOKEN_SECRET", "signs demo login tokens (required with ONSALE_DEMO_LOGIN)"
)
TOKEN_TTL_S = Int("ONSALE_TOKEN_TTL_S", "demo tokens' lifetime", 3_600)
CLAIMS_PER_S = Count(
    "ONSALE_CLAIMS_PER_S", "a login's claims per event and second (0: off)", 2,
    doc="claims per login and event: a token bucket inside the claim script; past it 429 "
    "`rate_limited` with `Retry-After` (0: off)",
)  # fmt: skip
CLAIMS_BURST = Count("ONSALE_CLAIMS_BURST", "... up to this many at once", 10)
CHARGES_PER_S = Count("ONSALE_CHARGES_PER_S", "a login's charge starts per second (0: off)", 1)
CHARGES_BURST = Count("ONSALE_CHARGES_BURST", "... up to this many at once", 5)
LOGIN_CAP = Count(
    "ONSALE_LOGIN_CAP", "seats one login may hold and buy per event (0: no cap)", 6,
    doc="seats a login may hold and buy in one event (409 `limit_exceeded`; 0: no cap)",
)  # fmt: skip
ADDRESS_PER_S = Count(
    "ONSALE_ADDRESS_PER_S", "login and admin requests per client address, per process (0: off)",
    5,
)  # fmt: skip
ADDRESS_BURST = Count("ONSALE_ADDRESS_BURST", "... up to this many at once", 20)
REVOCATION_POLL_MS = Int(
    "ONSALE_REVOCATION_POLL_MS", "each process reloads revoked logins this often", 1_000
)
BODY_MAX_BYTES = Int("ONSALE_BODY_MAX_BYTES", "largest buyer or callback body", 16 * 1024)
ADMIN_BODY_MAX_BYTES = Int("ONSALE_ADMIN_BODY_MAX_BYTES", "largest seat map", 8 * 1024 * 1024)
WEBHOOK_TOLERANCE_S = Int(
    "ONSALE_WEBHOOK_TOLERANCE_S", "callback signatures older than this are refused", 300
)
CONFIRM_AFTER = Choice(
    "ONSALE_CONFIRM_AFTER", "ledger: a sale is told once the ledger holds it; redis: at once",
    "ledger", choices=("ledger", "redis"),
    doc="`ledger`: a sale is told to the buyer (CONFIRMING until then) and acknowledged to the "
    "provider only once the ledger holds it; `redis`: at once, for a deployment without a "
    f"ledger ([0016]({ADR}0016-tell-a-sale-once-the-ledger-holds-it.md))",
)  # fmt: skip
DURABLE_WAIT_MS = Int(
    "ONSALE_DURABLE_WAIT_MS", "a callback waits this long for its sale to be durable", 2_000,
    doc="a capture callback waits this long for its sale to reach the ledger, then answers 503 "
    "`not_yet_durable` (the provider retries)",
)  # fmt: skip
ACCESS_LOG = Flag(
    "ONSALE_ACCESS_LOG", "1: one log line per request (id, method, path, status, duration)", True
)
API = Group(
    "the API",
    (
        GC_GEN0, ADMIN_TOKEN, METRICS_TOKEN, WEBHOOK_SECRET, WEBHOOK_SECRET_PREVIOUS, DEMO_LOGIN,
        TOKEN_SECRET, TOKEN_TTL_S, REVOCATION_POLL_MS, BODY_MAX_BYTES, ADMIN_BODY_MAX_BYTES,
        WEBHOOK_TOLERANCE_S, CONFIRM_AFTER, DURABLE_WAIT_MS, ACCESS_LOG,
    ),
)  # fmt: skip
LIMITS = Group(
    "per login and address",
    (
        CLAIMS_PER_S, CLAIMS_BURST, CHARGES_PER_S, CHARGES_BURST, LOGIN_CAP, ADDRESS_PER_S,
        ADDRESS_BURST,
    ),
)  # fmt: skip

JWT_PREFIX = PREFIX + "JWT_"
JWT_JWKS_URL = Text(
    "ONSALE_JWT_JWKS_URL", "the provider's JWKS URL (unless ONSALE_DEMO_LOGIN=1)",
    doc="buyer tokens are JWTs of this identity provider: signature by a key of its JWKS, "
    "issuer, audience, `exp`, `iat`, `sub` (= the login) "
    f"([0019]({ADR}0019-identity-from-the-identity-provider.md)); required by `onsale serve` "
    "unless the demo login",
)  # fmt: skip
JWT_ISSUER = Text("ONSALE_JWT_ISSUER", "the tokens' issuer (required with the JWKS URL)")
JWT_AUDIENCE = Text("ONSALE_JWT_AUDIENCE", "the tokens' audience (required with the JWKS URL)")
JWT_ALGORITHMS = Text(
    "ONSALE_JWT_ALGORITHMS", "accepted signature algorithms (asymmetric only)", "RS256,ES256"
)
JWT_LEEWAY_S = Count("ONSALE_JWT_LEEWAY_S", "clock skew tolerated", JwtSettings.leeway_s)
JWT_ADMIN_CLAIM = Text(
    "ONSALE_JWT_ADMIN_CLAIM", "a claim that, when true, makes a token an admin credential",
    said="",
)  # fmt: skip
JWT_EVENTS_CLAIM = Text(
    "ONSALE_JWT_EVENTS_CLAIM", "a list claim limiting a token to those events",
    JwtSettings.events_claim,
)  # fmt: skip
JWKS_REFRESH_S = Int(
    "ONSALE_JWKS_REFRESH_S", "the provider's keys are fetched again this often",
    JwtSettings.jwks_refresh_s,
)  # fmt: skip
JWKS_RETRY_S = Int(
    "ONSALE_JWKS_RETRY_S", "a token naming an unknown key fetches them early at most this often "
    "(503 `identity_unavailable` meanwhile)", JwtSettings.jwks_retry_s,
)  # fmt: skip
OIDC_CLIENT_ID = Text(
    "ONSALE_OIDC_CLIENT_ID", "the pages sign in through the issuer with this public client",
    said="none: the pages have no sign-in",
    doc="the buyer's page and the dashboard sign in through the identity provider (OpenID "
    "Connect authorization code with PKCE, the issuer's discovery document; "
    f"[0050]({ADR}0050-sign-in-through-the-identity-provider.md)) as this public client, whose "
    "redirect URIs are the pages' (`/ui/buyer.html`, `/ui/dashboard.html`); unset: no sign-in "
    "on the pages",
)  # fmt: skip
JWT = Group(
    "buyer identity from an identity provider",
    (
        JWT_JWKS_URL, JWT_ISSUER, JWT_AUDIENCE, JWT_ALGORITHMS, JWT_LEEWAY_S, JWT_ADMIN_CLAIM,
        JWT_EVENTS_CLAIM, JWKS_REFRESH_S, JWKS_RETRY_S, OIDC_CLIENT_ID,
    ),
)  # fmt: skip


@dataclass(frozen=True)
class Limits:
    """Per login and event, enforced inside the deciding scripts (no extra round trip); per
    client address, in each process. 0 turns a limit off."""

    claims_per_s: int = CLAIMS_PER_S.default  # a login's claim bucket refills this fast ...
    claims_burst: int = CLAIMS_BURST.default  # ... up to this many
    charges_per_s: int = CHARGES_PER_S.default  # charge starts, likewise
    charges_burst: int = CHARGES_BURST.default
    login_cap: int = LOGIN_CAP.default  # seats a login may hold and buy in one event
    address_per_s: int = ADDRESS_PER_S.default  # login and admin requests per client address
    address_burst: int = ADDRESS_BURST.default

    def login(self) -> LoginLimits:
        return LoginLimits(
            self.claims_per_s, self.claims_burst, self.charges_per_s, self.charges_burst,
            self.login_cap,
        )  # fmt: skip

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "Limits":
        return cls(**read_all(env, LIMITS))


def jwt_settings(env: Mapping[str, str]) -> JwtSettings:
    values = read_all(env, JWT, strip=JWT_PREFIX)
    algorithms = tuple(a.strip() for a in values.pop("algorithms").split(","))
    for a in algorithms:
        if a[:2] not in ("RS", "ES", "PS") and a != "EdDSA":
            refuse(f"{JWT_ALGORITHMS.name}: {a!r} is not an asymmetric algorithm")
    for setting in (JWT_JWKS_URL, JWT_ISSUER, JWT_AUDIENCE):
        setting.read(env, required=True)
    return JwtSettings(**values, algorithms=algorithms)


@dataclass(frozen=True)
class ApiSettings:
    engine: Settings
    admin_token: str  # bearer token of the admin endpoints
    webhook_secret: str  # shared with the simulator, verifies its callbacks ("" with Stripe)
    provider_url: str  # the simulator's ("" with Stripe: engine.stripe says where)
    # Buyer identity: the identity provider's JWTs, or (demo and load runs only) signed names.
    jwt: JwtSettings | None = None
    demo_login: bool = DEMO_LOGIN.default
    token_secret: str = TOKEN_SECRET.default  # signs demo login tokens
    token_ttl_s: int = TOKEN_TTL_S.default  # demo tokens
    # The callback secret being rotated out: accepted beside webhook_secret during a rollover.
    webhook_secret_previous: str = WEBHOOK_SECRET_PREVIOUS.default
    metrics_token: str = METRICS_TOKEN.default  # /metrics and /openapi.json ("": admin only)
    limits: Limits = Limits()
    revocation_poll_ms: int = REVOCATION_POLL_MS.default
    body_max_bytes: int = BODY_MAX_BYTES.default  # buyer and callback bodies
    admin_body_max_bytes: int = ADMIN_BODY_MAX_BYTES.default  # seat maps
    webhook_tolerance_s: int = WEBHOOK_TOLERANCE_S.default
    confirm_after: str = CONFIRM_AFTER.default  # "ledger" (ADR 0016) or "redis": at once
    durable_wait_ms: int = DURABLE_WAIT_MS.default
    access_log: bool = ACCESS_LOG.default  # one line per request (api/logs.py)
    gc_gen0: int = GC_GEN0.default  # young-garbage collection every n allocations

    @property
    def webhook_secrets(self) -> tuple[str, ...]:
        """Every callback secret accepted now: the current one, and the previous one during a
        rollover."""
        return tuple(x for x in (self.webhook_secret, self.webhook_secret_previous) if x)

    @property
    def pages_sign_in(self) -> JwtSettings | None:
        """The provider the browser pages sign in through (ADR 0050): the JWT settings when
        they name the pages' public client; None when the pages have no sign-in."""
        return self.jwt if self.jwt is not None and self.jwt.oidc_client_id else None

    def __post_init__(self) -> None:
        if (self.jwt is None) == (not self.demo_login):
            refuse(
                f"buyer identity: set {JWT_JWKS_URL.name} (with {JWT_ISSUER.name} and "
                f"{JWT_AUDIENCE.name}), or {DEMO_LOGIN.name}=1 for demo and load runs, not both"
            )
        if self.demo_login and not self.token_secret:
            refuse(f"{TOKEN_SECRET.name} is not set (required by {DEMO_LOGIN.name})")

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "ApiSettings":
        engine = Settings.from_env(env)
        simulator = engine.provider == "simulator"  # Stripe's callbacks have their own secret
        values = read_all(env, API, required={WEBHOOK_SECRET: simulator})
        named_provider = JWT_JWKS_URL.raw(env) or not values["demo_login"]
        return cls(
            engine=engine,
            **values,
            provider_url=PROVIDER_URL.read(env, required=simulator) if simulator else "",
            jwt=jwt_settings(env) if named_provider else None,
            limits=Limits.from_env(env),
        )
