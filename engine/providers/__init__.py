"""Payment providers behind one interface (engine/providers/base.py, ADR 0023): the simulator's
own protocol and Stripe. `build_provider` picks the deployment's (ONSALE_PROVIDER)."""

from collections.abc import Sequence

from engine.config.settings import Settings
from engine.config.variables import MissingSetting
from engine.providers.base import (
    DISPUTE_STILL_OUT,
    LEDGER_MONEY_SIGN,
    OUTCOME_OF_STATUS,
    BadCallback,
    Callback,
    Ignored,
    MoneyMovement,
    Provider,
    ProviderCharge,
    ProviderRefused,
    ProviderTimeout,
)
from engine.providers.simulator import SimulatorProvider, parse_callback

__all__ = [
    "DISPUTE_STILL_OUT",
    "LEDGER_MONEY_SIGN",
    "OUTCOME_OF_STATUS",
    "BadCallback",
    "Callback",
    "Ignored",
    "MoneyMovement",
    "Provider",
    "ProviderCharge",
    "ProviderRefused",
    "ProviderTimeout",
    "SimulatorProvider",
    "build_provider",
    "parse_callback",
]


def build_provider(
    settings: Settings, *, callback_secrets: Sequence[str] = (), tolerance_s: int = 300
) -> Provider:
    """The deployment's provider. `callback_secrets` verify the simulator's callbacks (Stripe's
    are verified with ONSALE_STRIPE_WEBHOOK_SECRET); a process that takes no callbacks passes
    none. An incomplete configuration stops boot (MissingSetting) naming the variable."""
    if settings.provider == "stripe":
        if settings.stripe is None:
            raise MissingSetting("ONSALE_PROVIDER=stripe needs ONSALE_STRIPE_API_KEY and more")
        from engine.providers.stripe_client import StripeProvider

        return StripeProvider(
            settings.stripe, timeout_ms=settings.provider_timeout_ms, tolerance_s=tolerance_s
        )
    if not settings.provider_url:
        raise MissingSetting("ONSALE_PROVIDER_URL is not set (ONSALE_PROVIDER=simulator needs it)")
    return SimulatorProvider(
        settings.provider_url,
        timeout_ms=settings.provider_timeout_ms,
        callback_secrets=callback_secrets,
        tolerance_s=tolerance_s,
    )
