"""The OpenAPI document served at /openapi.json (and kept in docs/openapi.json: `make openapi`).

Every operation has a stable camelCase operationId, a summary, typed request and answer schemas
(components, with examples: the requests and answers declared as types in api/contract/, ADR
0054; the seat map's still written in api/openapi_ui.py) and its error answers, each listing
the codes it may carry (`x-error-codes`, from api/errors.py STATUS). Every limit the server
enforces is stated from the table the validators use (api/validate.py LIMITS).
tests/integration/test_openapi.py checks that it names exactly the routes the app serves and
validates the app's answers against it; tests/unit/test_openapi_examples.py checks every example
against its schema (ADR 0026)."""

import sys
from pathlib import Path
from typing import Any

import orjson

from api.contract.atoms import KIND_SCHEMA, STATE_SCHEMAS
from api.contract.document import SCHEMAS as ANSWER_SCHEMAS
from api.contract.webhooks import EVENT_TYPE_SCHEMA
from api.openapi_events import DESCRIBE, EVENT_PATHS
from api.openapi_listings import ADMIN_PATHS, LISTING_PATHS
from api.openapi_parts import (
    BODY,
    BUYER,
    CHARGE_ID,
    ERROR_SCHEMA,
    IDEMPOTENCY_KEY,
    OPS,
    PATHED,
    STORE,
    answer,
    json_body,
    operation,
    path,
    query,
    with_path_parameters,
)
from api.openapi_presales import PRESALE_PATHS, document_access_code
from api.openapi_refunds import REFUND_PATHS
from api.openapi_ui import UI_PATHS, UI_SCHEMAS
from api.openapi_waiting import WAITING_PATHS, document_admission
from api.openapi_webhooks import WEBHOOK_PATHS
from api.settings import ApiSettings

OPS_AUTH = ("unauthorized", "token_revoked", "identity_unavailable")
EVENT_READ = (*PATHED, *STORE, "event_not_found")
HOLD_CODES = (*BUYER, *PATHED, *STORE, "hold_not_found", "hold_lost_in_recovery")
CLAIM_CODES = (
    *BUYER, *BODY, *PATHED, *STORE, "event_not_found", "unknown_seat", "unknown_sku",
    "unknown_location", "sold_out", "seat_taken", "not_enough_seats", "party_too_large",
    "wrong_event_kind", "insufficient_stock", "limit_exceeded", "charge_in_flight",
    "sale_not_open", "sale_closed", "idempotency_key_reused", "rate_limited",
)  # fmt: skip
CHARGE_CODES = (
    *HOLD_CODES, *BODY, "not_owner", "event_not_found", "already_confirmed", "hold_expired",
    "charge_in_flight", "sale_not_open", "sale_closed", "idempotency_key_reused",
    "rate_limited", "provider_unavailable",
)  # fmt: skip
CALLBACK_CODES = ("invalid_request", "bad_signature", "event_not_found", "body_too_large",
                  *STORE, "not_yet_durable", "provider_not_answering")  # fmt: skip
METRICS_OK = {
    "200": {
        "description": "Prometheus text exposition",
        "content": {
            "text/plain": {
                "schema": {"type": "string"},
                "example": "# HELP onsale_claims_total Claims by result\n"
                '# TYPE onsale_claims_total counter\nonsale_claims_total{result="ok"} 80.0\n',
            }
        },
    }
}

META_PATHS: dict[str, Any] = {
    "/healthz": {
        "get": operation(
            "getHealth",
            "Liveness",
            answer(200, "Health", "the process answers"),
            (),
            bearer=False,
        )
    },
    "/readyz": {
        "get": operation(
            "getReadiness",
            "Readiness: Redis answers and every script is loaded",
            answer(200, "Readiness", "ready"),
            ("store_unavailable",),
            bearer=False,
        )
    },
    "/metrics": {
        "get": operation(
            "getMetrics",
            "Prometheus metrics",
            METRICS_OK,
            (*OPS_AUTH, "store_unavailable"),
            description=OPS,
        )
    },
    "/openapi.json": {
        "get": operation(
            "getOpenApi",
            "This document",
            answer(200, "OpenApiDocument", "the document"),
            OPS_AUTH,
            description=OPS,
        )
    },
    "/v1/auth/config": {
        "get": operation(
            "getAuthConfig",
            "How the pages sign in",
            answer(200, "AuthConfig", "the identity provider, and whether the demo login is on"),
            (),
            description="No login needed: the browser pages read it first (ADR 0050).",
            bearer=False,
        )
    },
    "/v1/login": {
        "post": operation(
            "login",
            "Log in (demo and load runs only)",
            answer(200, "LoginToken", "a bearer token"),
            (*BODY, "login_disabled", "rate_limited"),
            description="Demo and load runs only (ONSALE_DEMO_LOGIN=1): a signed token for any "
            "name, limited to `event_id` when given; 404 login_disabled otherwise (buyer tokens "
            "come from the identity provider).",
            body=json_body("LoginRequest"),
            bearer=False,
        )
    },
}

