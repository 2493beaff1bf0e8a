"""The payment provider as the engine sees it: one small interface (`Provider`), the provider's
record of one attempt (`ProviderCharge`), one money movement (`MoneyMovement`), a parsed
callback (`Callback`, or `Ignored`), the errors every adapter raises, and the readers of a
message's fields both adapters share.

Two adapters implement it: the simulator's own protocol (engine/providers/simulator.py) and
Stripe through its official library (engine/providers/stripe_client.py). The API, the refund
queue, provider reconciliation and the nightly reconciliation use only this interface; which
adapter runs is a per-deployment setting (ONSALE_PROVIDER, ADR 0023)."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

from engine.model import keys
from engine.model.holds import ProviderOutcome, ProviderReversal

# An attempt's status in the engine's words (what every adapter maps its own status to), and
# the outcome each final one is.
OUTCOME_OF_STATUS = {"captured": "CAPTURED", "declined": "DECLINED", "failed": "FAILED"}
DISPUTE_STILL_OUT = ("open", "lost")  # ProviderCharge.disputed values with the money withdrawn
LEDGER_MONEY_SIGN = {
    "capture": 1,
    "refund": -1,
    "dispute_withdrawal": -1,
    "dispute_reinstatement": 1,
}


class ProviderTimeout(Exception):
    """The provider did not answer in time, or answered 5xx: the outcome is unknown."""


class ProviderRefused(Exception):
    """The provider answered 4xx: the request itself was refused."""


class BadCallback(ValueError):
    """A callback that is not a message we can read (a 400 for the provider)."""


@dataclass(frozen=True, slots=True)
class ProviderCharge:
    """The provider's own record of one attempt (what reconciliation and refunds trust)."""

    attempt_id: str  # "" while the intent has no attempt yet
    intent_id: str
    idempotency_key: str  # our charge id, as the provider's record names it
    status: str  # processing | captured | declined | failed
    amount: int | None = None  # None: the provider sent something that is not an integer
    currency: str = ""
    metadata: dict[str, str] | None = None
    refunded: bool = False  # the provider has refunded it in full (ours or its own)
    amount_refunded: int = 0  # minor units refunds gave back so far (parts included)
    disputed: str = ""  # "" | open | won | lost
    # What the buyer's page needs to confirm the payment with the provider itself (Stripe: the
    # PaymentIntent's client secret, for Stripe.js); "" when the provider needs nothing.
    client_secret: str = ""


class MoneyMovement(TypedDict):
    """One movement of money at the provider, for reconciliation: `kind` one of
    LEDGER_MONEY_SIGN, `event_id` as the attempt's metadata names it ("" when none)."""

    kind: str
    attempt_id: str
    idempotency_key: str
    amount: int
    event_id: str


@dataclass(frozen=True, slots=True)
class Callback:
    """A parsed (not yet believed) provider callback, and the event it is routed to: the one
    the charge key we minted names, else the one its metadata names."""

    event_id: str
    message: ProviderOutcome | ProviderReversal


@dataclass(frozen=True, slots=True)
class Ignored:
    """An authentic callback about nothing the engine follows (a dispute inquiry, a refund
    still pending, an attempt that never reached a card network): answered 200, applied never."""

    provider_event_id: str
    reason: str


# -- reading a message as sent: never coercing a wrong type into a right one (ADR 0014) ------


def field(data: Mapping[str, Any], name: str) -> str:
    """A required id, as our keys accept ids (BadCallback otherwise)."""
    value = data.get(name)
    if not isinstance(value, str) or not keys.valid_id(value):
        raise BadCallback(f"callback field {name} missing or malformed")
    return value


def text(data: Mapping[str, Any], name: str) -> str:
    """An optional short string as the provider sent it ("" when absent or not a string)."""
    value = data.get(name)
    return value[:64] if isinstance(value, str) else ""


def amount_of(data: Mapping[str, Any], name: str) -> int | None:
    value = data.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53:
        return None  # "1000", 1000.0, -5, missing: never coerced; the script calls it a mismatch
    return value


def meta(metadata: Mapping[str, Any], name: str) -> str:
    value = metadata.get(name)
    return value if isinstance(value, str) and keys.valid_charge_id(value) else ""


def route(key: object, metadata: Mapping[str, Any], key_name: str) -> tuple[str, str, str]:
    """(event id, our charge key, the metadata's event or "-") of a message about one of our
    charges: the event is the key's, else the one the metadata names. `key_name` is where the
    message carries the key, for the refusal."""
    if not isinstance(key, str) or not keys.valid_charge_id(key):
        raise BadCallback(f"{key_name} is missing or malformed")
    meta_event = meta(metadata, "event_id")
    event_id = keys.event_of_charge_key(key) or meta_event
    if not event_id:
        raise BadCallback(f"the message names no event ({key_name} or metadata.event_id)")
    return event_id, key, meta_event or "-"


class Provider(Protocol):
    """What the engine asks of a payment provider. Every call has a timeout; creating a charge
    or a refund carries an idempotency key, so a retry is the same attempt or refund. A timeout
    or a 5xx is ProviderTimeout (outcome unknown), never a decline; a 4xx is ProviderRefused."""

    name: str

    async def create_charge(
        self, charge_id: str, amount: int, currency: str, metadata: dict[str, str]
    ) -> ProviderCharge:
        """Ask for `amount` minor units under our idempotency key `charge_id`; `metadata`
        names the event, hold and charge (the adapter adds amount and currency)."""
        ...

    async def find_charge(self, charge_id: str) -> ProviderCharge | None:
        """The latest attempt made under our key, or None if the provider never saw it."""
        ...

    async def get_attempt(self, attempt_id: str) -> ProviderCharge | None:
        """The provider's record of one attempt, or None if it has none."""
        ...

    async def get_intent(self, intent_id: str) -> list[ProviderCharge]:
        """Every attempt made on one intent, oldest first ([] if it has none)."""
        ...

    async def refund(
        self, charge_key: str, attempt_id: str, *, amount: int | None = None, part: str = ""
    ) -> str:
        """Refund the captured attempt (by key when the attempt is unknown): all it still holds,
        idempotent per attempt (`refund-<attempt>`), or `amount` of it for a part of an order
        (ADR 0043), idempotent per part (`refund-<part>`); returns the provider's refund id."""
        ...

    async def money_movements(self) -> list[MoneyMovement]:
        """Every capture, refund and dispute movement the provider holds for us."""
        ...

    async def parse_callback(self, raw: bytes, headers: Mapping[str, str]) -> Callback | Ignored:
        """Verify the signature over the exact bytes received (BadSignature), then read the
        message (BadCallback) into what the deciding scripts check; may ask the provider for
        the intent a movement belongs to (ProviderTimeout)."""
        ...

    async def aclose(self) -> None: ...
