"""The request bodies of the OpenAPI document (api/openapi.py), as component schemas with their
examples: a buyer's login and claim, an admin's create, open, correction and cancel, and the
provider's callback. Every limit comes from api/validate.py LIMITS; a body whose unknown fields
the handler refuses is `additionalProperties: false`."""

from typing import Any

from api.openapi_parts import (
    CHARGE_ID_EXAMPLE,
    EVENT_DETAILS_REQUEST,
    EVENT_ID,
    ID,
    STOCK_ID,
    array,
    limit,
    record,
)
from api.openapi_ui import SEAT_PLACE_FIELDS
from api.validate import LIMITS, SEATS_MAX, SECTION_CHARS_MAX
from engine.model.states import LatePolicy, ReversalPolicy

LOGIN_REQUEST = record(
    {"login": ID, "event_id": ID},
    {"login": "alice", "event_id": EVENT_ID},
    optional=("event_id",),
    description="A name (any, in the demo) and optionally the one event the token is for.",
)

CLAIM_LINE = record(
    {"sku": STOCK_ID, "quantity": limit("line_quantity"), "location": STOCK_ID},
    {"sku": "wheel-700c", "quantity": 2, "location": "east"},
    optional=("location",),
    closed=True,
    description="A line of a cart: quantity units of one sku, from `location` when named.",
)
CLAIM_REQUEST = record(
    {
        "seat_id": ID,
        "seat_ids": array(ID, minItems=1, maxItems=int(LIMITS["quantity"].high), uniqueItems=True),
        "quantity": limit("quantity"),
        "lines": limit(
            "lines",
            description="A cart of quantity stock (stock events only): each line from its "
            "location, or else from the first of the event's locations, in its order, that has "
            "the whole quantity (a line is never split); all lines or none.",
            uniqueItems=True,
            items={"$ref": "#/components/schemas/ClaimLine"},
        ),
    },
    {"quantity": 2},
    optional=("seat_id", "seat_ids", "quantity", "lines"),
    description="One of: seat_id (that seat), seat_ids (those seats, all or nothing), quantity "
    "(that many best seats: the best block of adjacent ones, consecutive ranks in one section, "
    "when one is free, else the best single seats), lines (stock events: a cart); none: the "
    "best seat. A party or a cart is one hold, one charge (price x seats, or the cart's amount "
    "fixed at the claim), one deadline.",
)
CHARGE_REQUEST: dict[str, Any] = {
    "type": "object",
    "description": "An object (no field is read yet); the body may be empty.",
    "example": {},
}