BUYER_PATHS: dict[str, Any] = {
    "/v1/events/{event_id}": {
        "get": operation(
            "getEvent",
            "Read an event's availability",
            answer(200, "EventAvailability", "the event's counters"),
            EVENT_READ,
            bearer=False,
        )
    },
    "/v1/events/{event_id}/seats": {
        "get": operation(
            "listFreeSeats",
            "List the best free seats",
            answer(200, "FreeSeats", "the best free seats by rank (a hint)"),
            EVENT_READ,
            parameters=[query("limit", 50)],
            bearer=False,
        )
    },
    "/v1/events/{event_id}/stock": {
        "get": operation(
            "getStock",
            "Read a stock event's availability per SKU and location",
            answer(200, "StockTable", "the stock table"),
            (*EVENT_READ, "wrong_event_kind"),
            description="Availability per SKU and location (one read, no scan).",
            bearer=False,
        )
    },
    "/v1/events/{event_id}/sections": {
        "get": operation(
            "getSections",
            "Read seats and free seats per section",
            answer(200, "Sections", "per section, in rank order"),
            (*EVENT_READ, "sections_interleaved"),
            description="One count per section over its rank range, no scan; 409 "
            "sections_interleaved when the map's sections share rank ranges.",
            bearer=False,
        )
    },
    "/v1/events/{event_id}/holds": {
        "post": operation(
            "claimHold",
            "Claim seats or a cart: a hold",
            {
                **answer(201, "Claimed", "a new hold"),
                **answer(200, "Claimed", "the same claim, sent again with its key"),
            },
            CLAIM_CODES,
            description="The hold id is derived from the login and its Idempotency-Key: a "
            "retry by the same login within the idempotency window answers 200 with the same "
            "hold; another login's same key is another hold. `replaced_hold_id`: the login's "
            "previous hold, released by this claim (another tab's). 429 rate_limited (with "
            "Retry-After) past the login's claim rate; 409 limit_exceeded past the units a "
            "login may hold and buy. What the event sells is the claim's to match: seats of a "
            "stock event, or lines of a seat event, are 400 wrong_event_kind. Once an event is "
            "known sold out, a claim that is not the retry of a hold is answered 409 sold_out "
            "before its token or body is checked (ADR 0012).",
            parameters=[IDEMPOTENCY_KEY],
            body=json_body("ClaimRequest", required=False),
        )
    },
    "/v1/events/{event_id}/holds/{hold_id}": {
        "get": operation(
            "getHold",
            "Read a hold",
            answer(200, "Hold", "the hold"),
            HOLD_CODES,
            description="The hold, its charges and what it owns. Another login's hold answers "
            "as an unknown one (404 hold_not_found).",
        ),
        "delete": operation(
            "releaseHold",
            "Give a hold up",
            {
                **answer(200, "HoldReleased", "RELEASED, by this call or an earlier one"),
                **answer(202, "HoldGivenUp", "QUARANTINED: given up, ends with its charge"),
            },
            (*HOLD_CODES, "not_owner", "already_confirmed", "hold_expired", "hold_revoked"),
            description="202: the hold is QUARANTINED (its deadline passed with a charge in "
            "flight): it is given up (a late capture is refunded, the login may claim again) and "
            "ends when the charge resolves or at quarantine_until_ms. 409: it ended otherwise "
            "(already_confirmed, hold_expired, hold_revoked; `state` in the error).",
        ),
    },
    "/v1/events/{event_id}/holds/{hold_id}/charges": {
        "post": operation(
            "startCharge",
            "Start the hold's charge",
            answer(202, "ChargeStarted", "registered and asked of the provider"),
            CHARGE_CODES,
            description="One charge for the whole hold (price x seats, or the cart's amount). "
            "The outcome comes from the provider's callback: read the hold until it is "
            "CONFIRMED (or the charge DECLINED or FAILED).",
            parameters=[IDEMPOTENCY_KEY],
            body=json_body("ChargeRequest", required=False),
        )
    },
    "/v1/events/{event_id}/holds/{hold_id}/charges/{charge_id}/abandon": {
        "post": operation(
            "abandonCharge",
            "Stop waiting for a charge",
            answer(200, "ChargeAbandoned", "abandoned (now or before)"),
            (
                *HOLD_CODES,
                "not_owner",
                "charge_not_found",
                "charge_captured",
                "charge_not_in_flight",
            ),
            description="409 charge_captured or charge_not_in_flight (with `charge_state`) "
            "when the charge is not in flight; a repeat answers like the first abandon.",
            parameters=[path("charge_id", CHARGE_ID)],
        )
    },
    "/v1/provider/callbacks": {
        "post": operation(
            "postProviderCallback",
            "The payment provider's callback",
            answer(200, "CallbackAnswer", "recorded (or a duplicate, or ignored)"),
            CALLBACK_CODES,
            description="Signed with Onsale-Signature: t=<unix s>,v1=<hex HMAC-SHA256>, t "
            f"within {ApiSettings.webhook_tolerance_s} s of now by default; with "
            "ONSALE_PROVIDER=stripe, Stripe's events signed with Stripe-Signature (ADR 0023), "
            "an event the engine does not follow answered 200 `IGNORED`. A duplicate (same "
            "provider event id) answers the recorded decision with the charge's and the hold's "
            "states now beside the recorded ones (`recorded`).",
            body=json_body("ProviderCallback"),
            bearer=False,
        )
    },
}

