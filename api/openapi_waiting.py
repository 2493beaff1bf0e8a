"""The waiting room in the OpenAPI document (api/routes/waiting.py, ADR 0029): its four
operations and their schemas, and what the claim of an event with a room needs besides
(`document_admission`). api/openapi.py adds WAITING_PATHS to its paths, WAITING_SCHEMAS to its
components, and calls `document_admission` on its paths."""

from typing import Any

from api.contract.derive import nullable
from api.openapi_parts import (
    ADMIN,
    AT_MS,
    BODY,
    BOOL,
    BUYER,
    INT,
    PATHED,
    STORE,
    add_refusals,
    answer,
    json_body,
    limit,
    operation,
    path,
    query,
    record,
)
from api.routes.waiting import ADMISSION_HEADER
from engine.waiting.room import ADMISSION_TTL_MS, CAPACITY_PER_S, FACTOR_PCT, QueueState

CLAIM_PATH = "/v1/events/{event_id}/holds"
ADMISSION_CODES = ("admission_required", "admission_invalid", "admission_used", "admission_expired")
EVENT_CODES = ("event_not_found", "no_waiting_room")
JOIN_CODES = (*BUYER, *STORE, *PATHED, *BODY, *EVENT_CODES, "rate_limited", "sale_not_open",
              "sale_closed", "queue_full")  # fmt: skip
ME_CODES = (*BUYER, *STORE, *PATHED, *EVENT_CODES, "not_in_queue", "sale_not_open", "sale_closed")
SET_CODES = (*ADMIN, *STORE, *PATHED, *BODY, "event_not_found", "sale_started", "sale_closed")
FIGURES_CODES = (*ADMIN, *STORE, *PATHED, *EVENT_CODES)
NUMBER: dict[str, Any] = {"type": "number"}
COUNT: dict[str, Any] = {"type": "integer", "minimum": 0}
TOKEN_EXAMPLE = "1767261600012.1767261720012." + "3f9a1c2e7b4d6f8a" * 4

