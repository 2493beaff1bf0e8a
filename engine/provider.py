"""Client for the payment provider's HTTP API (the simulator speaks the same protocol).

Every call has a timeout; creating a charge or a refund carries an idempotency key, so a retry
after a timeout is the same attempt. A timeout is reported as such, never as a decline: the
charge stays CHARGING and the provider's callback (or reconciliation) decides it."""

from dataclasses import dataclass
from typing import Any

import httpx


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
    def __init__(self, base_url: str, *, timeout_ms: int = 2_000, retries_max: int = 2) -> None:
        self.http = httpx.AsyncClient(
            base_url=base_url,
            timeout=httpx.Timeout(timeout_ms / 1000),
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
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
