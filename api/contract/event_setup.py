"""What an admin sends to set an event's sale up and run it (api/routes/admin.py, stock.py,
listings.py, seatmap.py): the create (a seat map, or stock locations and SKUs; ADR 0022, 0028,
0038), the open, a stock correction and the cancel. Each field is bounded by api/validate.py
LIMITS; each handler accepts exactly the fields its type declares (another one is a 400)."""

from typing import Annotated, Any, NotRequired, TypedDict

from msgspec import Meta

from api.contract.atoms import EVENT_ID, Id, Kind, StockId, limited, named
from api.contract.catalogue import EventDetailsChange
from api.validate import LIMITS, SEATS_MAX, SECTION_CHARS_MAX
from engine.model.states import LatePolicy, ReversalPolicy


class SeatPlace(TypedDict):
    """A seat's place on the drawn map (ADR 0028), which a seat of the create may name."""

    row: NotRequired[
        Annotated[str, limited("row", description="the row's label, shown on the page")]
    ]
    number: NotRequired[
        Annotated[
            str,
            limited("seat_number", description="the seat's number in its row, as printed on it"),
        ]
    ]
    x: NotRequired[
        Annotated[
            float,
            limited("x", description="position on the drawn map; with y, on every seat or none"),
        ]
    ]
    y: NotRequired[Annotated[float, limited("y", description="position on the drawn map; with x")]]
    price_level: NotRequired[
        Annotated[
            str,
            limited(
                "price_level",
                description="a price level's name, shown on the page; with the event's "
                "price_levels, it sets the seat's price (ADR 0038)",
            ),
        ]
    ]


class SeatSpec(SeatPlace):
    """A seat of the map; its rank defaults to its position (lowest: best)."""

    seat_id: Id
    rank: NotRequired[Annotated[float, limited("rank")]]
    section: NotRequired[Annotated[str, Meta(max_length=SECTION_CHARS_MAX)]]


class SkuSpec(TypedDict):
    """A SKU on sale with its price and its initial count at each location (unnamed: 0),
    recorded as a correction."""

    sku: StockId
    price_minor: Annotated[int, limited("price_minor")]
    on_hand: NotRequired[
        Annotated[
            dict[str, Annotated[int, limited("on_hand")]],
            Meta(
                max_length=int(LIMITS["locations"].high),
                description="location -> units on hand (locations of the event only)",
            ),
        ]
    ]


class CreateEventRequest(EventDetailsChange):
    """kind seats (default): `seats` (and optionally price_minor, price_levels, max_party); kind
    stock: `locations` and `skus` instead (no seats, max_party, price_minor or price_levels)."""

    event_id: Id
    kind: NotRequired[Annotated[Kind, named("EventKind"), Meta(description="default seats")]]
    login_cap: NotRequired[
        Annotated[
            Annotated[int, limited("login_cap")] | None,
            Meta(
                description="units a login may hold and buy here; 0: none; null: the "
                "deployment's ONSALE_LOGIN_CAP"
            ),
        ]
    ]
    max_party: NotRequired[
        Annotated[int, limited("max_party", description="seat events: seats one claim may ask for")]
    ]
    locations: NotRequired[
        Annotated[
            list[StockId],
            limited(
                "locations",
                unique=True,
                description="stock events: location ids, in the order lines are served from",
            ),
        ]
    ]
    skus: NotRequired[
        Annotated[
            list[SkuSpec], limited("skus", description="stock events: the SKUs on sale (unique)")
        ]
    ]
    seats: NotRequired[
        Annotated[
            list[SeatSpec],
            Meta(
                min_length=1,
                max_length=SEATS_MAX,
                description="seat events: the seat map (seat ids unique)",
            ),
        ]
    ]
    hold_ttl_ms: NotRequired[Annotated[int, limited("hold_ttl_ms")]]
    quarantine_ms: NotRequired[Annotated[int, limited("quarantine_ms")]]
    policy: NotRequired[LatePolicy]
    price_minor: NotRequired[
        Annotated[
            int,
            limited(
                "price_minor",
                description="seat events: a seat's price unless its level has one in price_levels",
            ),
        ]
    ]
    price_levels: NotRequired[
        Annotated[
            dict[str, Annotated[int, limited("price_minor")]],
            limited(
                "price_levels",
                description="seat events: price_level -> price_minor; each seat's price_level "
                "must be one of them (ADR 0038). Absent: levels are display only",
            ),
        ]
    ]
    currency: NotRequired[Annotated[str, Meta(pattern="^[A-Z]{3}$")]]
    reversal_policy: NotRequired[ReversalPolicy]
    opens_at_ms: NotRequired[
        Annotated[
            Annotated[int, limited("opens_at_ms")] | None,
            Meta(description="0: open now; absent or null: a DRAFT, opened later"),
        ]
    ]


class OpenSaleRequest(TypedDict):
    """opens_at_ms 0 or absent: now; reschedule: move a T0 still to come."""

    opens_at_ms: NotRequired[Annotated[int, limited("opens_at_ms")]]
    reschedule: NotRequired[bool]


class StockCorrectionRequest(TypedDict):
    """Exactly one of set and adjust."""

    correction_id: Id
    sku: StockId
    location: StockId
    set: NotRequired[Annotated[int, limited("set")]]
    adjust: NotRequired[Annotated[int, limited("adjust")]]
    reason: Annotated[str, limited("reason")]
    operator: NotRequired[Annotated[str, limited("operator")]]


class CancelSaleRequest(TypedDict):
    """`batch`: holds one script call examines (default 200)."""

    batch: NotRequired[Annotated[int, limited("batch")]]


# Requests whose unknown fields the handler refuses (400): additionalProperties false.
CLOSED = (
    SeatSpec, SkuSpec, CreateEventRequest, OpenSaleRequest, StockCorrectionRequest,
    CancelSaleRequest,
)  # fmt: skip

# Each request and its example (api/contract/document.py).
EXAMPLES: dict[type, Any] = {
    CreateEventRequest: CreateEventRequest(
        event_id=EVENT_ID,
        seats=[
            {"seat_id": "A-1", "rank": 1, "section": "A"},
            {"seat_id": "A-2", "rank": 2, "section": "A"},
        ],
        price_minor=4500,
        currency="EUR",
        hold_ttl_ms=480000,
        opens_at_ms=0,
    ),
    SeatSpec: SeatSpec(seat_id="A-1", rank=1, section="A"),
    SkuSpec: SkuSpec(sku="wheel-700c", price_minor=8900, on_hand={"east": 40, "west": 12}),
    OpenSaleRequest: OpenSaleRequest(opens_at_ms=1767261600000, reschedule=True),
    StockCorrectionRequest: StockCorrectionRequest(
        correction_id="recount-0412",
        sku="wheel-700c",
        location="east",
        adjust=-2,
        reason="two damaged in the stock room",
    ),
    CancelSaleRequest: CancelSaleRequest(batch=200),
}
