"""Stripe behind the Provider interface, through the official `stripe` library (ADR 0023).

A charge of ours is one PaymentIntent, created under our charge id as its idempotency key, with
our ids in its metadata; cards only, confirmed by the buyer's browser (Stripe.js) with the
intent's client secret. Its Charges are the attempts. The library does the HTTP: form-encoded
requests, Stripe's error format, retries of connection errors, 409s and 5xx with its own
jittered backoff under the same idempotency key (`max_network_retries`), and the webhook
signature (`Stripe-Signature`, tolerance). What remains unknown after its retries (a timeout, a
5xx, a rate limit) is ProviderTimeout; a refusal (4xx) is ProviderRefused.

The mapping of Stripe's objects and events to the engine's messages is engine/providers/
stripe_events.py; this module only asks Stripe and reads its answers."""

import asyncio
import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import orjson
import stripe
from stripe.params import RefundCreateParams

from engine.config.settings import StripeSettings
from engine.model import keys
from engine.model.signing import BadSignature
from engine.providers import stripe_events as ev
from engine.providers.base import (
    BadCallback,
    Callback,
    Ignored,
    MoneyMovement,
    ProviderCharge,
    ProviderRefused,
    ProviderTimeout,
    field,
)

SIGNATURE_HEADER = "Stripe-Signature"
PAGE = 100  # objects per list request (Stripe's maximum)
UNKNOWN_OUTCOME = (stripe.APIConnectionError, stripe.APIError, stripe.RateLimitError)


class HttpxForStripe(stripe.HTTPClient):
    """The library's HTTP client interface over one pooled httpx client. Only the transport is
    ours: retries, backoff, idempotency keys and error parsing stay the library's."""

    name = "onsale-httpx"

    def __init__(self, timeout_s: float, transport: httpx.AsyncBaseTransport | None = None):
        super().__init__()
        self.http = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s),
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
            transport=transport,
        )

    async def request_async(
        self, method: str, url: str, headers: Mapping[str, str], post_data: Any = None
    ) -> tuple[bytes, int, Mapping[str, str]]:
        try:
            r = await self.http.request(
                method.upper(), url, headers=dict(headers), content=post_data or None
            )
        except httpx.HTTPError as exc:  # a timeout included: retried under the same key
            raise stripe.APIConnectionError(  # type: ignore[no-untyped-call]
                f"{type(exc).__name__} talking to Stripe", should_retry=True
            ) from exc
        return r.content, r.status_code, r.headers

    async def sleep_async(self, secs: float) -> None:
        await asyncio.sleep(secs)

    async def close_async(self) -> None:
        await self.http.aclose()


@contextlib.contextmanager
def answers(what: str) -> Iterator[None]:
    """The library's errors in the engine's words."""
    try:
        yield
    except UNKNOWN_OUTCOME as exc:
        raise ProviderTimeout(f"{what}: {type(exc).__name__} {exc.http_status}") from exc
    except stripe.StripeError as exc:
        raise ProviderRefused(f"{what}: {exc.http_status} {exc.code or ''}".strip()) from exc


def missing(exc: stripe.StripeError) -> bool:
    return isinstance(exc, stripe.InvalidRequestError) and exc.http_status == 404


def plain(o: Any) -> dict[str, Any]:
    """A library object as the plain JSON Stripe sent (an unexpanded id stays an id)."""
    if isinstance(o, stripe.StripeObject):
        return o.to_dict()
    return o if isinstance(o, dict) else {}


