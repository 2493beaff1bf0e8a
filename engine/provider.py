"""The payment provider, as the rest of the product imports it: the interface and its types
(engine/providers/base.py), the deployment's adapter (`build_provider`), and the simulator's
client and callback reader under the names they had before the interface (ADR 0023)."""

from engine.providers import build_provider
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

ProviderClient = SimulatorProvider  # the simulator's client, by its former name

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
    "ProviderClient",
    "ProviderRefused",
    "ProviderTimeout",
    "SimulatorProvider",
    "build_provider",
    "parse_callback",
]
