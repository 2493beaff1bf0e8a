"""Presale access codes in the OpenAPI document (api/routes/presales.py, ADR 0049): the admin's
bulk add and list, the public windows, and what the claim takes besides (`document_access_code`:
its `access_code` and the refusals it adds). api/openapi.py adds PRESALE_PATHS to its paths and
calls `document_access_code` on its paths; the requests and answers are declared as types
(api/contract/presales.py, ADR 0054)."""

from typing import Any

from api.contract import presales as contract
from api.contract.derive import schema_of
from api.openapi_parts import (
    ADMIN,
    BODY,
    IDEMPOTENCY_KEY,
    PATHED,
    STORE,
    add_refusals,
    answer,
    json_body,
    operation,
    path,
    query,
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
CODE = schema_of(contract.Code)
ACCESS_CODE = schema_of(contract.AccessCodeField)
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
            parameters=[path("presale", CODE), IDEMPOTENCY_KEY],
            body=json_body("AccessCodesRequest"),
        )
    },
    "/v1/admin/events/{event_id}/codes": {
        "get": operation(
            "listAccessCodes",
            "List an event's access codes with their uses",
            answer(200, "AccessCodes", "a page of codes"),
            (*ADMIN, *STORE, *PATHED, "invalid_request"),
            parameters=[query("limit", 100), PRESALE_FILTER, AFTER],
        )
    },
}


def document_access_code(paths: dict[str, Any]) -> None:
    """The refusals the claim's `access_code` adds (each under its status, beside the claim's
    own); the field itself is the claim request's (api/contract/holds.py ClaimRequest)."""
    add_refusals(paths[CLAIM_PATH]["post"], CLAIM_CODES)
