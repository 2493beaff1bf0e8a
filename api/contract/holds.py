"""A hold's answers, as the buyer's handlers build them (api/routes/checkout.py, hold_views.py,
callbacks.py): the claim, the hold and its charges, the order it became, its release, a charge
started or abandoned, and the provider's callback answered. A field always sent is a plain one;
`NotRequired`: sent only sometimes; `| None`: may be null. An answer may gain fields (clients
ignore the ones they do not know)."""

from typing import Annotated, Any, Literal, NotRequired, TypedDict

from msgspec import Meta

from api.contract.atoms import (
    CHARGE_ID,
    EVENT_ID,
    HOLD_ID,
    Amount,
    AtMs,
    ChargeId,
    Currency,
    Id,
    PartySeats,
    Refunded,
    SeatPrices,
    ServerTime,
    StockId,
    ViewState,
    limited,
)
from api.contract.presales import AccessCodeField
from engine.model.states import ChargeState, HoldState

EXPIRES = 1767261900000


class HeldLine(TypedDict):
    """A line a stock hold owns: quantity units of sku, taken from location."""

    sku: StockId
    location: StockId
    quantity: int


class Goods(TypedDict):
    """What a hold owns: seats (with each seat's price and their sum), or a cart's lines and
    their amount (no seats: seat_id null, seat_ids empty)."""

    seat_id: Annotated[Id | None, Meta(description="the first (or only) seat; null: a cart")]
    seat_ids: list[Id]
    seat_prices: NotRequired[SeatPrices]
    lines: NotRequired[list[HeldLine]]
    amount: NotRequired[Amount]


class Claimed(Goods):
    """201: a new hold; 200: the replay of a claim sent again with its key (state: where that
    hold stands now). Seats come with `seat_prices` (each seat's price) and `amount`, what the
    charge will ask. A stock hold (a cart) has no seats (seat_id null, seat_ids empty): its
    `lines`, each with the location it was taken from, and `amount`."""

    hold_id: Id
    expires_ms: AtMs
    state: HoldState
    replaced_hold_id: Annotated[
        str | None, Meta(description="the login's previous hold, released by this claim")
    ]


class HoldCharge(TypedDict):
    charge_id: ChargeId
    state: ChargeState
    amount: Amount
    refund_only: Annotated[bool, Meta(description="if it ever captures, it is refunded")]
    reason: str | None


OrderNumber = Annotated[
    str,
    Meta(
        pattern="^[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{2}$",
        description="the order's number, derived from the event and the hold (ADR 0042)",
    ),
]
QrCode = Annotated[
    str, Meta(description="the buyer's view: a QR code of the number, an SVG data URL")
]


class OrderGoods(TypedDict, total=False):
    """What an order owns: its seats and their prices, or a cart's lines (the part of its
    answers between its number and its amount)."""

    seat_ids: list[Id]
    seat_prices: SeatPrices
    lines: list[HeldLine]


class OrderFields(TypedDict):
    """What a CONFIRMED hold bought (seat_ids and seat_prices, or a cart's lines), its number,
    and the one charge that paid for it."""

    order_number: OrderNumber
    seat_ids: NotRequired[list[Id]]
    seat_prices: NotRequired[SeatPrices]
    lines: NotRequired[list[HeldLine]]
    amount: Amount | None
    refunded: Refunded
    currency: Currency
    charge_id: ChargeId


class Order(OrderFields):
    """What a CONFIRMED hold bought (seat_ids and seat_prices, or a cart's lines), its number,
    and the one charge that paid for it."""

    qr: NotRequired[QrCode]


