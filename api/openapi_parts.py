"""The building blocks of the OpenAPI document (api/openapi.py): schema helpers, parameters,
bodies, and the error answers of an operation, built from the codes it may answer. Every limit
comes from the table the validators use (api/validate.py LIMITS); every error code and its
status from the one map (api/errors.py STATUS); every state from the transition tables."""

import re
from collections.abc import Iterable
from typing import Any

from api.contract import atoms
from api.contract.derive import schema_of
from api.errors import STATUS
from api.settings import ApiSettings
from api.validate import LIMITS
from engine.model import errors
from engine.views.sections import SectionsInterleaved

# The atoms the answers declared as types share (api/contract/atoms.py), as schemas.
ID = schema_of(atoms.Id)
CHARGE_ID = schema_of(atoms.ChargeId)
INT: dict[str, Any] = {"type": "integer"}
STR: dict[str, Any] = {"type": "string"}
AT_MS = schema_of(atoms.AtMs)
BEARER: list[dict[str, list[str]]] = [{"bearer": []}]
OPS = "Ops only: the metrics token (ONSALE_METRICS_TOKEN) or an admin credential."

# Path parameters and their examples (the example event exists in the fuzzed stack).
EVENT_ID, HOLD_ID, CHARGE_ID_EXAMPLE = atoms.EVENT_ID, atoms.HOLD_ID, atoms.CHARGE_ID
EXAMPLES = {
    "event_id": EVENT_ID,
    "hold_id": HOLD_ID,
    "charge_id": CHARGE_ID_EXAMPLE,
    "endpoint_id": "ep_5b1e0c7d9a3f2e4c6b8d0a1f",
    "delivery_id": "42",
    "login": "alice",
    "presale": "fans",
}


def ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def limit(name: str, **more: Any) -> dict[str, Any]:
    """The schema of what LIMITS[name] bounds; `x-limit` names the limit when the field's own
    name is another (tests/unit/test_api_contract.py reads it)."""
    return {**LIMITS[name].schema(), "x-limit": name, **more}


def path(name: str, schema: dict[str, Any] = ID) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "schema": schema,
        "example": EXAMPLES[name],
    }


def query(name: str, example: int) -> dict[str, Any]:
    return {"name": name, "in": "query", "schema": limit(name), "example": example}


IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key",
    "in": "header",
    "description": "the client's key for this request: a retry with it is answered as the first",
    "schema": ID,
    "example": "checkout-7f3a",
}


def json_body(
    name: str, required: bool = True, max_bytes: int = ApiSettings.body_max_bytes
) -> dict[str, Any]:
    """A JSON request body of component schema `name` (its example is the schema's)."""
    return {
        "required": required,
        "description": f"at most {max_bytes} bytes by default (larger: 413 body_too_large)",
        "content": {"application/json": {"schema": ref(name)}},
    }


def answer(status: int, name: str, description: str) -> dict[str, Any]:
    """A JSON answer of component schema `name`."""
    content = {"application/json": {"schema": ref(name)}}
    return {str(status): {"description": description, "content": content}}


# What the client is told with each code (an engine error's summary; the HTTP layer's words).
MESSAGES: dict[str, str] = {
    "invalid_request": "event_id must match [A-Za-z0-9_.:-]{1,64}",
    "unauthorized": "send Authorization: Bearer <token>",
    "token_revoked": "this token was revoked; log in again",
    "token_scope": "this token is not valid for this event",
    "login_disabled": "this deployment takes tokens from its identity provider",
    "identity_unavailable": "cannot verify tokens yet",
    "bad_signature": "no valid v1 signature",
    "not_found": "Not Found",
    "method_not_allowed": "Method Not Allowed",
    "body_too_large": f"body larger than {ApiSettings.body_max_bytes} bytes",
    "unsupported_media_type": "send application/json",
    "not_yet_durable": "the sale is not in the ledger yet",
    "provider_unavailable": "the payment provider refused",
    "provider_not_answering": "the provider did not answer",
    "invalid_webhook_url": "url must be an absolute https URL",
    "unknown_event_type": "event_types: 'order.shipped' is not one of the notification types",
    "webhook_endpoint_not_found": "no such endpoint",
    "webhook_delivery_not_found": "no such delivery of this endpoint",
    "webhook_endpoint_disabled": "enable the endpoint to replay to it",
    "too_many_webhook_endpoints": "at most 100 endpoints; delete one",
    "webhooks_unavailable": "the webhook store cannot be reached",
    "orders_unavailable": "the ledger database cannot be reached",
    SectionsInterleaved.code: "the sections of this seat map share rank ranges",
}


