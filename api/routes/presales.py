"""Presale access codes over HTTP (engine/store/presales.py, ADR 0049): an admin adds a
presale's codes in bulk and lists them with their uses; anyone reads an event's presale windows
(a buyer's page says when a code is needed). The codes are spent by the claim route
(`access_code` in its body)."""

import hashlib
import hmac
import os
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from api.context import ctx, endpoint, path_id
from api.contract import presales as contract
from api.contract.atoms import fields_of
from api.errors import ApiError
from api.responses import json_response, read_json
from api.validate import LIMITS, access_code, idempotency_key, obj, only, query_integer, whole
from engine.model import keys
from engine.store.presales import CODE_ALPHABET, CODE_LENGTH, AccessCode, Presale

CODES_FIELDS = fields_of(contract.AccessCodesRequest)
BATCH_MAX = int(LIMITS["codes"].high)  # codes one request adds (the CLI sends more, in batches)


def presale_name(request: Request) -> str:
    name = str(request.path_params["presale"])
    if not keys.valid_code(name):
        raise ApiError(400, "invalid_request", "presale must match [A-Za-z0-9_-]{1,32}")
    return name


def derived_codes(secret: str, event_id: str, presale: str, key: str, count: int) -> list[str]:
    """`count` codes made from the request's Idempotency-Key, so a batch sent again makes the
    same codes: each an HMAC of the key, unguessable without the server's secret."""
    out = []
    for i in range(count):
        made = f"{event_id}|{presale}|{key}|{i}".encode()
        mac = hmac.new(secret.encode(), made, hashlib.sha256).digest()
        out.append("".join(CODE_ALPHABET[b % len(CODE_ALPHABET)] for b in mac[:CODE_LENGTH]))
    return out


def codes_of(body: dict[str, Any], make: Callable[[int], list[str]]) -> list[str]:
    """The batch's codes: `codes` as given (1 to BATCH_MAX, distinct), or `count` made."""
    if ("codes" in body) == ("count" in body):
        raise ApiError(400, "invalid_request", "send one of codes, count")
    if "count" in body:
        return make(whole(body, "count"))
    given = body["codes"]
    if not isinstance(given, list) or not 1 <= len(given) <= BATCH_MAX:
        raise ApiError(400, "invalid_request", f"codes must list 1 to {BATCH_MAX} codes")
    codes = [access_code({"code": x}, "code") for x in given]
    if len(set(codes)) != len(codes):
        raise ApiError(400, "invalid_request", "codes must not repeat a code")
    return codes


@endpoint("admin_add_codes")
async def add_codes(request: Request) -> Response:
    """Add access codes to a presale (its window made by its first batch), all or none."""
    c = ctx(request)
    c.require_admin(request)
    event_id, presale = path_id(request, "event_id"), presale_name(request)
    body = obj(await read_json(request, c.settings.body_max_bytes))
    only(body, CODES_FIELDS, "codes")
    window = Presale(presale, whole(body, "opens_at_ms"), whole(body, "closes_at_ms"))
    if window.closes_at_ms <= window.opens_at_ms:
        raise ApiError(400, "invalid_request", "closes_at_ms must be after opens_at_ms")
    # The batch: its Idempotency-Key (a batch sent again is one batch, its made codes the
    # same), else a fresh id.
    batch = idempotency_key(request.headers.get("idempotency-key"), "") or os.urandom(8).hex()
    secret = c.settings.admin_token
    codes = codes_of(body, lambda count: derived_codes(secret, event_id, presale, batch, count))
    added = await c.store.presales.add(
        event_id,
        window,
        codes,
        uses=whole(body, "uses", 1),
        per_login=whole(body, "uses_per_login", 1),
        expires_ms=whole(body, "expires_at_ms", window.closes_at_ms),
        batch_id=batch,
    )
    answer: contract.AccessCodesAdded = {
        "presale": presale,
        "opens_at_ms": window.opens_at_ms,
        "closes_at_ms": window.closes_at_ms,
        "codes": codes,
        "added": added.added,
        "existing": added.existing,
    }
    return json_response(answer, 201 if added.added else 200)


def code_view(x: AccessCode) -> contract.AccessCode:
    return {
        "code": x.code,
        "presale": x.presale,
        "uses": x.uses,
        "uses_per_login": x.per_login,
        "expires_at_ms": x.expires_ms,
        "used": x.used,
    }


@endpoint("admin_list_codes")
async def list_codes(request: Request) -> Response:
    """An event's codes with their uses now, by presale and code, a page at a time (`after`:
    the last code of the page before)."""
    c = ctx(request)
    c.require_admin(request)
    event_id = path_id(request, "event_id")
    limit = query_integer(request.query_params, "limit", 100)
    presale = request.query_params.get("presale")
    after = request.query_params.get("after", "")
    every = [x for x in await c.store.presales.codes(event_id) if presale in (None, x.presale)]
    mark = tuple([*after.split("/", 1), ""][:2]) if after else ("", "")
    page = [x for x in every if (x.presale, x.code) > mark]
    more = len(page) > limit
    page = page[:limit]
    cursor = f"{page[-1].presale}/{page[-1].code}" if more and page else None
    answer: contract.AccessCodes = {"codes": [code_view(x) for x in page], "next_after": cursor}
    return json_response(answer)


@endpoint("presales")
async def presales(request: Request) -> Response:
    """An event's presale windows (public: a buyer's page says when a code is needed)."""
    c = ctx(request)
    event_id = path_id(request, "event_id")
    windows = await c.store.presales.windows(event_id)
    answer: contract.Presales = {
        "event_id": event_id,
        "presales": [
            {"name": w.name, "opens_at_ms": w.opens_at_ms, "closes_at_ms": w.closes_at_ms}
            for w in windows
        ],
    }
    return json_response(answer)


ROUTES = [
    Route("/v1/events/{event_id}/presales", presales, methods=["GET"]),
    Route("/v1/admin/events/{event_id}/presales/{presale}/codes", add_codes, methods=["POST"]),
    Route("/v1/admin/events/{event_id}/codes", list_codes, methods=["GET"]),
]
