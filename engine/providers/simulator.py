"""The provider simulator's own protocol (loadtest/provider_sim/server.py), behind the Provider
interface: JSON over HTTP with an Idempotency-Key header, callbacks signed with
`Onsale-Signature` (engine/model/signing.py, ADR 0006).

Every call has a timeout; transport errors and 5xx are retried a bounded number of times (the
same key, so the same attempt), then reported as ProviderTimeout, never as a decline: the charge
stays CHARGING and the callback (or reconciliation) decides it."""

import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import orjson

from engine.model.holds import ProviderOutcome, ProviderReversal
from engine.model.signing import HEADER, verify
from engine.providers.base import (
    BadCallback,
    Callback,
    Ignored,
    MoneyMovement,
    ProviderCharge,
    ProviderRefused,
    ProviderTimeout,
    amount_of,
    field,
    meta,
    route,
    text,
)

# The simulator's wire protocol, mapped once: a callback's type and a closed dispute's status.
CALLBACK_OUTCOMES = {
    "charge.captured": "CAPTURED",
    "charge.declined": "DECLINED",
    "charge.failed": "FAILED",
}
CALLBACK_REVERSALS = {"refund.succeeded": "REFUND", "charge.dispute.created": "DISPUTE_OPENED"}
DISPUTE_CLOSED = "charge.dispute.closed"
DISPUTE_OUTCOMES = {"won": "DISPUTE_WON", "lost": "DISPUTE_LOST"}


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
    provider_event_id = field(event, "id")
    event_id, key, meta_event = route(data.get("idempotency_key"), metadata, "data.idempotency_key")
    attempt_id = field(data, "attempt_id")
    if kind in CALLBACK_OUTCOMES:
        outcome = ProviderOutcome(
            provider_event_id,
            key,
            attempt_id,
            field(data, "intent_id"),
            CALLBACK_OUTCOMES[kind],
            status=text(data, "status"),
            amount=amount_of(data, "amount"),
            currency=text(data, "currency"),
            meta_event=meta_event,
            meta_hold=meta(metadata, "hold_id"),
            meta_charge=meta(metadata, "charge_id"),
        )
        return Callback(event_id, outcome)
    reversal_kind = CALLBACK_REVERSALS.get(kind) or DISPUTE_OUTCOMES.get(text(data, "status"))
    if reversal_kind is None:
        raise BadCallback("a closed dispute's status is won or lost")
    # A refund names the attempt's refunded total (as Stripe's charge.refunded does), so a
    # part of an order is told apart from the rest leaving (ADR 0043); a message without it
    # (older simulators) names its own amount.
    total = "amount_refunded" if reversal_kind == "REFUND" and "amount_refunded" in data else ""
    reversal = ProviderReversal(
        provider_event_id,
        key,
        attempt_id,
        reversal_kind,
        amount_of(data, total or "amount"),
        text(data, "currency"),
        meta_event,
    )
    return Callback(event_id, reversal)


class SimulatorProvider:
    """The simulator's HTTP API. `callback_secrets` verify its callbacks (the current secret
    and, during a rollover, the previous one); a process that takes no callbacks passes none."""

    name = "simulator"

    def __init__(
        self,
        base_url: str,
        *,
        timeout_ms: int = 2_000,
        retries_max: int = 2,
        callback_secrets: Sequence[str] = (),
        tolerance_s: int = 300,
        transport: httpx.AsyncBaseTransport | None = None,  # tests: the simulator in process
    ) -> None:
        self.http = httpx.AsyncClient(
            base_url=base_url,
            timeout=httpx.Timeout(timeout_ms / 1000),
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
            transport=transport,
        )
        self.retries_max = retries_max
        self.callback_secrets = tuple(callback_secrets)
        self.tolerance_s = tolerance_s

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
        return record(data)

    async def find_charge(self, charge_id: str) -> ProviderCharge | None:
        data = await self._call("GET", "/v1/charges", params={"idempotency_key": charge_id})
        return record(data) if data else None

    async def get_attempt(self, attempt_id: str) -> ProviderCharge | None:
        data = await self._call("GET", f"/v1/charges/{attempt_id}")
        return record(data) if data else None

    async def get_intent(self, intent_id: str) -> list[ProviderCharge]:
        data = await self._call("GET", f"/v1/intents/{intent_id}")
        return [record(a) for a in data["attempts"]] if data else []

    async def refund(
        self, charge_key: str, attempt_id: str, *, amount: int | None = None, part: str = ""
    ) -> str:
        """Refund what the captured attempt still holds, or `amount` of it (a part); idempotent
        by attempt, or by part. Returns the refund id."""
        body: dict[str, Any] = {"attempt_id": attempt_id, "idempotency_key": charge_key}
        if amount is not None:
            body["amount"] = amount
        data = await self._call(
            "POST",
            "/v1/refunds",
            json=body,
            headers={"Idempotency-Key": f"refund-{part or attempt_id or charge_key}"},
        )
        if data is None:
            raise ProviderRefused("refund endpoint not found")
        return str(data["refund_id"])

    async def ledger(self) -> dict[str, Any]:
        """The simulator's whole ledger with its totals (tools and tests only)."""
        data = await self._call("GET", "/v1/ledger")
        if data is None:
            raise ProviderRefused("ledger endpoint not found")
        return data

    async def money_movements(self) -> list[MoneyMovement]:
        entries: list[MoneyMovement] = (await self.ledger())["entries"]
        return entries

    async def parse_callback(self, raw: bytes, headers: Mapping[str, str]) -> Callback | Ignored:
        verify(self.callback_secrets, raw, headers.get(HEADER), time.time(), self.tolerance_s)
        try:
            return parse_callback(orjson.loads(raw))
        except orjson.JSONDecodeError:
            raise BadCallback("callback is not JSON") from None


def record(data: dict[str, Any]) -> ProviderCharge:
    """The simulator's record of an attempt (its GET and create answers)."""
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
        amount_refunded=int(data.get("amount_refunded") or 0),
        disputed=str(data.get("disputed") or ""),
    )
