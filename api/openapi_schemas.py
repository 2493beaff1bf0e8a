"""The answers of the buyer and ops operations in the OpenAPI document (api/openapi.py), as
component schemas with their examples, field for field what api/routes/checkout.py, stock.py,
logins.py, callbacks.py and meta.py send. A property always sent is required; a property that may
be null says so; an answer may gain properties (clients ignore the ones they do not know)."""

from typing import Any

from api.openapi_parts import (
    AMOUNT,
    AT_MS,
    BOOL,
    CHARGE_ID,
    CHARGE_ID_EXAMPLE,
    CHARGE_STATE,
    CURRENCY,
    EVENT_DETAILS,
    EVENT_DETAILS_EXAMPLE,
    EVENT_ID,
    HOLD_ID,
    HOLD_STATE,
    ID,
    INT,
    REFUNDED,
    SEAT_PRICES,
    STOCK_ID,
    STR,
    VIEW_STATE,
    array,
    nullable,
    record,
    ref,
)

EXPIRES = 1767261900000
SERVER_TIME = {
    **AT_MS,
    "description": "the server's (Redis) clock now, which decides T0 and every deadline: count "
    "them down by it, not by the device's clock",
}
LINE_EXAMPLE = {"sku": "wheel-700c", "location": "east", "quantity": 2}