PLACE = record(
    {
        "event_id": {"type": "string"},
        "state": {
            "type": "string",
            "enum": [*QueueState],
            "description": "waiting: in line; admitted: claim now with `admission`; used: the "
            "admission made its claim; lapsed: it was not used in time (join again: the end of "
            "the line); sold_out: nothing is free, held or blocked, so nothing can come back",
        },
        "position": nullable(
            {**COUNT, "description": "waiting after T0: 1 is the next admitted; null otherwise"}
        ),
        "drawn": {**BOOL, "description": "T0 has passed: the places drawn before it are final"},
        "entries": {**COUNT, "description": "places in the queue"},
        "joined_before_t0": {**COUNT, "description": "places drawn at T0"},
        "admitted": {**COUNT, "description": "admissions made so far"},
        "admission_rate_per_s": {**NUMBER, "description": "admissions a second, last ~5 s"},
        "estimate_s": nullable(
            {
                **NUMBER,
                "description": "position / the admission rate now; null when nobody is being "
                "admitted (before T0, or no unit free: only a unit coming back admits anyone)",
            }
        ),
        "free": {**COUNT, "description": "units free now"},
        "held": {**COUNT, "description": "units in live holds, which may come back"},
        "blocked": {**COUNT, "description": "units waiting for a late payment's outcome"},
        "opens_at_ms": AT_MS,
        "server_time_ms": AT_MS,
        "admission": nullable(
            record(
                {
                    "header": {"type": "string", "enum": [ADMISSION_HEADER]},
                    "token": {"type": "string", "maxLength": 128},
                    "expires_ms": AT_MS,
                },
                {"header": ADMISSION_HEADER, "token": TOKEN_EXAMPLE, "expires_ms": 1767261720012},
                description="admitted: send `token` in the header `header` with one claim "
                "before `expires_ms` (server clock)",
            )
        ),
        "poll_after_ms": nullable(
            {**COUNT, "description": "when to look again (a hint; looking sooner moves no place)"}
        ),
    },
    {
        "event_id": "spring-gala",
        "state": "waiting",
        "position": 412,
        "drawn": True,
        "entries": 9800,
        "joined_before_t0": 9000,
        "admitted": 120,
        "admission_rate_per_s": 24.0,
        "estimate_s": 17.2,
        "free": 3,
        "held": 77,
        "blocked": 0,
        "opens_at_ms": 1767261600000,
        "server_time_ms": 1767261604120,
        "admission": None,
        "poll_after_ms": 9300,
    },
    description="A login's place in an event's waiting room.",
)
SETTINGS_FIELDS: dict[str, Any] = {
    "admit_per_s": limit(
        "admit_per_s",
        description=f"admissions a second at most; absent: {CAPACITY_PER_S}, a fifth of the "
        "claim endpoint's measured rate (auto)",
    ),
    "admit_factor_pct": limit(
        "admit_factor_pct",
        description="admissions not yet used stay within this share of the free units "
        f"(default {FACTOR_PCT})",
    ),
    "admission_ttl_ms": limit(
        "admission_ttl_ms",
        description=f"how long an admission lives (default {ADMISSION_TTL_MS})",
    ),
}
FIGURES = record(
    {
        "event_id": {"type": "string"},
        "admit_per_s": INT,
        "auto": {**BOOL, "description": "admit_per_s is the engine's default"},
        "admit_factor_pct": INT,
        "admission_ttl_ms": INT,
        "drawn": BOOL,
        "entries": COUNT,
        "joined_before_t0": COUNT,
        "admitted": COUNT,
        "used": COUNT,
        "lapsed": COUNT,
        "outstanding": {**COUNT, "description": "admissions live and not yet used"},
        "admission_rate_per_s": NUMBER,
        "server_time_ms": AT_MS,
    },
    {
        "event_id": "spring-gala",
        "admit_per_s": 2000,
        "auto": True,
        "admit_factor_pct": 150,
        "admission_ttl_ms": 120000,
        "drawn": True,
        "entries": 9800,
        "joined_before_t0": 9000,
        "admitted": 120,
        "used": 80,
        "lapsed": 2,
        "outstanding": 38,
        "admission_rate_per_s": 24.0,
        "server_time_ms": 1767261604120,
    },
    description="A waiting room's settings and counters.",
)


EMPTY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {},
    "description": "nothing to send: an empty object, or no body",
    "example": {},
}
HEX = {"type": "string", "pattern": "^[0-9a-f]+$"}
DRAW = record(
    {
        "event_id": {"type": "string"},
        "commitment": {**HEX, "description": "SHA-256 of the seed, published before T0"},
        "seed": nullable({**HEX, "description": "the draw's seed, revealed from T0 on"}),
        "entries": {
            "type": "array",
            "description": "in place order: each entry drawn before T0 and its arrival number",
            "items": record(
                {
                    "entry": {**HEX, "description": "SHA-256(event_id NUL login), 16 bytes"},
                    "seq": {**INT, "description": "arrival number: breaks a tie of draws"},
                },
                {"entry": "5d41402abc4b2a76b9719d911017c592", "seq": 17},
            ),
        },
        "next_offset": nullable({**INT, "description": "the next page's offset (null: done)"}),
    },
    {
        "event_id": "spring-gala",
        "commitment": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "seed": "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
        "entries": [{"entry": "5d41402abc4b2a76b9719d911017c592", "seq": 17}],
        "next_offset": None,
    },
    description="A waiting room's draw, for anyone to check (ADR 0040): place order = the "
    "entries sorted by (HMAC-SHA256(seed, 'draw' NUL entry) first 4 bytes big-endian, seq); "
    "the seed's SHA-256 must be the commitment. `onsale waiting verify` does both.",
)
WAITING_SCHEMAS: dict[str, dict[str, Any]] = {
    "QueueDraw": DRAW,
    "QueuePlace": PLACE,
    "QueueJoinRequest": EMPTY,
    "WaitingRoom": FIGURES,
    "WaitingRoomSettings": record(
        SETTINGS_FIELDS,
        {"admit_per_s": 500, "admit_factor_pct": 150},
        optional=SETTINGS_FIELDS,
        closed=True,
    ),
}