class StripeProvider:
    name = "stripe"

    def __init__(
        self,
        settings: StripeSettings,
        *,
        timeout_ms: int = 2_000,
        tolerance_s: int = 300,
        transport: httpx.AsyncBaseTransport | None = None,  # tests: a server in process
    ) -> None:
        self.settings, self.tolerance_s = settings, tolerance_s
        self.transport = HttpxForStripe(timeout_ms / 1000, transport)
        self.client = stripe.StripeClient(
            settings.api_key,
            base_addresses={"api": settings.api_base} if settings.api_base else None,
            max_network_retries=settings.max_network_retries,
            http_client=self.transport,
        )

    async def aclose(self) -> None:
        await self.transport.close_async()

    async def create_charge(
        self, charge_id: str, amount: int, currency: str, metadata: dict[str, str]
    ) -> ProviderCharge:
        with answers("create payment intent"):
            pi = await self.client.v1.payment_intents.create_async(
                {
                    "amount": amount,
                    "currency": currency.lower(),
                    "allowed_payment_method_types": ["card"],
                    "metadata": {**metadata, "amount": str(amount), "currency": currency},
                },
                {"idempotency_key": charge_id},
            )
        return ev.record_of(plain(pi), None)

    async def find_charge(self, charge_id: str) -> ProviderCharge | None:
        """The intent our key created, found by its metadata (Stripe's search: fresh within
        about a minute, so reconciliation asks only about charges older than that)."""
        if not keys.valid_charge_id(charge_id):
            raise ProviderRefused(f"not a charge key of ours: {charge_id!r}")
        with answers("search payment intents"):
            found = await self.client.v1.payment_intents.search_async(
                {
                    "query": f"metadata['charge_id']:'{charge_id}'",
                    "limit": 10,
                    "expand": ["data.latest_charge"],
                }
            )
        intents = [plain(pi) for pi in found.data]
        if not intents:
            return None
        pi = max(intents, key=lambda p: int(p.get("created") or 0))
        charge = pi.get("latest_charge")
        if not isinstance(charge, dict):
            return ev.record_of(pi, None)
        return ev.record_of(pi, charge, await self._dispute_status(charge))

    async def get_attempt(self, attempt_id: str) -> ProviderCharge | None:
        with answers("retrieve charge"):
            try:
                charge = plain(
                    await self.client.v1.charges.retrieve_async(
                        attempt_id, {"expand": ["payment_intent"]}
                    )
                )
            except stripe.StripeError as exc:
                if missing(exc):
                    return None
                raise
        return ev.record_of(
            plain(charge.get("payment_intent")), charge, await self._dispute_status(charge)
        )

    async def get_intent(self, intent_id: str) -> list[ProviderCharge]:
        pi = await self._intent(intent_id)
        if not pi:
            return []
        with answers("list charges"):
            listed = await self.client.v1.charges.list_async(
                {"payment_intent": intent_id, "limit": PAGE}
            )
            charges = [plain(c) async for c in listed.auto_paging_iter()]
        charges.sort(key=lambda c: int(c.get("created") or 0))
        return [ev.record_of(pi, c, await self._dispute_status(c)) for c in charges]

    async def refund(
        self, charge_key: str, attempt_id: str, *, amount: int | None = None, part: str = ""
    ) -> str:
        """Refund the attempt (or, when it is unknown, the intent our key created): what it
        still holds (Stripe's default), once per attempt, or `amount` of it once per part; a
        charge Stripe already refunded answers with that refund."""
        params: RefundCreateParams = {
            "metadata": {
                "charge_id": charge_key,
                "event_id": keys.event_of_charge_key(charge_key) or "",
            }
        }
        if amount is not None:
            params["amount"] = amount
        if attempt_id:
            params["charge"] = attempt_id
        else:
            found = await self.find_charge(charge_key)
            if found is None:
                raise ProviderRefused(f"no payment intent for {charge_key}")
            params["payment_intent"] = found.intent_id
        with answers("create refund"):
            try:
                refund = await self.client.v1.refunds.create_async(
                    params, {"idempotency_key": f"refund-{part or attempt_id or charge_key}"}
                )
            except stripe.InvalidRequestError as exc:
                if exc.code != "charge_already_refunded" or not attempt_id:
                    raise
                return await self._refund_of(attempt_id)
        if refund.status in ("failed", "canceled"):
            raise ProviderRefused(f"refund {refund.id} {refund.status}")
        return str(refund.id)

    async def money_movements(self) -> list[MoneyMovement]:
        """Captures and refunds of every charge created within the lookback, and every dispute
        opened within it (with its charge's own movements when the charge is older)."""
        since = int(time.time()) - self.settings.lookback_days * 86_400
        out: list[MoneyMovement] = []
        seen: set[str] = set()
        with answers("list charges"):
            charges = await self.client.v1.charges.list_async(
                {"limit": PAGE, "created": {"gte": since}, "expand": ["data.payment_intent"]}
            )
            async for c in charges.auto_paging_iter():
                charge = plain(c)
                seen.add(str(charge.get("id")))
                out += ev.charge_movements(charge, plain(charge.get("payment_intent")))
        with answers("list disputes"):
            disputes = await self.client.v1.disputes.list_async(
                {"limit": PAGE, "created": {"gte": since}, "expand": ["data.charge.payment_intent"]}
            )
            async for d in disputes.auto_paging_iter():
                dispute = plain(d)
                charge = plain(dispute.get("charge"))
                pi = plain(charge.get("payment_intent"))
                if charge and charge.get("id") not in seen:
                    seen.add(str(charge.get("id")))
                    out += ev.charge_movements(charge, pi)
                out += ev.dispute_movements(dispute, pi)
        return out

    async def parse_callback(self, raw: bytes, headers: Mapping[str, str]) -> Callback | Ignored:
        try:
            stripe.WebhookSignature.verify_header(
                raw, headers.get(SIGNATURE_HEADER), self.settings.webhook_secret, self.tolerance_s
            )
        except stripe.SignatureVerificationError as exc:
            raise BadSignature(str(exc.user_message or "bad Stripe-Signature")) from None
        except UnicodeDecodeError:
            raise BadSignature("the body is not what Stripe signs (UTF-8 JSON)") from None
        try:
            event = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise BadCallback("callback is not JSON") from None
        if not isinstance(event, dict):
            raise BadCallback("callback must be an object")
        kind = event.get("type")
        if kind in ev.OUTCOME_EVENTS:
            return ev.outcome_of(event)
        if kind not in ev.REVERSAL_EVENTS:
            return Ignored(field(event, "id"), f"type:{kind}")
        found = ev.reversal_kind(event)
        if isinstance(found, Ignored):
            return found
        reversal, moved = found
        return ev.reversal_of(event, reversal, moved, await self._intent_of(moved))

    # -- lookups ------------------------------------------------------------------------------

    async def _intent(self, intent_id: str) -> dict[str, Any]:
        """The intent, or {} if Stripe has none by that id."""
        with answers("retrieve payment intent"):
            try:
                return plain(await self.client.v1.payment_intents.retrieve_async(intent_id))
            except stripe.StripeError as exc:
                if missing(exc):
                    return {}
                raise

    async def _intent_of(self, moved: Mapping[str, Any]) -> dict[str, Any]:
        """The intent a refund or dispute (or a Charge) belongs to; {} when none is ours to
        find (the message is then not ours)."""
        intent_id, attempt_id = ev.intent_ref(moved), ev.attempt_ref(moved)
        if not intent_id and attempt_id:
            attempt = await self.get_attempt(attempt_id)
            intent_id = attempt.intent_id if attempt else ""
        return await self._intent(intent_id) if intent_id else {}

    async def _dispute_status(self, charge: Mapping[str, Any]) -> str:
        """The status of the charge's latest dispute ("" when it has none)."""
        if charge.get("disputed") is not True:
            return ""
        with answers("list disputes"):
            found = await self.client.v1.disputes.list_async(
                {"charge": str(charge.get("id")), "limit": 10}
            )
        disputes = sorted((plain(d) for d in found.data), key=lambda d: int(d.get("created") or 0))
        return str(disputes[-1].get("status") or "") if disputes else ""

    async def _refund_of(self, attempt_id: str) -> str:
        """The refund Stripe already made of the attempt."""
        with answers("list refunds"):
            found = await self.client.v1.refunds.list_async({"charge": attempt_id, "limit": 1})
        if not found.data:
            raise ProviderRefused(f"{attempt_id} is refunded but lists no refund")
        return str(found.data[0].id)
