"""Client for the payment provider's HTTP API (the simulator speaks the same protocol).

Every call has a timeout; creating a charge or a refund carries an idempotency key, so a retry
after a timeout is the same attempt. A timeout is reported as such, never as a decline: the
charge stays CHARGING and the provider's callback (or reconciliation) decides it."""

from dataclasses import dataclass
from typing import Any

import httpx

from engine import keys
from engine.holds import ProviderOutcome, ProviderReversal

# The provider's wire protocol, mapped once: an attempt's status, a callback's type, a closed
# dispute's status, and the kinds of money movement in its ledger.
OUTCOME_OF_STATUS = {"captured": "CAPTURED", "declined": "DECLINED", "failed": "FAILED"}
CALLBACK_OUTCOMES = {
    "charge.captured": "CAPTURED",
    "charge.declined": "DECLINED",
    "charge.failed": "FAILED",
}
CALLBACK_REVERSALS = {"refund.succeeded": "REFUND", "charge.dispute.created": "DISPUTE_OPENED"}
DISPUTE_CLOSED = "charge.dispute.closed"
DISPUTE_OUTCOMES = {"won": "DISPUTE_WON", "lost": "DISPUTE_LOST"}
DISPUTE_STILL_OUT = ("open", "lost")  # ProviderCharge.disputed values with the money withdrawn
LEDGER_MONEY_SIGN = {
    "capture": 1,
    "refund": -1,
    "dispute_withdrawal": -1,
    "dispute_reinstatement": 1,
}


class BadCallback(ValueError):
    """A callback that is not a message we can read (a 400 for the provider)."""


@dataclass(frozen=True, slots=True)
class Callback:
    """A parsed (not yet believed) provider callback, and the event it is routed to: the one
    the charge key we minted names, else the one its metadata names."""

    event_id: str
    message: ProviderOutcome | ProviderReversal


def parse_callback(event: Any) -> Callback:
    """Read a callback's fields as the provider sent them, never coercing a wrong type into a
    right one: the deciding script checks each against the charge we created (ADR 0014)."""
    if not isinstance(event, dict) or not isinstance(event.get("data"), dict):
        raise BadCallback("callback must be an object with data")
    data: dict[str, Any] = event["data"]
    metadata = data.get("metadata")
    if not isinstance(metadata, dict):
        raise BadCallback("callback data.metadata must be an object")
    kind = event.get("type")
    if kind not in CALLBACK_OUTCOMES and kind not in CALLBACK_REVERSALS and kind != DISPUTE_CLOSED:
        raise BadCallback(f"unknown callback type {kind!r}")
    provider_event_id = _field(event, "id")
    key = data.get("idempotency_key")
    if not isinstance(key, str) or not keys.valid_charge_id(key):
        raise BadCallback("callback idempotency_key missing or malformed")
    meta_event = _meta(metadata, "event_id")
    event_id = keys.event_of_charge_key(key) or meta_event
    if not event_id:
        raise BadCallback("callback names no event (key or metadata)")
    attempt_id = _field(data, "attempt_id")
    meta_event = meta_event or "-"  # "-": the metadata named no event at all
    if kind in CALLBACK_OUTCOMES:
        outcome = ProviderOutcome(
            provider_event_id,
            key,
            attempt_id,
            _field(data, "intent_id"),
            CALLBACK_OUTCOMES[kind],
            status=_text(data, "status"),
            amount=_amount(data),
            currency=_text(data, "currency"),
            meta_event=meta_event,
            meta_hold=_meta(metadata, "hold_id"),
            meta_charge=_meta(metadata, "charge_id"),
        )
        return Callback(event_id, outcome)
    reversal_kind = CALLBACK_REVERSALS.get(kind) or DISPUTE_OUTCOMES.get(_text(data, "status"))
    if reversal_kind is None:
        raise BadCallback("a closed dispute's status is won or lost")
    reversal = ProviderReversal(
        provider_event_id,
        key,
        attempt_id,
        reversal_kind,
        _amount(data),
        _text(data, "currency"),
        meta_event,
    )
    return Callback(event_id, reversal)


