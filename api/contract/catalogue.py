"""What buyers find and what an event has for sale, as its reads answer it
(api/routes/events.py, checkout.py, stock.py): the public list of events, its counters, its best
free seats, a stock event's table by SKU and location, a seat map's sections; and a draft's
details changed by an admin. A field always sent is a plain one; `| None`: may be null."""

from typing import Annotated, Any, Literal, NotRequired, TypedDict

from msgspec import Meta

from api.contract.atoms import (
    EVENT_DETAILS_EXAMPLE,
    EVENT_ID,
    Amount,
    AtMs,
    Currency,
    DetailFields,
    Id,
    ServerTime,
    StockId,
    limited,
)

NOW = 1767261604120


class EventAvailability(DetailFields):
    """The event's counters (units, for a stock event)."""

    event_id: Id
    status: Annotated[str, Meta(description="draft, open, closed, cancelled")]
    opens_at_ms: Annotated[int, Meta(description="T0 (0: no opening time set yet)")]
    seats_total: int
    free: int
    held: int
    blocked: int
    sold: Annotated[
        int,
        Meta(
            description="sold seats (units), those of holds in EXCEPTION included: their money "
            "left and they wait for an operator; the admin orders listing has confirmed orders "
            "only, the exceptions view the rest"
        ),
    ]
    price_minor: Amount
    hold_ttl_ms: int
    waiting_room: Annotated[
        bool,
        Meta(description="the event has a waiting room: claims need an admission (ADR 0029)"),
    ]
    server_time_ms: ServerTime


class FreeSeats(TypedDict):
    seats: Annotated[list[Id], Meta(description="the best free seats by rank (a hint)")]


class StockLocation(TypedDict):
    location: StockId
    on_hand: int
    available: int
    held: int
    blocked: int
    sold: int


class StockSku(TypedDict):
    sku: StockId
    price_minor: Amount
    available: int
    locations: list[StockLocation]


class StockTable(TypedDict):
    """on_hand = available + held + blocked + sold at every location; a SKU's `available` is
    the sum over its locations."""

    event_id: Id
    skus: list[StockSku]
    server_time_ms: ServerTime


class Section(TypedDict):
    section: str
    seats: int
    free: int


class Sections(TypedDict):
    sections: list[Section]


class EventListed(DetailFields):
    event_id: Id
    status: Annotated[str, Meta(description="open: on sale, or to come (see opens_at_ms)")]
    opens_at_ms: Annotated[AtMs, Meta(description="T0: when claims open")]
    kind: Literal["seats", "stock"]
    currency: Currency
    price_minor: Annotated[Amount, Meta(description="a seat's price (seat events without levels)")]


class EventList(TypedDict):
    events: list[EventListed]
    next_offset: Annotated[int | None, Meta(description="the next page's offset (null: done)")]


def _detail(name: str, description: str | None = None) -> Meta:
    return limited(name, description=description)


class EventDetailsChange(TypedDict):
    """Any of a draft event's details; null clears one. Another field of the create is 409
    not_changeable, an unknown one 400."""

    name: NotRequired[Annotated[str, _detail("name")] | None]
    venue: NotRequired[Annotated[str, _detail("venue")] | None]
    description: NotRequired[Annotated[str, _detail("event_description")] | None]
    image_url: NotRequired[Annotated[str, _detail("image_url"), Meta(pattern="^https?://")] | None]
    starts_at_ms: NotRequired[Annotated[int, _detail("starts_at_ms")] | None]
    time_zone: NotRequired[Annotated[str, _detail("time_zone", "an IANA time zone")] | None]
    locale: NotRequired[Annotated[str, _detail("locale", "a BCP 47 tag (de-DE)")] | None]


class EventDetails(DetailFields):
    event_id: Id


LOCATION: StockLocation = {
    "location": "east",
    "on_hand": 40,
    "available": 36,
    "held": 2,
    "blocked": 0,
    "sold": 2,
}
SKU: StockSku = {"sku": "wheel-700c", "price_minor": 8900, "available": 36, "locations": [LOCATION]}
SECTION: Section = {"section": "A", "seats": 3, "free": 1}
LISTED: EventListed = {
    "event_id": EVENT_ID,
    "status": "open",
    "opens_at_ms": 1767261600000,
    "kind": "seats",
    "currency": "EUR",
    "price_minor": 4500,
    **EVENT_DETAILS_EXAMPLE,
}

# Each answer and its example (api/contract/document.py).
EXAMPLES: dict[type, Any] = {
    EventAvailability: EventAvailability(
        event_id=EVENT_ID,
        status="open",
        opens_at_ms=1767261600000,
        seats_total=6,
        free=4,
        held=2,
        blocked=0,
        sold=0,
        price_minor=4500,
        hold_ttl_ms=480000,
        waiting_room=False,
        **EVENT_DETAILS_EXAMPLE,
        server_time_ms=NOW,
    ),
    FreeSeats: FreeSeats(seats=["A-3", "A-4", "B-1"]),
    StockTable: StockTable(event_id="bike-parts", skus=[SKU], server_time_ms=NOW),
    StockSku: SKU,
    StockLocation: LOCATION,
    Sections: Sections(sections=[SECTION, {"section": "B", "seats": 3, "free": 3}]),
    Section: SECTION,
    EventListed: LISTED,
    EventList: EventList(events=[LISTED], next_offset=None),
    EventDetailsChange: EventDetailsChange(name="Spring Gala (second night)", description=None),
    EventDetails: EventDetails(event_id=EVENT_ID, **EVENT_DETAILS_EXAMPLE),
}