HELD_LINE = record(
    {"sku": STOCK_ID, "location": STOCK_ID, "quantity": INT},
    LINE_EXAMPLE,
    description="A line a stock hold owns: quantity units of sku, taken from location.",
)
CLAIMED = record(
    {
        "hold_id": ID,
        "seat_id": nullable({**ID, "description": "the first (or only) seat; null: a cart"}),
        "seat_ids": array(ID),
        "expires_ms": AT_MS,
        "state": HOLD_STATE,
        "replaced_hold_id": nullable(
            {**STR, "description": "the login's previous hold, released by this claim"}
        ),
        "seat_prices": SEAT_PRICES,
        "lines": array(ref("HeldLine")),
        "amount": AMOUNT,
    },
    {
        "hold_id": HOLD_ID,
        "seat_id": "A-1",
        "seat_ids": ["A-1", "A-2"],
        "expires_ms": EXPIRES,
        "state": "RESERVED",
        "replaced_hold_id": None,
        "seat_prices": {"A-1": 4500, "A-2": 4500},
        "amount": 9000,
    },
    optional=("seat_prices", "lines", "amount"),
    description="201: a new hold; 200: the replay of a claim sent again with its key (state: "
    "where that hold stands now). Seats come with `seat_prices` (each seat's price) and "
    "`amount`, what the charge will ask. A stock hold (a cart) has no seats (seat_id null, "
    "seat_ids empty): its `lines`, each with the location it was taken from, and `amount`.",
)
HOLD_CHARGE = record(
    {
        "charge_id": CHARGE_ID,
        "state": CHARGE_STATE,
        "amount": AMOUNT,
        "refund_only": {**BOOL, "description": "if it ever captures, it is refunded"},
        "reason": nullable(STR),
    },
    {
        "charge_id": CHARGE_ID_EXAMPLE,
        "state": "CAPTURED",
        "amount": 9000,
        "refund_only": False,
        "reason": None,
    },
)
ORDER_NUMBER = {
    "type": "string",
    "pattern": "^[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{2}$",
    "description": "the order's number, derived from the event and the hold (ADR 0042)",
}
ORDER = record(
    {
        "order_number": ORDER_NUMBER,
        "qr": {**STR, "description": "the buyer's view: a QR code of the number, an SVG data URL"},
        "seat_ids": array(ID),
        "seat_prices": SEAT_PRICES,
        "lines": array(ref("HeldLine")),
        "amount": nullable(AMOUNT),
        "refunded": REFUNDED,
        "currency": CURRENCY,
        "charge_id": CHARGE_ID,
    },
    {
        "order_number": "7K2F-9QX3-MT",
        "qr": "data:image/svg+xml,%3Csvg ...",
        "seat_ids": ["A-1", "A-2"],
        "seat_prices": {"A-1": 4500, "A-2": 4500},
        "amount": 9000,
        "refunded": 0,
        "currency": "EUR",
        "charge_id": CHARGE_ID_EXAMPLE,
    },
    optional=("qr", "seat_ids", "seat_prices", "lines"),
    description="What a CONFIRMED hold bought (seat_ids and seat_prices, or a cart's lines), "
    "its number, and the one charge that paid for it.",
)
HOLD = record(
    {
        "hold_id": ID,
        "seat_id": nullable(ID),
        "seat_ids": array(ID),
        "seat_prices": SEAT_PRICES,
        "lines": array(ref("HeldLine")),
        "amount": AMOUNT,
        "state": VIEW_STATE,
        "expires_ms": AT_MS,
        "winner": nullable({**CHARGE_ID, "description": "the charge that confirmed it"}),
        "charge_in_flight": nullable(CHARGE_ID),
        "quarantine_until_ms": nullable(AT_MS),
        "decided_ms": nullable(AT_MS),
        "reason": nullable(STR),
        "given_up": {**BOOL, "description": "QUARANTINED and released by its owner"},
        "charges": array(ref("HoldCharge")),
        "order": nullable(ref("Order")),
        "server_time_ms": SERVER_TIME,
    },
    {
        "hold_id": HOLD_ID,
        "seat_id": "A-1",
        "seat_ids": ["A-1", "A-2"],
        "seat_prices": {"A-1": 4500, "A-2": 4500},
        "amount": 9000,
        "state": "CONFIRMED",
        "expires_ms": EXPIRES,
        "winner": CHARGE_ID_EXAMPLE,
        "charge_in_flight": None,
        "quarantine_until_ms": None,
        "decided_ms": 1767261620000,
        "reason": "captured",
        "given_up": False,
        "charges": [HOLD_CHARGE["example"]],
        "order": ORDER["example"],
        "server_time_ms": 1767261604120,
    },
    optional=("lines", "seat_prices", "amount", "server_time_ms"),
    description="A hold, its charges, and what it owns: seat_id, seat_ids, each seat's price "
    "and their sum (amount), or a stock hold's lines and amount (seat_id null). A CONFIRMED "
    "hold, once the sale is told, has its `order`; null otherwise.",
)
HOLD_RELEASED = record(
    {"hold_id": ID, "state": {"type": "string", "enum": ["RELEASED"]}},
    {"hold_id": HOLD_ID, "state": "RELEASED"},
)
HOLD_GIVEN_UP = record(
    {
        "hold_id": ID,
        "state": {"type": "string", "enum": ["QUARANTINED"]},
        "given_up": BOOL,
        "quarantine_until_ms": AT_MS,
    },
    {
        "hold_id": HOLD_ID,
        "state": "QUARANTINED",
        "given_up": True,
        "quarantine_until_ms": 1767262800000,
    },
)
CHARGE_STARTED = record(
    {
        "charge_id": CHARGE_ID,
        "hold_id": ID,
        "state": CHARGE_STATE,
        "amount": AMOUNT,
        "currency": CURRENCY,
        "provider_status": {
            **STR,
            "description": "the provider's answer: its own status (processing, ...), timeout "
            "(unknown yet: the callback or reconciliation decides) or unverified",
        },
        "client_secret": nullable(
            {**STR, "description": "for the buyer's page to confirm with the provider"}
        ),
        "payment_form": nullable(
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["provider", "publishable_key", "js_url"],
                "properties": {
                    "provider": {"type": "string", "enum": ["stripe"]},
                    "publishable_key": {**STR, "description": "Stripe's pk_...: public"},
                    "js_url": {**STR, "description": "where the page loads Stripe.js"},
                },
                "description": "what the buyer's page needs to take the card itself with "
                "Stripe's Payment Element (ADR 0039); null when the deployment has none",
            }
        ),
        "expires_ms": AT_MS,
    },
    {
        "charge_id": CHARGE_ID_EXAMPLE,
        "hold_id": HOLD_ID,
        "state": "CHARGING",
        "amount": 9000,
        "currency": "EUR",
        "provider_status": "processing",
        "client_secret": None,
        "payment_form": None,
        "expires_ms": EXPIRES,
    },
)
CHARGE_ABANDONED = record(
    {"charge_id": CHARGE_ID, "abandoned": BOOL},
    {"charge_id": CHARGE_ID_EXAMPLE, "abandoned": True},
)
EVENT_AVAILABILITY = record(
    {
        "event_id": ID,
        "status": {**STR, "description": "draft, open, closed, cancelled"},
        "opens_at_ms": {**AT_MS, "description": "T0 (0: no opening time set yet)"},
        "seats_total": INT,
        "free": INT,
        "held": INT,
        "blocked": INT,
        "sold": {
            **INT,
            "description": "sold seats (units), those of holds in EXCEPTION included: their "
            "money left and they wait for an operator; the admin orders listing has confirmed "
            "orders only, the exceptions view the rest",
        },
        "price_minor": AMOUNT,
        "hold_ttl_ms": INT,
        "waiting_room": {
            "type": "boolean",
            "description": "the event has a waiting room: claims need an admission (ADR 0029)",
        },
        **EVENT_DETAILS,
        "server_time_ms": SERVER_TIME,
    },
    {
        "event_id": EVENT_ID,
        "status": "open",
        "opens_at_ms": 1767261600000,
        "seats_total": 6,
        "free": 4,
        "held": 2,
        "blocked": 0,
        "sold": 0,
        "price_minor": 4500,
        "hold_ttl_ms": 480000,
        "waiting_room": False,
        **EVENT_DETAILS_EXAMPLE,
        "server_time_ms": 1767261604120,
    },
    description="The event's counters (units, for a stock event).",
)
FREE_SEATS = record(
    {"seats": array(ID, description="the best free seats by rank (a hint)")},
    {"seats": ["A-3", "A-4", "B-1"]},
)
STOCK_LOCATION = record(
    {
        "location": STOCK_ID,
        "on_hand": INT,
        "available": INT,
        "held": INT,
        "blocked": INT,
        "sold": INT,
    },
    {"location": "east", "on_hand": 40, "available": 36, "held": 2, "blocked": 0, "sold": 2},
)
STOCK_SKU = record(
    {
        "sku": STOCK_ID,
        "price_minor": AMOUNT,
        "available": INT,
        "locations": array(ref("StockLocation")),
    },
    {
        "sku": "wheel-700c",
        "price_minor": 8900,
        "available": 36,
        "locations": [STOCK_LOCATION["example"]],
    },
)
STOCK_TABLE = record(
    {"event_id": ID, "skus": array(ref("StockSku")), "server_time_ms": SERVER_TIME},
    {"event_id": "bike-parts", "skus": [STOCK_SKU["example"]], "server_time_ms": 1767261604120},
    description="on_hand = available + held + blocked + sold at every location; a SKU's "
    "`available` is the sum over its locations.",
)
SECTION = record(
    {"section": STR, "seats": INT, "free": INT}, {"section": "A", "seats": 3, "free": 1}
)
SECTIONS = record(
    {"sections": array(ref("Section"))},
    {"sections": [SECTION["example"], {"section": "B", "seats": 3, "free": 3}]},
)
LOGIN_TOKEN = record(
    {"token": STR, "login": ID, "event_id": nullable(ID)},
    {
        "token": "eyJsIjoiYWxpY2UiLCJlIjoiZXYxIn0.aw8XTA.GHSiNPZ8IapAMaxY",
        "login": "alice",
        "event_id": EVENT_ID,
    },
    description="A bearer token for the login (for `event_id` only, when named).",
)
STATE_NOW = {
    "charge_state": nullable(CHARGE_STATE),
    "hold_state": nullable(HOLD_STATE),
}
CALLBACK_ANSWER = record(
    {
        "decision": {**STR, "description": "what the engine decided (IGNORED: nothing to do)"},
        "duplicate": {**BOOL, "description": "this provider event was seen before"},
        "reason": {**STR, "description": "IGNORED: why"},
        **STATE_NOW,
        "recorded": record(
            STATE_NOW,
            {"charge_state": "CAPTURED", "hold_state": "CONFIRMED"},
            description="the states recorded with the decision, the first time",
        ),
        "problems": nullable({**STR, "description": "what did not match, comma-separated"}),
    },
    {
        "decision": "CONFIRMED",
        "duplicate": False,
        "charge_state": "CAPTURED",
        "hold_state": "CONFIRMED",
        "recorded": {"charge_state": "CAPTURED", "hold_state": "CONFIRMED"},
        "problems": None,
    },
    optional=("reason", "charge_state", "hold_state", "recorded", "problems"),
)
HEALTH = record({"ok": BOOL}, {"ok": True})
READINESS = record(
    {"ok": BOOL, "scripts": {**INT, "description": "scripts loaded"}}, {"ok": True, "scripts": 21}
)
OPENAPI_DOCUMENT: dict[str, Any] = {
    "type": "object",
    "description": "This document.",
    "required": ["openapi", "info", "paths"],
    "properties": {
        "openapi": STR,
        "info": {"type": "object"},
        "paths": {"type": "object"},
        "components": {"type": "object"},
    },
    "additionalProperties": True,
    "example": {
        "openapi": "3.0.3",
        "info": {"title": "onsale checkout API", "version": "1"},
        "paths": {},
    },
}

BUYER_SCHEMAS: dict[str, dict[str, Any]] = {
    "Health": HEALTH,
    "Readiness": READINESS,
    "OpenApiDocument": OPENAPI_DOCUMENT,
    "LoginToken": LOGIN_TOKEN,
    "EventAvailability": EVENT_AVAILABILITY,
    "FreeSeats": FREE_SEATS,
    "StockTable": STOCK_TABLE,
    "StockSku": STOCK_SKU,
    "StockLocation": STOCK_LOCATION,
    "Sections": SECTIONS,
    "Section": SECTION,
    "Claimed": CLAIMED,
    "HeldLine": HELD_LINE,
    "Hold": HOLD,
    "HoldCharge": HOLD_CHARGE,
    "Order": ORDER,
    "HoldReleased": HOLD_RELEASED,
    "HoldGivenUp": HOLD_GIVEN_UP,
    "ChargeStarted": CHARGE_STARTED,
    "ChargeAbandoned": CHARGE_ABANDONED,
    "CallbackAnswer": CALLBACK_ANSWER,
}
