"""The field types every answer is made of: ids, times, amounts, a currency, a seat's prices
and what people recognise an event by (ADR 0041). A pattern or a description said here is said
once for every answer that uses the type (api/contract/derive.py turns them into schemas)."""

import typing
from typing import Annotated, Any, Literal, TypedDict, get_args

from msgspec import Meta

from api.durable import CONFIRMING
from api.validate import LIMITS
from engine.model.records import Marker
from engine.model.states import ChargeState, HoldState

# The ids every example uses (the example event exists in the fuzzed stack).
EVENT_ID = "spring-gala"
HOLD_ID = "9f2c4e1ab7d35f60c8e21d4b6a9f0e73:1748"
CHARGE_ID = "spring-gala~3f9a1c2e7b4d6f8a0c1e2b3d"

Id = Annotated[str, Meta(pattern="^[A-Za-z0-9_.:-]{1,64}$")]
# The seats of one party (a claim's, a refund's): 1 to LIMITS["quantity"] distinct seat ids.
PartySeats = Annotated[
    list[Id],
    Meta(
        min_length=1,
        max_length=int(LIMITS["quantity"].high),
        extra_json_schema={"uniqueItems": True},
    ),
]
StockId = Annotated[str, Meta(pattern="^[A-Za-z0-9_.-]{1,64}$")]  # SKUs and locations
# A charge id is minted by the server: <event id>~<24 hex> (engine/model/keys.py charge_key).
ChargeId = Annotated[str, Meta(pattern="^[A-Za-z0-9_.:-]{1,64}(~[0-9a-f]{24})?$")]
AtMs = Annotated[int, Meta(description="ms since the epoch, by the server (Redis) clock")]
Count = Annotated[int, Meta(ge=0)]
Amount = Annotated[int, Meta(description="minor units of the currency (4500: 45.00)")]
Refunded = Annotated[
    int, Meta(description="minor units that parts of the order given back returned (ADR 0043)")
]
Currency = Annotated[str, Meta(pattern="^[A-Z]{3}$", description="ISO 4217")]
SeatPrices = Annotated[
    dict[str, Amount],
    Meta(description="seat_id -> its price: its level's (ADR 0038), else the event's price_minor"),
]


def limited(name: str, *, unique: bool = False, description: str | None = None) -> Meta:
    """A request field bounded by LIMITS[name] (api/validate.py), the table the validators
    enforce: a number's range, a list's or a text's length, an object's number of names; the
    schema names the limit (`x-limit`, which tests/unit/test_api_contract.py reads)."""
    bound = LIMITS[name]
    extra: dict[str, Any] = {"x-limit": name}
    if unique:
        extra["uniqueItems"] = True
    if bound.of == "value":
        return Meta(ge=bound.low, le=bound.high, description=description, extra_json_schema=extra)
    low, high = int(bound.low), int(bound.high)
    return Meta(min_length=low, max_length=high, description=description, extra_json_schema=extra)


def fields_of(request: type) -> frozenset[str]:
    """The fields a request type declares: those its handler accepts (an unknown one is a 400)."""
    return frozenset(typing.get_type_hints(request))


def named(component: str) -> Meta:
    """A field whose schema is the document's component `component` (an enum it names once)."""
    return Meta(extra_json_schema={"$ref": f"#/components/schemas/{component}"})


Kind = Literal["seats", "stock"]  # what an event sells: a seat map, or quantity stock
EventKind = Annotated[Kind, named("EventKind")]
# A hold's state as its buyer reads it (HoldState, or CONFIRMING: sold, not yet in the ledger,
# ADR 0016): its schema is the document's HoldViewState (STATE_SCHEMAS below).
ViewState = Annotated[str, named("HoldViewState")]
NextCursor = Annotated[
    str | None,
    Meta(description="the cursor of the next page; null: the listing is complete"),
]
ServerTime = Annotated[
    int,
    Meta(
        description="the server's (Redis) clock now, which decides T0 and every deadline: count "
        "them down by it, not by the device's clock"
    ),
]


class DetailFields(TypedDict):
    """What people recognise an event by (ADR 0041): in every event read (null: not given)."""

    name: Annotated[str | None, Meta(description="the event's name, as buyers know it")]
    venue: str | None
    description: str | None
    image_url: str | None
    starts_at_ms: Annotated[
        int | None, Meta(description="when the show starts (ms since the epoch)")
    ]
    time_zone: Annotated[str | None, Meta(description="the show's IANA time zone (Europe/Berlin)")]
    locale: Annotated[
        str | None, Meta(description="BCP 47 tag its prices and dates are written in")
    ]


EVENT_DETAILS_EXAMPLE: DetailFields = {
    "name": "Spring Gala",
    "venue": "Konzerthaus, Berlin",
    "description": "Brahms and Ravel",
    "image_url": "https://example.org/gala.jpg",
    "starts_at_ms": 1767293100000,
    "time_zone": "Europe/Berlin",
    "locale": "de-DE",
}

# The states of the two transition tables (engine/model/states.py), each one named type for clients.
STATE_SCHEMAS: dict[str, dict[str, Any]] = {
    "HoldState": {"type": "string", "enum": [*HoldState], "example": HoldState.RESERVED.value},
    "HoldViewState": {
        "type": "string",
        "enum": [*HoldState, CONFIRMING],
        "description": "A hold's state as its buyer reads it: CONFIRMING is sold, not yet in the "
        "ledger (ADR 0016); CONFIRMED once it is.",
        "example": HoldState.CONFIRMED.value,
    },
    "ChargeState": {"type": "string", "enum": [*ChargeState], "example": "CHARGING"},
    "RecordMarker": {
        "type": "string",
        "enum": [*Marker],
        "description": "A ledger decision's `to` that is not a hold's or a charge's state "
        "(docs/spec.md): e.g. REFUND_ONLY, a charge marked resolve-by-refund.",
        "example": Marker.REFUND_ONLY.value,
    },
}
KIND_SCHEMA = {"type": "string", "enum": list(get_args(Kind)), "example": "seats"}