class Hold(Goods):
    """A hold, its charges, and what it owns: seat_id, seat_ids, each seat's price and their
    sum (amount), or a stock hold's lines and amount (seat_id null). A CONFIRMED hold, once the
    sale is told, has its `order`; null otherwise."""

    hold_id: Id
    state: ViewState
    expires_ms: AtMs
    winner: Annotated[ChargeId | None, Meta(description="the charge that confirmed it")]
    charge_in_flight: ChargeId | None
    quarantine_until_ms: AtMs | None
    decided_ms: AtMs | None
    reason: str | None
    given_up: Annotated[bool, Meta(description="QUARANTINED and released by its owner")]
    charges: list[HoldCharge]
    order: Order | None
    server_time_ms: ServerTime


class HoldReleased(TypedDict):
    hold_id: Id
    state: Literal["RELEASED"]


class HoldGivenUp(TypedDict):
    hold_id: Id
    state: Literal["QUARANTINED"]
    given_up: bool
    quarantine_until_ms: AtMs


class PaymentForm(TypedDict):
    """What the buyer's page needs to take the card itself with Stripe's Payment Element (ADR
    0039); null when the deployment has none."""

    provider: Literal["stripe"]
    publishable_key: Annotated[str, Meta(description="Stripe's pk_...: public")]
    js_url: Annotated[str, Meta(description="where the page loads Stripe.js")]


class ChargeStarted(TypedDict):
    charge_id: ChargeId
    hold_id: Id
    state: ChargeState
    amount: Amount
    currency: Currency
    provider_status: Annotated[
        str,
        Meta(
            description="the provider's answer: its own status (processing, ...), timeout "
            "(unknown yet: the callback or reconciliation decides) or unverified"
        ),
    ]
    client_secret: Annotated[
        str | None, Meta(description="for the buyer's page to confirm with the provider")
    ]
    payment_form: PaymentForm | None
    expires_ms: AtMs


class ChargeAbandoned(TypedDict):
    charge_id: ChargeId
    abandoned: bool


class StatesRecorded(TypedDict):
    """The states recorded with the decision, the first time."""

    charge_state: ChargeState | None
    hold_state: HoldState | None


class CallbackAnswer(TypedDict):
    decision: Annotated[str, Meta(description="what the engine decided (IGNORED: nothing to do)")]
    duplicate: Annotated[bool, Meta(description="this provider event was seen before")]
    reason: NotRequired[Annotated[str, Meta(description="IGNORED: why")]]
    charge_state: NotRequired[ChargeState | None]
    hold_state: NotRequired[HoldState | None]
    recorded: NotRequired[StatesRecorded]
    problems: NotRequired[
        Annotated[str | None, Meta(description="what did not match, comma-separated")]
    ]


class ClaimLine(TypedDict):
    """A line of a cart: quantity units of one sku, from `location` when named."""

    sku: StockId
    quantity: Annotated[int, limited("line_quantity")]
    location: NotRequired[StockId]


class ClaimRequest(TypedDict):
    """One of: seat_id (that seat), seat_ids (those seats, all or nothing), quantity (that many
    best seats: the best block of adjacent ones, consecutive ranks in one section, when one is
    free, else the best single seats), lines (stock events: a cart); none: the best seat. A
    party or a cart is one hold, one charge (price x seats, or the cart's amount fixed at the
    claim), one deadline."""

    seat_id: NotRequired[Id]
    seat_ids: NotRequired[PartySeats]
    quantity: NotRequired[Annotated[int, limited("quantity")]]
    lines: NotRequired[
        Annotated[
            list[ClaimLine],
            limited(
                "lines",
                unique=True,
                description="A cart of quantity stock (stock events only): each line from its "
                "location, or else from the first of the event's locations, in its order, that "
                "has the whole quantity (a line is never split); all lines or none.",
            ),
        ]
    ]
    access_code: NotRequired[AccessCodeField]


class ChargeRequest(TypedDict):
    """An object (no field is read yet); the body may be empty."""


class ProviderCallback(TypedDict):
    """The provider's message, as it signs it: the simulator's (below), or with
    ONSALE_PROVIDER=stripe, Stripe's event. Read only after its signature is verified."""


