"""The merchant webhook sender (ADR 0024): a loop of `onsale ledger`, beside the writer.

Each pass claims the due deliveries of live endpoints (FOR UPDATE SKIP LOCKED, at most
`batch_max`), leasing each for one attempt's timeout and a margin, and counting the attempt
before it is made. It POSTs them at once (httpx, a whole-request timeout, no redirects
followed), signed as Standard Webhooks with the endpoint's secret (and the previous one during a
rotation), then records what each got in one transaction: a 2xx is delivered; anything else,
or no answer, is tried again after an exponential, jittered delay (never sooner than the
endpoint's Retry-After), until the next attempt would pass the maximum age, when the delivery
is failed (an operator may replay it). A 410 Gone disables the endpoint.

A sender killed mid-attempt records nothing: the lease passes and the delivery is due again, so
the merchant may receive it twice (the same webhook-id), never zero times."""

import asyncio
import logging
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx

from engine.model.webhooks import signed_headers
from engine.store.loops import repeat
from persistence.metrics import WEBHOOK_FIGURES_S, WebhookMetrics
from persistence.queries import Q
from persistence.settings import SenderSettings

log = logging.getLogger("onsale.webhooks")

LEASE_MARGIN_MS = 5_000  # a claimed delivery stays leased this much past one attempt's timeout
ERROR_CHARS_MAX = 300  # of the last error kept in the delivery log
RETRY_AFTER_MAX_S = 86_400
EXPECTED = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError)
PRUNE_EVERY_S = 600.0  # the delivery log is pruned at most this often
PRUNE_BATCH = 10_000  # deliveries deleted by one prune


@dataclass
class SenderStats:
    attempts: int = 0
    delivered: int = 0
    not_delivered: int = 0
    errors: int = 0
    pruned: int = 0  # done deliveries dropped from the log after the retention


@dataclass(frozen=True, slots=True)
class Attempt:
    """What one attempt of one delivery got. `status`: the HTTP status (None: no answer)."""

    delivery_id: int
    endpoint_id: str
    attempts: int  # this one included
    status: int | None
    error: str = ""
    retry_after_ms: int = 0

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def retry_delay_ms(settings: SenderSettings, attempts: int, retry_after_ms: int = 0) -> int:
    """The wait before the next attempt, after `attempts` failed ones: `backoff_ms` doubled
    each time, capped at `backoff_max_ms`, times a jitter in [0.5, 1]; never less than what the
    endpoint asked (Retry-After), capped likewise."""
    base = min(settings.backoff_max_ms, settings.backoff_ms * 2 ** min(attempts - 1, 40))
    delay = int(base * random.uniform(0.5, 1.0))
    return max(1, delay, min(retry_after_ms, settings.backoff_max_ms))


def retry_after_ms(response: httpx.Response) -> int:
    """A Retry-After of whole seconds, in ms (0: none, or a form we do not read)."""
    raw = response.headers.get("retry-after", "").strip()
    if raw.isascii() and raw.isdigit() and len(raw) <= 9:
        return min(int(raw), RETRY_AFTER_MAX_S) * 1000
    return 0