WAITING_PATHS: dict[str, Any] = {
    "/v1/events/{event_id}/queue": {
        "post": operation(
            "joinQueue",
            "Join an event's waiting room",
            {**answer(201, "QueuePlace", "a new place"), **answer(200, "QueuePlace", "its place")},
            JOIN_CODES,
            description="Every login that joins before T0 gets its place by a draw made with "
            "the room's secret, the same for a second tab or a rejoin: arriving earlier before "
            "T0 gains nothing. From T0 on, places are taken in arrival order, after every "
            "drawn one. A login whose admission was used or lapsed joins again at the end. A "
            "sold-out event (nothing free, held or blocked) gives no place: 200 sold_out.",
            parameters=[path("event_id")],
            body=json_body("QueueJoinRequest", required=False),
        )
    },
    "/v1/events/{event_id}/queue/draw": {
        "get": operation(
            "getQueueDraw",
            "Read a waiting room's draw, to check it",
            answer(200, "QueueDraw", "the commitment; from T0 on the seed and the entries"),
            (*STORE, *PATHED, *EVENT_CODES, "invalid_request"),
            description="No login needed: an entry is a hash of the event and a login, which "
            "only that buyer (and the operator) can tie to a person. Before T0 only the "
            "commitment to the seed; from T0 on the seed and, a page at a time in place order, "
            "every entry drawn before T0 (an entry that joined again after its turn has its "
            "new place after T0 and is not listed).",
            parameters=[path("event_id"), query("offset", 0), query("limit", 500)],
            bearer=False,
        )
    },
    "/v1/events/{event_id}/queue/me": {
        "get": operation(
            "getQueuePlace",
            "Read one's place in the waiting room",
            answer(200, "QueuePlace", "the login's place"),
            ME_CODES,
            description="The place, the figures behind the estimate and, once admitted, the "
            "admission to claim with. Admissions are made in place order as anyone looks, at "
            "most admit_per_s a second and while admissions not yet used stay within "
            "admit_factor_pct of the free units.",
            parameters=[path("event_id")],
        )
    },
    "/v1/admin/events/{event_id}/waiting-room": {
        "put": operation(
            "setWaitingRoom",
            "Give an event a waiting room",
            {**answer(201, "WaitingRoom", "a new room"), **answer(200, "WaitingRoom", "changed")},
            SET_CODES,
            description="Until T0 (a draft, or an open sale whose T0 is to come): from then on "
            "its claims need an admission from the queue. A room is never removed, and its "
            "settings stop changing at T0 (409 sale_started).",
            parameters=[path("event_id")],
            body=json_body("WaitingRoomSettings", required=False),
        ),
        "get": operation(
            "getWaitingRoom",
            "Read an event's waiting room",
            answer(200, "WaitingRoom", "the room"),
            FIGURES_CODES,
            parameters=[path("event_id")],
        ),
    },
}

ADMISSION_PARAMETER = {
    "name": ADMISSION_HEADER,
    "in": "header",
    "required": False,
    "description": "an event with a waiting room: the admission its queue gave this login "
    "(GET .../queue/me). It is spent by this claim's hold (its Idempotency-Key); the same "
    "claim sent again goes through while the admission lives.",
    "schema": {"type": "string", "maxLength": 128},
    "example": TOKEN_EXAMPLE,
}


def document_admission(paths: dict[str, Any]) -> None:
    """The claim of an event with a waiting room: its admission header, and the refusals it
    adds (each under its status, beside the claim's own)."""
    claim = paths[CLAIM_PATH]["post"]
    claim.setdefault("parameters", []).append(ADMISSION_PARAMETER)
    add_refusals(claim, ADMISSION_CODES)
