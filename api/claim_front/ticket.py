"""A claim's ticket: what the claim front knows of one claim, carried in its ASGI scope under one
key from the connection (api/claim_front/connection.py) through the ASGI lane
(api/claim_front/asgi_lane.py) to the claim route (api/routes/checkout.py) and its wrapper
(api/context.py `endpoint`)."""

from dataclasses import dataclass
from typing import Any

from engine.model.errors import EngineError

KEY = "onsale.claim"


@dataclass(slots=True, eq=False)
class Ticket:
    started: float  # perf_counter() when the front took the claim: its access line counts waits
    looked: bool = False  # its connection asked the gate already (placed, or `refusal` set)
    placed: bool = False  # it holds a place in flight; the store's claim takes it over
    refusal: EngineError | None = None  # the front's answer to it, when it refuses


def ticket_of(scope: Any) -> Ticket | None:
    ticket: Ticket | None = scope.get(KEY)
    return ticket


def give(scope: Any, ticket: Ticket) -> Ticket:
    scope[KEY] = ticket
    return ticket


def take_place(scope: Any) -> bool:
    """The claim's place in flight, taken over by the store's claim (api/routes/checkout.py):
    True once, when the front took one for it."""
    ticket: Ticket | None = scope.get(KEY)
    if ticket is None or not ticket.placed:
        return False
    ticket.placed = False
    return True