class WebhookSender:
    def __init__(
        self,
        pool: asyncpg.Pool,
        settings: SenderSettings,
        *,
        client: httpx.AsyncClient | None = None,
        metrics: WebhookMetrics | None = None,
    ) -> None:
        self.pool, self.settings, self.metrics = pool, settings, metrics
        self._shown_at = -float("inf")  # when the log's figures were last read for metrics
        self.client = client or httpx.AsyncClient(
            timeout=settings.timeout_ms / 1000, follow_redirects=False
        )
        self.stats = SenderStats()
        self._pruned_at = -float("inf")

    @property
    def lease_ms(self) -> int:
        return self.settings.timeout_ms + min(LEASE_MARGIN_MS, self.settings.timeout_ms)

    async def show_figures(self) -> None:
        """The delivery log's figures per endpoint, into the metrics."""
        assert self.metrics is not None
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(Q["webhook_delivery_figures"])
        self.metrics.show(list(rows))
        self._shown_at = time.monotonic()

    async def prune(self) -> int:
        """Drop done deliveries older than the log's retention, a bounded batch at a time."""
        async with self.pool.acquire() as conn:
            done = await conn.execute(
                Q["prune_webhook_deliveries"], self.settings.log_retention_ms, PRUNE_BATCH
            )
        n = int(done.split()[-1])
        self.stats.pruned += n
        self._pruned_at = time.monotonic()
        return n

    async def run_once(self) -> bool:
        """One batch: claim, send, record. True when a full batch was due (more may be).
        The log is pruned at most once every PRUNE_EVERY_S."""
        if time.monotonic() - self._pruned_at >= PRUNE_EVERY_S:
            await self.prune()
        if self.metrics is not None and time.monotonic() - self._shown_at >= WEBHOOK_FIGURES_S:
            await self.show_figures()
        async with self.pool.acquire() as conn:
            due = await conn.fetch(
                Q["claim_webhook_deliveries"], self.settings.batch_max, self.lease_ms
            )
        if not due:
            return False
        attempts = await asyncio.gather(*(self.attempt(row) for row in due))
        await self.record(attempts)
        return len(due) >= self.settings.batch_max

    async def attempt(self, row: Any) -> Attempt:
        """POST one claimed delivery; the response's body is never read."""
        secrets_in_use = (row["secret"], row["previous_secret"])
        headers = signed_headers(row["message_id"], row["body"], secrets_in_use, datetime.now(UTC))
        ident = (row["delivery_id"], row["endpoint_id"], row["attempts"])
        self.stats.attempts += 1
        try:
            # httpx bounds each read and write; this bounds the whole request (a server that
            # drips its answer byte by byte included), within the delivery's lease.
            async with (
                asyncio.timeout(self.settings.timeout_ms / 1000),
                self.client.stream(
                    "POST", row["url"], content=row["body"].encode(), headers=headers
                ) as response,
            ):
                status = response.status_code
                wait_ms = retry_after_ms(response)
        except (httpx.HTTPError, httpx.InvalidURL, TimeoutError) as exc:
            return Attempt(*ident, None, f"{type(exc).__name__}: {exc}"[:ERROR_CHARS_MAX])
        error = "" if 200 <= status < 300 else f"HTTP {status}"
        return Attempt(*ident, status, error, wait_ms)

    async def record(self, attempts: list[Attempt]) -> None:
        """Every attempt's outcome, in one transaction."""
        done = [(a.delivery_id, a.status) for a in attempts if a.delivered]
        again = [
            (
                a.delivery_id,
                a.status,
                a.error,
                retry_delay_ms(self.settings, a.attempts, a.retry_after_ms),
                self.settings.max_age_ms,
            )
            for a in attempts
            if not a.delivered
        ]
        gone = sorted({(a.endpoint_id,) for a in attempts if a.status == 410})
        async with self.pool.acquire() as conn, conn.transaction():
            for query, rows in (
                ("webhook_delivered", done),
                ("webhook_not_delivered", again),
                ("webhook_endpoint_gone", gone),
            ):
                if rows:
                    await conn.executemany(Q[query], rows)
        self.stats.delivered += len(done)
        self.stats.not_delivered += len(again)
        failed: dict[str, list[Attempt]] = {}
        for a in attempts:
            if not a.delivered:
                failed.setdefault(a.endpoint_id, []).append(a)
        for endpoint_id, lost in failed.items():  # one line per endpoint and batch
            log.info("webhooks to %s: %d not delivered (%s)", endpoint_id, len(lost), lost[0].error)

    async def run(self, stop: asyncio.Event) -> SenderStats:
        """Send until `stop` is set; database outages are retried with backoff (deliveries wait
        in the ledger meanwhile)."""

        def failed() -> None:
            self.stats.errors += 1

        try:
            await repeat(
                "webhooks",
                self.run_once,
                stop,
                interval_s=self.settings.interval_ms / 1000,
                expected=EXPECTED,
                log=log,
                on_error=failed,
            )
        finally:
            await self.client.aclose()
        return self.stats