def _field(data: dict[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not keys.valid_id(value):
        raise BadCallback(f"callback field {name} missing or malformed")
    return value


def _text(data: dict[str, Any], name: str) -> str:
    """An optional short string as the provider sent it ("" when absent or not a string)."""
    value = data.get(name)
    return value[:64] if isinstance(value, str) else ""


def _amount(data: dict[str, Any]) -> int | None:
    value = data.get("amount")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53:
        return None  # "1000", 1000.0, -5, missing: never coerced; the script calls it a mismatch
    return value


def _meta(metadata: dict[str, Any], name: str) -> str:
    value = metadata.get(name)
    return value if isinstance(value, str) and keys.valid_charge_id(value) else ""


class ProviderTimeout(Exception):
    """The provider did not answer in time, or answered 5xx: the outcome is unknown."""


class ProviderRefused(Exception):
    """The provider answered 4xx: the request itself was refused."""


@dataclass(frozen=True, slots=True)
class ProviderCharge:
    """The provider's own record of one attempt (what reconciliation and refunds trust)."""

    attempt_id: str
    intent_id: str
    idempotency_key: str
    status: str  # processing | captured | declined | failed
    amount: int | None = None  # None: the provider sent something that is not an integer
    currency: str = ""
    metadata: dict[str, str] | None = None
    refunded: bool = False  # the provider has refunded it (ours or its own)
    disputed: str = ""  # "" | open | won | lost


class ProviderClient:
    def __init__(
        self,
        base_url: str,
        *,
        timeout_ms: int = 2_000,
        retries_max: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,  # tests: the simulator in process
    ) -> None:
        self.http = httpx.AsyncClient(
            base_url=base_url,
            timeout=httpx.Timeout(timeout_ms / 1000),
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
            transport=transport,
        )
        self.retries_max = retries_max

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _call(self, method: str, url: str, **kw: Any) -> dict[str, Any] | None:
        """JSON body of a 2xx answer, None for 404; retries transport errors and 5xx."""
        last: Exception | None = None
        for _ in range(self.retries_max + 1):
            try:
                r = await self.http.request(method, url, **kw)
            except httpx.HTTPError as exc:
                last = exc
                continue
            if r.status_code == 404:
                return None
            if r.status_code >= 500:
                last = ProviderTimeout(f"{method} {url}: {r.status_code}")
                continue
            if r.status_code >= 400:
                raise ProviderRefused(f"{method} {url}: {r.status_code} {r.text[:200]}")
            data: dict[str, Any] = r.json()
            return data
        raise ProviderTimeout(f"{method} {url}: {last!r}")

    async def create_charge(
        self, charge_id: str, amount: int, currency: str, metadata: dict[str, str]
    ) -> ProviderCharge:
        data = await self._call(
            "POST",
            "/v1/charges",
            json={
                "amount": amount,
                "currency": currency,
                "metadata": {**metadata, "amount": str(amount), "currency": currency},
            },
            headers={"Idempotency-Key": charge_id},
        )
        if data is None:
            raise ProviderRefused("charge endpoint not found")
        return _charge(data)

    async def find_charge(self, charge_id: str) -> ProviderCharge | None:
        data = await self._call("GET", "/v1/charges", params={"idempotency_key": charge_id})
        return _charge(data) if data else None

    async def get_attempt(self, attempt_id: str) -> ProviderCharge | None:
        """The provider's record of one attempt, or None if it has none."""
        data = await self._call("GET", f"/v1/charges/{attempt_id}")
        return _charge(data) if data else None

    async def refund(self, charge_key: str, attempt_id: str) -> str:
        """Refund the captured attempt; idempotent by attempt (one refund per attempt, whoever
        asks). Returns the refund id."""
        data = await self._call(
            "POST",
            "/v1/refunds",
            json={"attempt_id": attempt_id, "idempotency_key": charge_key},
            headers={"Idempotency-Key": f"refund-{attempt_id or charge_key}"},
        )
        if data is None:
            raise ProviderRefused("refund endpoint not found")
        return str(data["refund_id"])

    async def ledger(self) -> dict[str, Any]:
        data = await self._call("GET", "/v1/ledger")
        assert data is not None
        return data


def _charge(data: dict[str, Any]) -> ProviderCharge:
    amount = data.get("amount")
    metadata = data.get("metadata")
    return ProviderCharge(
        attempt_id=data["attempt_id"],
        intent_id=data["intent_id"],
        idempotency_key=data["idempotency_key"],
        status=data["status"],
        amount=amount if isinstance(amount, int) and not isinstance(amount, bool) else None,
        currency=str(data.get("currency") or ""),
        metadata=(
            {str(k): str(v) for k, v in metadata.items()} if isinstance(metadata, dict) else {}
        ),
        refunded=bool(data.get("refunded")),
        disputed=str(data.get("disputed") or ""),
    )
