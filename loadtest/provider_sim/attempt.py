"""What the simulated provider keeps of one payment attempt: its money (captured, refunded in
full or in part), its dispute, and where the buyer's page stands with it."""

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Attempt:
    attempt_id: str
    intent_id: str
    idempotency_key: str
    amount: int
    currency: str
    metadata: dict[str, Any]
    status: str = "processing"  # processing | captured | declined | failed
    created_s: float = field(default_factory=time.time)
    late_until_s: float = 0.0  # a late success answers every call for its key 504 until then
    refunds: list[str] = field(default_factory=list)
    disputed: str = ""  # "" | open | won | lost
    disputed_s: float = 0.0  # when the dispute was opened
    captured_amount: int = 0  # what was actually captured (a planted capture may differ)
    refunded_amount: int = 0  # what refunds gave back so far (a part of an order: less)
    # While the buyer's page has not confirmed it (buyer_confirms): requires_payment_method,
    # then requires_action while 3-D Secure asks; "" once confirmed (or never asked).
    stage: str = ""

    @property
    def unrefunded(self) -> int:
        """What the attempt still holds (refunds may give back part of it, never more)."""
        return self.captured_amount - self.refunded_amount if self.status == "captured" else 0

    @property
    def refunded(self) -> bool:
        """Refunded in full, as Stripe's `refunded` says."""
        return self.status == "captured" and self.refunded_amount >= self.captured_amount
