"""Presale access codes in the OpenAPI document (api/routes/presales.py, ADR 0049): the admin's
bulk add and list, the public windows, and what the claim takes besides (`document_access_code`:
its `access_code` and the refusals it adds). api/openapi.py adds PRESALE_PATHS to its paths,
PRESALE_SCHEMAS to its components, and calls `document_access_code` on its paths."""

from typing import Any

from api.contract.derive import nullable
from api.openapi_parts import (
    ADMIN,
    AT_MS,
    BODY,
    IDEMPOTENCY_KEY,
    INT,
    PATHED,
    STORE,
    add_refusals,
    answer,
    array,
    json_body,
    limit,
    operation,
    path,
    query,
    record,
    ref,
)
from engine.model.errors import (
    AccessCodeExists,
    AccessCodeInvalid,
    AccessCodeLimit,
    AccessCodeRequired,
    AccessCodeUsedUp,
    PresaleMismatch,
)

CLAIM_PATH = "/v1/events/{event_id}/holds"
CLAIM_CODES = tuple(
    e.code for e in (AccessCodeRequired, AccessCodeInvalid, AccessCodeUsedUp, AccessCodeLimit)
)
SET_CODES = (*ADMIN, *STORE, *PATHED, *BODY, "event_not_found", "sale_closed",
             PresaleMismatch.code, AccessCodeExists.code)  # fmt: skip
CODE = {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,32}$", "example": "K7QM2XV9TA"}
ACCESS_CODE = {
    **CODE,
    "description": "before T0, in a presale window (GET /v1/events/{event_id}/presales): one "
    "of its codes, spent by this claim's hold (a hold that ends without a sale gives the use "
    "back); ignored from T0 on",
}
PRESALE = record(
    {"name": CODE, "opens_at_ms": AT_MS, "closes_at_ms": AT_MS},
    {"name": "fans", "opens_at_ms": 1767175200000, "closes_at_ms": 1767261600000},
    description="A presale window: a claim before T0 in it needs one of its codes.",
)
CODES_REQUEST = record(
    {
        "opens_at_ms": limit("opens_at_ms", description="the window opens (ms since the epoch)"),
        "closes_at_ms": limit("closes_at_ms", description="the window closes"),
        "expires_at_ms": limit("expires_at_ms", description="no use after it (default: closes)"),
        "uses": limit("uses", description="holds a code may be spent by, live or sold (1)"),
        "uses_per_login": limit(
            "uses_per_login", description="... by one login (default 1; 0: no limit of its own)"
        ),
        "codes": limit("codes", items=CODE, uniqueItems=True, description="the codes, or:"),
        "count": limit("count", description="codes to make (10 characters, no 0/O or 1/I)"),
    },
    {"opens_at_ms": 1767175200000, "closes_at_ms": 1767261600000, "count": 500, "uses": 2},
    optional=("expires_at_ms", "uses", "uses_per_login", "codes", "count"),
    closed=True,
    description="One batch of a presale's codes: `codes` as given, or `count` made (from the "
    "request's Idempotency-Key when it has one: the batch sent again makes the same codes). "
    "The presale's window is set by its first batch; a later one gives the same times.",
)
CODES_ADDED = record(
    {
        "presale": CODE,
        "opens_at_ms": AT_MS,
        "closes_at_ms": AT_MS,
        "codes": array(CODE),
        "added": {**INT, "description": "codes new in this batch"},
        "existing": {**INT, "description": "codes that were there with the same terms"},
    },
    {
        "presale": "fans",
        "opens_at_ms": 1767175200000,
        "closes_at_ms": 1767261600000,
        "codes": ["K7QM2XV9TA", "P4WZ8RNC3E"],
        "added": 2,
        "existing": 0,
    },
    description="The batch's codes; 201 when a code was added, 200 when all were there.",
)
ACCESS_CODE_VIEW = record(
    {
        "code": CODE,
        "presale": CODE,
        "uses": INT,
        "uses_per_login": INT,
        "expires_at_ms": AT_MS,
        "used": {**INT, "description": "spent now: by live holds and sales"},
    },
    {
        "code": "K7QM2XV9TA",
        "presale": "fans",
        "uses": 2,
        "uses_per_login": 1,
        "expires_at_ms": 1767261600000,
        "used": 1,
    },
)
PRESALE_SCHEMAS: dict[str, dict[str, Any]] = {
    "Presale": PRESALE,
    "Presales": record(
        {
            "event_id": {"type": "string"},
            "presales": array({"$ref": "#/components/schemas/Presale"}),
        },
        {"event_id": "spring-gala", "presales": [PRESALE["example"]]},
        description="An event's presale windows, by when they open.",
    ),
    "AccessCodesRequest": CODES_REQUEST,
    "AccessCodesAdded": CODES_ADDED,
    "AccessCode": ACCESS_CODE_VIEW,
    "AccessCodes": record(
        {
            "codes": array(ref("AccessCode")),
            "next_after": nullable(
                {"type": "string", "description": "the next page's `after` (null: done)"}
            ),
        },
        {"codes": [ACCESS_CODE_VIEW["example"]], "next_after": None},
        description="An event's codes with their uses, by presale and code.",
    ),
}
AFTER = {
    "name": "after",
    "in": "query",
    "description": "the page after this one's `next_after`",
    "schema": {"type": "string"},
    "example": "fans/K7QM2XV9TA",
}
PRESALE_FILTER = {
    "name": "presale",
    "in": "query",
    "description": "one presale's codes",
    "schema": CODE,
    "example": "fans",
}
PRESALE_PATHS: dict[str, Any] = {
    "/v1/events/{event_id}/presales": {
        "get": operation(
            "getPresales",
            "Read an event's presale windows",
            answer(200, "Presales", "the windows (none: no presale)"),
            (*STORE, *PATHED),
            description="No login needed: a buyer's page says when a code is needed.",
            parameters=[path("event_id")],
            bearer=False,
        )
    },
    "/v1/admin/events/{event_id}/presales/{presale}/codes": {
        "post": operation(
            "addAccessCodes",
            "Add a presale's access codes, in bulk",
            {
                **answer(201, "AccessCodesAdded", "codes added"),
                **answer(200, "AccessCodesAdded", "every code was there already"),
            },
            SET_CODES,
            description="All or none: a code of another presale or other terms refuses the "
            "batch (409 access_code_exists). One outbox record a batch: the ledger keeps the "
            "codes, and a rebuild restores them with the uses of the sales it holds.",
            parameters=[path("event_id"), path("presale", CODE), IDEMPOTENCY_KEY],
            body=json_body("AccessCodesRequest"),
        )
    },
    "/v1/admin/events/{event_id}/codes": {
        "get": operation(
            "listAccessCodes",
            "List an event's access codes with their uses",
            answer(200, "AccessCodes", "a page of codes"),
            (*ADMIN, *STORE, *PATHED, "invalid_request"),
            parameters=[path("event_id"), query("limit", 100), PRESALE_FILTER, AFTER],
        )
    },
}


def document_access_code(paths: dict[str, Any], claim_request: dict[str, Any]) -> None:
    """The claim's `access_code` and the refusals it adds (each under its status, beside the
    claim's own)."""
    claim_request["properties"]["access_code"] = ACCESS_CODE
    add_refusals(paths[CLAIM_PATH]["post"], CLAIM_CODES)