SEAT_SPEC = record(
    {
        "seat_id": ID,
        "rank": limit("rank"),
        "section": {"type": "string", "maxLength": SECTION_CHARS_MAX},
        **SEAT_PLACE_FIELDS,  # its place on the drawn map (api/openapi_ui.py, ADR 0028)
    },
    {"seat_id": "A-1", "rank": 1, "section": "A"},
    optional=("rank", "section", *SEAT_PLACE_FIELDS),
    closed=True,
    description="A seat of the map; its rank defaults to its position (lowest: best).",
)
SKU_SPEC = record(
    {
        "sku": STOCK_ID,
        "price_minor": limit("price_minor"),
        "on_hand": {
            "type": "object",
            "maxProperties": int(LIMITS["locations"].high),
            "description": "location -> units on hand (locations of the event only)",
            "additionalProperties": limit("on_hand"),
        },
    },
    {"sku": "wheel-700c", "price_minor": 8900, "on_hand": {"east": 40, "west": 12}},
    optional=("on_hand",),
    closed=True,
    description="A SKU on sale with its price and its initial count at each location "
    "(unnamed: 0), recorded as a correction.",
)
CREATE_EVENT_REQUEST = record(
    {
        "event_id": ID,
        "kind": {
            "allOf": [{"$ref": "#/components/schemas/EventKind"}],
            "description": "default seats",
        },
        "login_cap": limit(
            "login_cap",
            nullable=True,
            description="units a login may hold and buy here; 0: none; null: the deployment's "
            "ONSALE_LOGIN_CAP",
        ),
        "max_party": limit("max_party", description="seat events: seats one claim may ask for"),
        "locations": limit(
            "locations",
            items=STOCK_ID,
            uniqueItems=True,
            description="stock events: location ids, in the order lines are served from",
        ),
        "skus": limit(
            "skus",
            description="stock events: the SKUs on sale (unique)",
            items={"$ref": "#/components/schemas/SkuSpec"},
        ),
        "seats": {
            "type": "array",
            "minItems": 1,
            "maxItems": SEATS_MAX,
            "description": "seat events: the seat map (seat ids unique)",
            "items": {"$ref": "#/components/schemas/SeatSpec"},
        },
        "hold_ttl_ms": limit("hold_ttl_ms"),
        "quarantine_ms": limit("quarantine_ms"),
        "policy": {"type": "string", "enum": [*LatePolicy]},
        "price_minor": limit(
            "price_minor",
            description="seat events: a seat's price unless its level has one in price_levels",
        ),
        "price_levels": limit(
            "price_levels",
            additionalProperties=limit("price_minor"),
            description="seat events: price_level -> price_minor; each seat's price_level must "
            "be one of them (ADR 0038). Absent: levels are display only",
        ),
        "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
        **EVENT_DETAILS_REQUEST,
        "reversal_policy": {"type": "string", "enum": [*ReversalPolicy]},
        "opens_at_ms": {
            **limit("opens_at_ms"),
            "nullable": True,
            "description": "0: open now; absent or null: a DRAFT, opened later",
        },
    },
    {
        "event_id": EVENT_ID,
        "seats": [
            {"seat_id": "A-1", "rank": 1, "section": "A"},
            {"seat_id": "A-2", "rank": 2, "section": "A"},
        ],
        "price_minor": 4500,
        "currency": "EUR",
        "hold_ttl_ms": 480000,
        "opens_at_ms": 0,
    },
    optional=(
        "kind",
        "login_cap",
        "max_party",
        "locations",
        "skus",
        "seats",
        "hold_ttl_ms",
        "quarantine_ms",
        "policy",
        "price_minor",
        "price_levels",
        *EVENT_DETAILS_REQUEST,
        "currency",
        "reversal_policy",
        "opens_at_ms",
    ),
    closed=True,
    description="kind seats (default): `seats` (and optionally price_minor, price_levels, "
    "max_party); kind stock: `locations` and `skus` instead (no seats, max_party, price_minor "
    "or price_levels).",
)
OPEN_SALE_REQUEST = record(
    {"opens_at_ms": limit("opens_at_ms"), "reschedule": {"type": "boolean"}},
    {"opens_at_ms": 1767261600000, "reschedule": True},
    optional=("opens_at_ms", "reschedule"),
    closed=True,
    description="opens_at_ms 0 or absent: now; reschedule: move a T0 still to come.",
)
CORRECTION_REQUEST = record(
    {
        "correction_id": ID,
        "sku": STOCK_ID,
        "location": STOCK_ID,
        "set": limit("set"),
        "adjust": limit("adjust"),
        "reason": limit("reason"),
        "operator": limit("operator"),
    },
    {
        "correction_id": "recount-0412",
        "sku": "wheel-700c",
        "location": "east",
        "adjust": -2,
        "reason": "two damaged in the stock room",
    },
    optional=("set", "adjust", "operator"),
    closed=True,
    description="Exactly one of set and adjust.",
)
CANCEL_REQUEST = record(
    {"batch": limit("batch")},
    {"batch": 200},
    optional=("batch",),
    closed=True,
    description="`batch`: holds one script call examines (default 200).",
)
PROVIDER_CALLBACK: dict[str, Any] = {
    "type": "object",
    "description": "The provider's message, as it signs it: the simulator's (below), or with "
    "ONSALE_PROVIDER=stripe, Stripe's event. Read only after its signature is verified.",
    "example": {
        "id": "evt_8c1d",
        "type": "charge.captured",
        "data": {
            "attempt_id": "att_02cd63c4_1",
            "intent_id": "pi_02cd63c4",
            "idempotency_key": CHARGE_ID_EXAMPLE,
            "amount": 9000,
            "currency": "EUR",
            "status": "captured",
            "metadata": {"event_id": EVENT_ID, "charge_id": CHARGE_ID_EXAMPLE},
        },
    },
}

REQUEST_SCHEMAS: dict[str, dict[str, Any]] = {
    "LoginRequest": LOGIN_REQUEST,
    "ClaimRequest": CLAIM_REQUEST,
    "ClaimLine": CLAIM_LINE,
    "ChargeRequest": CHARGE_REQUEST,
    "CreateEventRequest": CREATE_EVENT_REQUEST,
    "SeatSpec": SEAT_SPEC,
    "SkuSpec": SKU_SPEC,
    "OpenSaleRequest": OPEN_SALE_REQUEST,
    "StockCorrectionRequest": CORRECTION_REQUEST,
    "CancelSaleRequest": CANCEL_REQUEST,
    "ProviderCallback": PROVIDER_CALLBACK,
}