# Named once here: the error body, and the two enums read from their lists.
SCHEMAS: dict[str, Any] = {
    "Error": ERROR_SCHEMA,
    "EventKind": KIND_SCHEMA,
    "WebhookEventType": EVENT_TYPE_SCHEMA,
}
PARTS = (STATE_SCHEMAS, ANSWER_SCHEMAS, UI_SCHEMAS)
for part in PARTS:
    assert not SCHEMAS.keys() & part.keys(), SCHEMAS.keys() & part.keys()
    SCHEMAS |= part

# Operations by audience, by path (the first prefix that matches).
TAGS = (
    ("webhooks", "/v1/admin/webhooks/", "Merchant webhooks (ADR 0024); admin credential."),
    ("admin", "/v1/admin/", "Events, sales, listings and corrections; admin credential."),
    ("provider", "/v1/provider/", "The payment provider's callbacks, signed."),
    ("buyer", "/v1/", "What a buyer's page calls: events, claims, holds, charges."),
    ("ops", "/", "Health, readiness, metrics and this document."),
)
OPENAPI: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {
        "title": "onsale checkout API",
        "version": "1",
        "description": "Claims, holds and charges of an on-sale, its admin and ops (ADR 0026).",
    },
    "components": {
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "schemas": SCHEMAS,
    },
    "tags": [{"name": name, "description": text} for name, _, text in TAGS],
    "paths": {
        **META_PATHS,
        **BUYER_PATHS,
        **ADMIN_PATHS,
        **REFUND_PATHS,  # retry a refund (api/openapi_refunds.py)
        **LISTING_PATHS,  # listings, exports, close and cancel (api/openapi_listings.py)
        **WEBHOOK_PATHS,  # merchant webhooks (api/openapi_webhooks.py, ADR 0024)
        **WAITING_PATHS,  # the waiting room (api/openapi_waiting.py, ADR 0029)
        **UI_PATHS,  # the seat map and the browser pages (api/openapi_ui.py, ADR 0028)
        **EVENT_PATHS,  # the public list of events (api/openapi_events.py, ADR 0041)
        **PRESALE_PATHS,  # presale access codes (api/openapi_presales.py, ADR 0049)
    },
}
OPENAPI["paths"]["/v1/admin/events/{event_id}"]["patch"] = DESCRIBE  # beside its read
with_path_parameters(OPENAPI["paths"])  # `{name}` in a path: its parameter
document_admission(OPENAPI["paths"])  # the claim's admission header and refusals (ADR 0029)
document_access_code(OPENAPI["paths"])  # the refusals of its code (ADR 0049)
for route, item in OPENAPI["paths"].items():  # by audience: a generated client's modules
    tag = next(name for name, prefix, _ in TAGS if route.startswith(prefix))
    for op in item.values():
        op.setdefault("tags", [tag])


def main(argv: list[str] | None = None) -> None:
    """`make openapi`: write the document to the file named (docs/openapi.json), or stdout."""
    out = orjson.dumps(OPENAPI, option=orjson.OPT_INDENT_2) + b"\n"
    target = (sys.argv[1:] if argv is None else argv)[:1]
    if target:
        Path(target[0]).write_bytes(out)
    else:
        sys.stdout.buffer.write(out)


if __name__ == "__main__":
    main()
