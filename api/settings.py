"""API settings (ONSALE_*), read once at boot; a missing required variable stops boot."""

from collections.abc import Mapping
from dataclasses import dataclass

from engine.settings import MissingSetting, Settings, int_setting


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name)
    if not value:
        raise MissingSetting(f"{name} is not set")
    return value


def _choice(env: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> str:
    value = env.get(name, allowed[0])
    if value not in allowed:
        raise MissingSetting(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    return value


@dataclass(frozen=True)
class ApiSettings:
    engine: Settings
    token_secret: str  # signs login tokens
    admin_token: str  # bearer token of the admin and ops endpoints
    webhook_secret: str  # shared with the provider, verifies callbacks
    provider_url: str
    token_ttl_s: int = 3_600
    body_max_bytes: int = 16 * 1024  # buyer and callback bodies
    admin_body_max_bytes: int = 8 * 1024 * 1024  # seat maps
    webhook_tolerance_s: int = 300
    provider_timeout_ms: int = 2_000
    # "ledger": a sale is told (buyer, provider) once the ledger holds it; "redis": at once
    confirm_after: str = "ledger"
    durable_wait_ms: int = 2_000  # a callback waits this long for its sale to be durable

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "ApiSettings":
        return cls(
            engine=Settings.from_env(env),
            token_secret=_required(env, "ONSALE_TOKEN_SECRET"),
            admin_token=_required(env, "ONSALE_ADMIN_TOKEN"),
            webhook_secret=_required(env, "ONSALE_WEBHOOK_SECRET"),
            provider_url=_required(env, "ONSALE_PROVIDER_URL"),
            token_ttl_s=int_setting(env, "ONSALE_TOKEN_TTL_S", cls.token_ttl_s),
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
        )
