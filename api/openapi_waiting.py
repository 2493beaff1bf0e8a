"""The waiting room in the OpenAPI document (api/routes/waiting.py, ADR 0029): its four
operations and their schemas, and what the claim of an event with a room needs besides
(`document_admission`). api/openapi.py adds WAITING_PATHS to its paths and calls
`document_admission` on its paths; the requests and answers are declared as types
(api/contract/waiting.py, ADR 0054)."""

from typing import Any

from api.contract.waiting import ADMISSION_HEADER, TOKEN
from api.openapi_parts import (
    ADMIN,
    BODY,
    BUYER,
    PATHED,
    STORE,
    add_refusals,
    answer,
    json_body,
    operation,
    query,
)

CLAIM_PATH = "/v1/events/{event_id}/holds"
ADMISSION_CODES = ("admission_required", "admission_invalid", "admission_used", "admission_expired")
EVENT_CODES = ("event_not_found", "no_waiting_room")
JOIN_CODES = (*BUYER, *STORE, *PATHED, *BODY, *EVENT_CODES, "rate_limited", "sale_not_open",
              "sale_closed", "queue_full")  # fmt: skip
ME_CODES = (*BUYER, *STORE, *PATHED, *EVENT_CODES, "not_in_queue", "sale_not_open", "sale_closed")
SET_CODES = (*ADMIN, *STORE, *PATHED, *BODY, "event_not_found", "sale_started", "sale_closed")
FIGURES_CODES = (*ADMIN, *STORE, *PATHED, *EVENT_CODES)


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
            parameters=[query("offset", 0), query("limit", 500)],
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
            body=json_body("WaitingRoomSettings", required=False),
        ),
        "get": operation(
            "getWaitingRoom",
            "Read an event's waiting room",
            answer(200, "WaitingRoom", "the room"),
            FIGURES_CODES,
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
    "example": TOKEN,
}


def document_admission(paths: dict[str, Any]) -> None:
    """The claim of an event with a waiting room: its admission header, and the refusals it
    adds (each under its status, beside the claim's own)."""
    claim = paths[CLAIM_PATH]["post"]
    claim.setdefault("parameters", []).append(ADMISSION_PARAMETER)
    add_refusals(claim, ADMISSION_CODES)