LINE: HeldLine = {"sku": "wheel-700c", "location": "east", "quantity": 2}
PRICES = {"A-1": 4500, "A-2": 4500}
CHARGE: HoldCharge = {
    "charge_id": CHARGE_ID,
    "state": ChargeState.CAPTURED,
    "amount": 9000,
    "refund_only": False,
    "reason": None,
}
ORDER: Order = {
    "order_number": "7K2F-9QX3-MT",
    "qr": "data:image/svg+xml,%3Csvg ...",
    "seat_ids": ["A-1", "A-2"],
    "seat_prices": PRICES,
    "amount": 9000,
    "refunded": 0,
    "currency": "EUR",
    "charge_id": CHARGE_ID,
}
# An answer a client may hold to its fields, and a request whose unknown fields are refused:
# additionalProperties false.
CLOSED = (PaymentForm, ClaimLine)
RECORDED: StatesRecorded = {"charge_state": ChargeState.CAPTURED, "hold_state": HoldState.CONFIRMED}

# Each answer and its example (api/contract/document.py).
EXAMPLES: dict[type, Any] = {
    Claimed: Claimed(
        hold_id=HOLD_ID,
        seat_id="A-1",
        seat_ids=["A-1", "A-2"],
        expires_ms=EXPIRES,
        state=HoldState.RESERVED,
        replaced_hold_id=None,
        seat_prices=PRICES,
        amount=9000,
    ),
    HeldLine: LINE,
    Hold: Hold(
        hold_id=HOLD_ID,
        seat_id="A-1",
        seat_ids=["A-1", "A-2"],
        seat_prices=PRICES,
        amount=9000,
        state=HoldState.CONFIRMED,
        expires_ms=EXPIRES,
        winner=CHARGE_ID,
        charge_in_flight=None,
        quarantine_until_ms=None,
        decided_ms=1767261620000,
        reason="captured",
        given_up=False,
        charges=[CHARGE],
        order=ORDER,
        server_time_ms=1767261604120,
    ),
    HoldCharge: CHARGE,
    Order: ORDER,
    HoldReleased: HoldReleased(hold_id=HOLD_ID, state="RELEASED"),
    HoldGivenUp: HoldGivenUp(
        hold_id=HOLD_ID, state="QUARANTINED", given_up=True, quarantine_until_ms=1767262800000
    ),
    ChargeStarted: ChargeStarted(
        charge_id=CHARGE_ID,
        hold_id=HOLD_ID,
        state=ChargeState.CHARGING,
        amount=9000,
        currency="EUR",
        provider_status="processing",
        client_secret=None,
        payment_form=None,
        expires_ms=EXPIRES,
    ),
    PaymentForm: PaymentForm(
        provider="stripe", publishable_key="pk_test_51Hh2y", js_url="https://js.stripe.com/v3/"
    ),
    ChargeAbandoned: ChargeAbandoned(charge_id=CHARGE_ID, abandoned=True),
    CallbackAnswer: CallbackAnswer(
        decision="CONFIRMED",
        duplicate=False,
        charge_state=ChargeState.CAPTURED,
        hold_state=HoldState.CONFIRMED,
        recorded=RECORDED,
        problems=None,
    ),
    StatesRecorded: RECORDED,
    ClaimRequest: ClaimRequest(quantity=2),
    ClaimLine: ClaimLine(sku="wheel-700c", quantity=2, location="east"),
    ChargeRequest: ChargeRequest(),
    ProviderCallback: {
        "id": "evt_8c1d",
        "type": "charge.captured",
        "data": {
            "attempt_id": "att_02cd63c4_1",
            "intent_id": "pi_02cd63c4",
            "idempotency_key": CHARGE_ID,
            "amount": 9000,
            "currency": "EUR",
            "status": "captured",
            "metadata": {"event_id": EVENT_ID, "charge_id": CHARGE_ID},
        },
    },
}
