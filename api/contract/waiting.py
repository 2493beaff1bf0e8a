"""The waiting room (api/routes/waiting.py, ADR 0029, 0040): a login's place, the room's
settings and counters, its published draw, and what an admin sends to set a room up (each field
bounded by api/validate.py LIMITS; the handler accepts exactly the fields declared)."""

from typing import Annotated, Any, Literal, NotRequired, TypedDict, get_args

from msgspec import Meta

from api.contract.atoms import EVENT_ID, AtMs, Count, limited
from engine.waiting.room import ADMISSION_TTL_MS, CAPACITY_PER_S, FACTOR_PCT, QueueState

Header = Literal["Onsale-Admission"]  # the header a claim sends its admission in
ADMISSION_HEADER: Header = get_args(Header)[0]
Hex = Annotated[str, Meta(pattern="^[0-9a-f]+$")]
TOKEN = "1767261600012.1767261720012." + "3f9a1c2e7b4d6f8a" * 4
NOW = 1767261604120


class Admission(TypedDict):
    """admitted: send `token` in the header `header` with one claim before `expires_ms`
    (server clock)."""

    header: Header
    token: Annotated[str, Meta(max_length=128)]
    expires_ms: AtMs


class QueuePlace(TypedDict):
    """A login's place in an event's waiting room."""

    event_id: str
    state: Annotated[
        QueueState,
        Meta(
            description="waiting: in line; admitted: claim now with `admission`; used: the "
            "admission made its claim; lapsed: it was not used in time (join again: the end of "
            "the line); sold_out: nothing is free, held or blocked, so nothing can come back"
        ),
    ]
    position: Annotated[
        Count | None,
        Meta(description="waiting after T0: 1 is the next admitted; null otherwise"),
    ]
    drawn: Annotated[bool, Meta(description="T0 has passed: the places drawn before it are final")]
    entries: Annotated[Count, Meta(description="places in the queue")]
    joined_before_t0: Annotated[Count, Meta(description="places drawn at T0")]
    admitted: Annotated[Count, Meta(description="admissions made so far")]
    admission_rate_per_s: Annotated[float, Meta(description="admissions a second, last ~5 s")]
    estimate_s: Annotated[
        float | None,
        Meta(
            description="position / the admission rate now; null when nobody is being "
            "admitted (before T0, or no unit free: only a unit coming back admits anyone)"
        ),
    ]
    free: Annotated[Count, Meta(description="units free now")]
    held: Annotated[Count, Meta(description="units in live holds, which may come back")]
    blocked: Annotated[Count, Meta(description="units waiting for a late payment's outcome")]
    opens_at_ms: AtMs
    server_time_ms: AtMs
    admission: Admission | None
    poll_after_ms: Annotated[
        Count | None,
        Meta(description="when to look again (a hint; looking sooner moves no place)"),
    ]


class WaitingRoom(TypedDict):
    """A waiting room's settings and counters."""

    event_id: str
    admit_per_s: int
    auto: Annotated[bool, Meta(description="admit_per_s is the engine's default")]
    admit_factor_pct: int
    admission_ttl_ms: int
    drawn: bool
    entries: Count
    joined_before_t0: Count
    admitted: Count
    used: Count
    lapsed: Count
    outstanding: Annotated[Count, Meta(description="admissions live and not yet used")]
    admission_rate_per_s: float
    server_time_ms: AtMs


class WaitingRoomSettings(TypedDict):
    admit_per_s: NotRequired[
        Annotated[
            int,
            limited(
                "admit_per_s",
                description=f"admissions a second at most; absent: {CAPACITY_PER_S}, a fifth "
                "of the claim endpoint's measured rate (auto)",
            ),
        ]
    ]
    admit_factor_pct: NotRequired[
        Annotated[
            int,
            limited(
                "admit_factor_pct",
                description="admissions not yet used stay within this share of the free units "
                f"(default {FACTOR_PCT})",
            ),
        ]
    ]
    admission_ttl_ms: NotRequired[
        Annotated[
            int,
            limited(
                "admission_ttl_ms",
                description=f"how long an admission lives (default {ADMISSION_TTL_MS})",
            ),
        ]
    ]


class QueueJoinRequest(TypedDict):
    """nothing to send: an empty object, or no body"""


class DrawnEntry(TypedDict):
    entry: Annotated[Hex, Meta(description="SHA-256(event_id NUL login), 16 bytes")]
    seq: Annotated[int, Meta(description="arrival number: breaks a tie of draws")]


class QueueDraw(TypedDict):
    """A waiting room's draw, for anyone to check (ADR 0040): place order = the entries sorted
    by (HMAC-SHA256(seed, 'draw' NUL entry) first 4 bytes big-endian, seq); the seed's SHA-256
    must be the commitment. `onsale waiting verify` does both."""

    event_id: str
    commitment: Annotated[Hex, Meta(description="SHA-256 of the seed, published before T0")]
    seed: Annotated[Hex | None, Meta(description="the draw's seed, revealed from T0 on")]
    entries: Annotated[
        list[DrawnEntry],
        Meta(description="in place order: each entry drawn before T0 and its arrival number"),
    ]
    next_offset: Annotated[int | None, Meta(description="the next page's offset (null: done)")]


ENTRY: DrawnEntry = {"entry": "5d41402abc4b2a76b9719d911017c592", "seq": 17}
# Requests whose unknown fields the handler refuses (400): additionalProperties false.
CLOSED = (WaitingRoomSettings, QueueJoinRequest)

# Each request and answer and its example (api/contract/document.py).
EXAMPLES: dict[type, Any] = {
    QueueDraw: QueueDraw(
        event_id=EVENT_ID,
        commitment="9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        seed="2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
        entries=[ENTRY],
        next_offset=None,
    ),
    DrawnEntry: ENTRY,
    QueuePlace: QueuePlace(
        event_id=EVENT_ID,
        state=QueueState.WAITING,
        position=412,
        drawn=True,
        entries=9800,
        joined_before_t0=9000,
        admitted=120,
        admission_rate_per_s=24.0,
        estimate_s=17.2,
        free=3,
        held=77,
        blocked=0,
        opens_at_ms=1767261600000,
        server_time_ms=NOW,
        admission=None,
        poll_after_ms=9300,
    ),
    Admission: Admission(header=ADMISSION_HEADER, token=TOKEN, expires_ms=1767261720012),
    QueueJoinRequest: QueueJoinRequest(),
    WaitingRoom: WaitingRoom(
        event_id=EVENT_ID,
        admit_per_s=2000,
        auto=True,
        admit_factor_pct=150,
        admission_ttl_ms=120000,
        drawn=True,
        entries=9800,
        joined_before_t0=9000,
        admitted=120,
        used=80,
        lapsed=2,
        outstanding=38,
        admission_rate_per_s=24.0,
        server_time_ms=NOW,
    ),
    WaitingRoomSettings: WaitingRoomSettings(admit_per_s=500, admit_factor_pct=150),
}
