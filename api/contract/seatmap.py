"""The seat map a page draws (api/routes/seatmap.py, ADR 0028): its layout, which the engine
encodes once when the event is created (engine/views/seatmap.py layout_json; a test decodes it
as this type), and every seat's state with the event's status, counters and clock."""

from typing import Annotated, Any, Literal, TypedDict

from msgspec import Meta

from api.contract.atoms import (
    EVENT_DETAILS_EXAMPLE,
    EVENT_ID,
    Amount,
    AtMs,
    Count,
    Currency,
    DetailFields,
)
from engine.views.seatmap import COLUMNS, SEATMAP_SEATS_MAX

SeatRow = Annotated[
    list[str | float | None],
    Meta(
        min_length=len(COLUMNS),
        max_length=len(COLUMNS),
        description="seat_id, section, row ('' if none), x, y (null when not positioned), "
        "price_level ('' if none), number (the seat's number in its row; '' if none)",
    ),
]


class SeatMapLayout(TypedDict):
    """The seat map a page draws: one row per seat, in rank order (the order of the states
    string of SeatMapState). Fixed once the event is created: cacheable."""

    columns: list[Annotated[str, Meta(extra_json_schema={"enum": list(COLUMNS)})]]
    positioned: Annotated[bool, Meta(description="every seat has x and y")]
    seats: Annotated[list[SeatRow], Meta(max_length=SEATMAP_SEATS_MAX, description="in rank order")]
    price_levels: Annotated[
        dict[str, Amount],
        Meta(description="price_level -> its price, when the event prices its levels (ADR 0038)"),
    ]


class SeatMapState(DetailFields):
    """Every seat's state, as of at most a quarter second ago, with the event's status, T0,
    counters and the server's clock."""

    event_id: str
    version: Annotated[str, Meta(description="changes with every seat move (the ETag)")]
    serial: Annotated[int, Meta(description="this server's snapshot number (a stream's `base`)")]
    server_time_ms: Annotated[AtMs, Meta(description="the Redis clock now: for countdowns")]
    status: Annotated[str, Meta(description="draft, open, closed, cancelled")]
    kind: Literal["seats"]
    currency: Currency
    opens_at_ms: Annotated[AtMs, Meta(description="T0 (0: not set)")]
    price_minor: Annotated[
        int, Meta(description="the price of every seat (price levels are names)")
    ]
    max_party: Annotated[int, Meta(description="seats one claim may ask for (0: the API's 6)")]
    hold_ttl_ms: int
    free: Count
    held: Count
    blocked: Count
    sold: Count
    recovering: Annotated[bool, Meta(description="the event is being rebuilt: it decides nothing")]
    states: Annotated[
        str,
        Meta(
            pattern="^[FHBS]*$",
            description="one character per seat in layout order: F free, H held, B blocked "
            "(a payment is in flight), S sold",
        ),
    ]


# Each answer and its example (api/contract/document.py).
EXAMPLES: dict[type, Any] = {
    SeatMapLayout: SeatMapLayout(
        columns=list(COLUMNS),
        positioned=True,
        seats=[
            ["A-1", "A", "1", 0.0, 0.0, "front", "1"],
            ["A-2", "A", "1", 30.0, 0.0, "front", "2"],
        ],
        price_levels={},
    ),
    SeatMapState: SeatMapState(
        event_id=EVENT_ID,
        version="9f2c51b0a4e7d3c8e6f1",
        serial=12,
        server_time_ms=1767261600000,
        status="open",
        kind="seats",
        currency="EUR",
        opens_at_ms=1767261590000,
        price_minor=4500,
        max_party=0,
        hold_ttl_ms=480000,
        free=2,
        held=1,
        blocked=0,
        sold=1,
        recovering=False,
        states="FHSF",
        **EVENT_DETAILS_EXAMPLE,
    ),
}