def _engine_errors(cls: type[errors.EngineError]) -> Iterable[type[errors.EngineError]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _engine_errors(sub)


MESSAGES |= {cls.code: cls.summary for cls in _engine_errors(errors.EngineError)}

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Every refusal and failure: a stable snake_case `code` (api/errors.py), the "
    "message the client may show, the request id for support; some codes add their details.",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "request_id"],
            "properties": {
                # "internal": a 500, which is a bug of ours
                "code": {"type": "string", "enum": sorted({*STATUS, "internal"})},
                "message": STR,
                "request_id": STR,
                "opens_at_ms": {
                    **AT_MS,
                    "nullable": True,
                    "description": "sale_not_open: when the sale opens (null when no opening "
                    "time is set yet); already_open, sale_started: the sale's T0; "
                    "presale_mismatch: the presale's own window's start",
                },
                "state": {
                    **STR,
                    "description": "already_confirmed, hold_expired, hold_revoked: the hold's",
                },
                "cap": {**INT, "description": "limit_exceeded: units a login may hold and buy"},
                "charge_state": {
                    **STR,
                    "description": "charge_captured, charge_not_in_flight: the charge's state",
                },
                "available": {
                    **INT,
                    "description": "not_enough_seats: the seats this claim could have had; "
                    "insufficient_stock: the most one location has of the sku; "
                    "stock_below_zero: units available",
                },
                "max_party": {**INT, "description": "party_too_large: seats one claim may ask"},
                "kind": {**STR, "description": "wrong_event_kind: what the event sells"},
                "sku": {**STR, "nullable": True, "description": "unknown_sku, insufficient_stock"},
                "location": {**STR, "nullable": True, "description": "unknown_location"},
                "held": {**INT, "description": "stock_below_zero: units holds own there"},
                "blocked": {**INT, "description": "stock_below_zero: units late payments block"},
                "sold": {**INT, "description": "stock_below_zero: units sold there"},
                "sale_status": {**STR, "description": "sale_closed: closed or cancelled"},
                # Presale access codes (ADR 0049).
                "closes_at_ms": {
                    **AT_MS,
                    "description": "access_code_required: when the presale open now closes; "
                    "presale_mismatch: the presale's own window's end",
                },
                "uses": {**INT, "description": "access_code_used_up: holds the code may have"},
                "per_login": {**INT, "description": "access_code_limit: holds a login may have"},
                "access_code": {**STR, "description": "access_code_exists: the code"},
                "first_request": {
                    "type": "object",
                    "description": "idempotency_key_reused: what the key's first request holds "
                    "(its seat_ids, or its lines and amount)",
                },
            },
        }
    },
}


def error_example(code: str) -> dict[str, Any]:
    rid = "6321baae2c4f4aa391f0622c16bdd9d6"
    message = MESSAGES.get(code, code.replace("_", " "))
    return {"error": {"code": code, "message": message, "request_id": rid}}


ERROR_SCHEMA["example"] = error_example("sold_out")
RETRY_AFTER = {
    "Retry-After": {
        "description": "seconds to wait before trying again",
        "schema": {"type": "integer", "minimum": 1},
    }
}


def errors_for(*codes: str) -> dict[str, Any]:
    """The error answers of an operation that may answer `codes`: one per status."""
    by_status: dict[int, list[str]] = {}
    for code in sorted(set(codes)):
        by_status.setdefault(STATUS[code], []).append(code)
    return _errors(by_status)


def _errors(by_status: dict[int, list[str]]) -> dict[str, Any]:
    """One answer per status, listing its codes in `x-error-codes` and the description, with
    an example; 429 and 503 carry Retry-After."""
    out: dict[str, Any] = {}
    for status, named in sorted(by_status.items()):
        media: dict[str, Any] = {"schema": ref("Error")}
        answer: dict[str, Any] = {"description": "error"}
        if named:
            media["example"] = error_example(named[0])
            answer = {"description": f"error: {', '.join(named)}", "x-error-codes": named}
        answer["content"] = {"application/json": media}
        if status in (429, 503):  # api/errors.py error_response sets it on both
            answer["headers"] = RETRY_AFTER
        out[str(status)] = answer
    return out


def add_refusals(op: dict[str, Any], codes: Iterable[str]) -> None:
    """More refusals an operation may answer, each under its status beside the operation's own
    (a status both have lists the codes of both)."""
    responses = op["responses"]
    for status, refusal in errors_for(*codes).items():
        if status not in responses:
            responses[status] = refusal
            continue
        named = sorted({*responses[status].get("x-error-codes", ()), *refusal["x-error-codes"]})
        responses[status] = {**responses[status], "x-error-codes": named}
        responses[status]["description"] = f"error: {', '.join(named)}"


def operation(
    op_id: str,
    summary: str,
    answers: dict[str, Any],
    codes: Iterable[str],
    *,
    description: str = "",
    parameters: Iterable[dict[str, Any]] = (),
    body: dict[str, Any] | None = None,
    bearer: bool = True,
) -> dict[str, Any]:
    """One operation: its id, summary, parameters, body, answers and error codes."""
    op: dict[str, Any] = {"operationId": op_id, "summary": summary}
    if description:
        op["description"] = description
    if bearer:
        op["security"] = BEARER
    if params := list(parameters):
        op["parameters"] = params
    if body is not None:
        op["requestBody"] = body
    op["responses"] = {**answers, **errors_for(*codes)}
    return op


def with_path_parameters(paths: dict[str, Any]) -> None:
    """Each operation's path parameters, read from its path: `{name}` is `path(name)` (an ID)
    unless the operation declares that one itself (another schema); first, in the path's
    order, before the rest of its parameters."""
    for route, item in paths.items():
        names = re.findall(r"{(\w+)}", route)
        for method, op in item.items():
            declared = {p["name"]: p for p in op.get("parameters", ()) if p["in"] == "path"}
            rest = [p for p in op.get("parameters", ()) if p["in"] != "path"]
            params = [declared.pop(name, None) or path(name) for name in names] + rest
            if declared:
                raise ValueError(f"{method} {route} declares {sorted(declared)}: not in its path")
            if params:
                op["parameters"] = params
                for later in ("requestBody", "responses"):  # after it, as `operation` puts them
                    if later in op:
                        op[later] = op.pop(later)


# The codes every operation of a kind may answer, beside its own.
BODY = ("invalid_request", "body_too_large", "unsupported_media_type")
STORE = ("store_unavailable", "recovering")
# An empty path segment is no route (the router's 404), whatever the operation.
PATHED = ("invalid_request", "not_found")
BUYER = ("unauthorized", "token_revoked", "token_scope", "identity_unavailable")
ADMIN = ("unauthorized", "token_revoked", "identity_unavailable", "rate_limited")
