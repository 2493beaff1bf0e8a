"""A claim through the sold-out gate (ADR 0012): the store decides a claim in one script call
and knows nothing of the gate; the gate wraps it. With a memory (an API process's), a claim of
an event Redis has said is sold out is refused here, without Redis; otherwise it goes on holding
one of the event's places in flight until its answer, which widens the window when it won and
turns a SOLD_OUT into a memory. Without one (the workers, the tools), a claim is the store's."""

import time
from typing import Unpack

from engine.gate.soldout import SoldOutMemory
from engine.model import errors, keys
from engine.model.holds import Claimed
from engine.model.stock_lines import Goods
from engine.store import Store

WON: list[str] = [
    "OK"
]  # what the gate is told of a claim that took its seats (it widens the window)
ANSWERED: list[str] = []  # of any other answer, or of a failure


class GatedClaims:
    def __init__(self, store: Store, memory: SoldOutMemory | None) -> None:
        self.store, self.memory = store, memory

    async def claim(
        self, event_id: str, login: str, hold_id: str, seat_id: str | None = None, *,
        admitted: bool = False,  # already holds a place at the gate (api/claim_front/asgi_lane.py)
        **goods: Unpack[Goods],
    ) -> Claimed:  # fmt: skip
        """Store.claim's claim, asked at the gate first (`admitted`: the claim's place in
        flight was taken already, in the refusal lane)."""
        memory = self.memory
        if memory is None:
            return await self.store.claim(event_id, login, hold_id, seat_id, **goods)
        if not keys.valid_id(hold_id) or not login:
            raise ValueError("hold_id and login are required")
        if await memory.admit(event_id, hold_id, self.store.timeout_s, admitted):
            raise errors.SoldOut(f"claim {hold_id}: SOLD_OUT (remembered)", reply=[])
        sent_at = time.monotonic()
        try:
            claimed = await self.store.claim(event_id, login, hold_id, seat_id, **goods)
        except errors.SoldOut as exc:
            memory.release(event_id, ANSWERED)
            memory.sold_out(event_id, restocks_of(exc), sent_at)
            raise
        except BaseException:
            memory.release(event_id, ANSWERED)
            raise
        memory.release(event_id, ANSWERED if claimed.replay else WON)  # a win widens the window
        return claimed


def restocks_of(exc: errors.SoldOut) -> int:
    """The event's restocks count a SOLD_OUT reply carries (the memory is of that count)."""
    rest = exc.details.get("reply")
    return int(rest[0]) if isinstance(rest, list) and rest else 0
