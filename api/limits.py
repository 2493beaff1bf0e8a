"""Per client address limits for the routes that are not the claim path (login, admin): a token
bucket per address, in this process. The claim and charge-start limits are per login and live in
the deciding scripts (lua/_lib.lua `take_token`), where they cost no extra round trip.

Behind a reverse proxy the address is the proxy's unless uvicorn is told to trust its
`X-Forwarded-For` (`--forwarded-allow-ips`, docs/deploy.md)."""

import math
import time
from dataclasses import dataclass

from starlette.requests import Request

from api.errors import ApiError

ADDRESSES_MAX = 100_000  # buckets kept per process; past it the oldest half is dropped


@dataclass(slots=True)
class _Bucket:
    tokens: float
    stamp: float


class AddressLimiter:
    def __init__(self, per_s: int, burst: int) -> None:
        self.per_s = per_s
        self.burst = burst
        self._buckets: dict[str, _Bucket] = {}

    def take(self, request: Request) -> None:
        """Spend one token of the caller's address, or answer 429 rate_limited."""
        if self.per_s <= 0:
            return
        address = request.client.host if request.client else "unknown"
        now = time.monotonic()
        bucket = self._buckets.get(address)
        if bucket is None:
            if len(self._buckets) >= ADDRESSES_MAX:
                for stale in list(self._buckets)[: ADDRESSES_MAX // 2]:  # oldest first
                    del self._buckets[stale]
            bucket = self._buckets[address] = _Bucket(float(self.burst), now)
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.stamp) * self.per_s)
        bucket.stamp = now
        if bucket.tokens < 1:
            wait_s = math.ceil((1 - bucket.tokens) / self.per_s)
            raise ApiError(429, "rate_limited", "too many requests from this address", wait_s)
        bucket.tokens -= 1
