"""Presale access codes (api/routes/presales.py, ADR 0049): an event's presale windows, the
admin's batch of codes (each field bounded by api/validate.py LIMITS; the handler accepts exactly
the fields declared) and what it answers, and the codes with their uses."""

from typing import Annotated, Any, NotRequired, TypedDict

from msgspec import Meta

from api.contract.atoms import EVENT_ID, AtMs, limited

Code = Annotated[str, Meta(pattern="^[A-Za-z0-9_-]{1,32}$", examples=["K7QM2XV9TA"])]
# The claim's `access_code` (api/openapi_presales.py adds it to the claim's request).
AccessCodeField = Annotated[
    Code,
    Meta(
        description="before T0, in a presale window (GET /v1/events/{event_id}/presales): one "
        "of its codes, spent by this claim's hold (a hold that ends without a sale gives the use "
        "back); ignored from T0 on"
    ),
]


class Presale(TypedDict):
    """A presale window: a claim before T0 in it needs one of its codes."""

    name: Code
    opens_at_ms: AtMs
    closes_at_ms: AtMs


class Presales(TypedDict):
    """An event's presale windows, by when they open."""

    event_id: str
    presales: list[Presale]


class AccessCodesRequest(TypedDict):
    """One batch of a presale's codes: `codes` as given, or `count` made (from the request's
    Idempotency-Key when it has one: the batch sent again makes the same codes). The presale's
    window is set by its first batch; a later one gives the same times."""

    opens_at_ms: Annotated[
        int, limited("opens_at_ms", description="the window opens (ms since the epoch)")
    ]
    closes_at_ms: Annotated[int, limited("closes_at_ms", description="the window closes")]
    expires_at_ms: NotRequired[
        Annotated[int, limited("expires_at_ms", description="no use after it (default: closes)")]
    ]
    uses: NotRequired[
        Annotated[
            int, limited("uses", description="holds a code may be spent by, live or sold (1)")
        ]
    ]
    uses_per_login: NotRequired[
        Annotated[
            int,
            limited(
                "uses_per_login",
                description="... by one login (default 1; 0: no limit of its own)",
            ),
        ]
    ]
    codes: NotRequired[
        Annotated[list[Code], limited("codes", unique=True, description="the codes, or:")]
    ]
    count: NotRequired[
        Annotated[int, limited("count", description="codes to make (10 characters, no 0/O or 1/I)")]
    ]


class AccessCodesAdded(TypedDict):
    """The batch's codes; 201 when a code was added, 200 when all were there."""

    presale: Code
    opens_at_ms: AtMs
    closes_at_ms: AtMs
    codes: list[Code]
    added: Annotated[int, Meta(description="codes new in this batch")]
    existing: Annotated[int, Meta(description="codes that were there with the same terms")]


class AccessCode(TypedDict):
    code: Code
    presale: Code
    uses: int
    uses_per_login: int
    expires_at_ms: AtMs
    used: Annotated[int, Meta(description="spent now: by live holds and sales")]


class AccessCodes(TypedDict):
    """An event's codes with their uses, by presale and code."""

    codes: list[AccessCode]
    next_after: Annotated[str | None, Meta(description="the next page's `after` (null: done)")]


WINDOW: Presale = {"name": "fans", "opens_at_ms": 1767175200000, "closes_at_ms": 1767261600000}
CODE: AccessCode = {
    "code": "K7QM2XV9TA",
    "presale": "fans",
    "uses": 2,
    "uses_per_login": 1,
    "expires_at_ms": 1767261600000,
    "used": 1,
}
# Requests whose unknown fields the handler refuses (400): additionalProperties false.
CLOSED = (AccessCodesRequest,)

# Each request and answer and its example (api/contract/document.py).
EXAMPLES: dict[type, Any] = {
    Presale: WINDOW,
    Presales: Presales(event_id=EVENT_ID, presales=[WINDOW]),
    AccessCodesRequest: AccessCodesRequest(
        opens_at_ms=1767175200000, closes_at_ms=1767261600000, count=500, uses=2
    ),
    AccessCodesAdded: AccessCodesAdded(
        presale="fans",
        opens_at_ms=1767175200000,
        closes_at_ms=1767261600000,
        codes=["K7QM2XV9TA", "P4WZ8RNC3E"],
        added=2,
        existing=0,
    ),
    AccessCode: CODE,
    AccessCodes: AccessCodes(codes=[CODE], next_after=None),
}
