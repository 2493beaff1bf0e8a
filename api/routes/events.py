"""Events as buyers find them (ADR 0041): the public list of the events on sale or to come, and
an event's details (name, venue, description, image, start and its time zone), given at the
create and changed by `PATCH /v1/admin/events/{e}` while the event is a draft."""

import re
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from api.context import admin_post, ctx, endpoint
from api.contract import atoms, catalogue
from api.contract.atoms import fields_of
from api.contract.event_setup import CreateEventRequest
from api.errors import ApiError
from api.responses import json_response
from api.validate import query_integer, text, whole
from engine.model.event_details import DETAIL_FIELDS, EventDetails
from engine.store.event_catalogue import Listed, describe, public_events

# Every field of an event's create (api/routes/admin.py): its details change while a draft.
EVENT_FIELDS = fields_of(CreateEventRequest)
URL_RE = re.compile(r"^https?://[^\s/]+\S*$")
# A BCP 47 tag as browsers' Intl takes it: a language, then optional script, region, variants.
LOCALE_RE = re.compile(
    r"^[A-Za-z]{2,3}(-[A-Za-z]{4})?(-([A-Za-z]{2}|[0-9]{3}))?(-[A-Za-z0-9]{5,8})*$"
)
LIMIT_OF = {"description": "event_description"}  # a field whose limit has another name


def details_of(body: dict[str, Any]) -> dict[str, Any]:
    """The details a create or a change gives (only those present; null clears one)."""
    out: dict[str, Any] = {}
    for name in DETAIL_FIELDS:
        if name not in body:
            continue
        if body[name] is None:
            out[name] = ""
        elif name == "starts_at_ms":
            out[name] = whole(body, name)
        else:
            out[name] = text(body, name, limit=LIMIT_OF.get(name))
    if out.get("image_url") and not URL_RE.match(out["image_url"]):
        raise ApiError(400, "invalid_request", "image_url must be an http(s) URL")
    if out.get("time_zone"):
        try:
            ZoneInfo(out["time_zone"])
        except (ZoneInfoNotFoundError, ValueError) as exc:
            why = "time_zone must be an IANA time zone such as Europe/Berlin"
            raise ApiError(400, "invalid_request", why) from exc
    if out.get("locale") and not LOCALE_RE.match(out["locale"]):
        why = "locale must be a BCP 47 language tag such as de-DE"
        raise ApiError(400, "invalid_request", why)
    return out


@endpoint("list_events")
async def list_events(request: Request) -> Response:
    """The events on sale or to come, soonest show first, a page at a time (no login)."""
    offset = query_integer(request.query_params, "offset", 0)
    limit = query_integer(request.query_params, "limit", 50)
    page, after = await public_events(ctx(request).store.runner, offset, limit)
    answer: catalogue.EventList = {"events": [listed_view(e) for e in page], "next_offset": after}
    return json_response(answer)


def listed_view(e: Listed) -> catalogue.EventListed:
    return {
        "event_id": e.event_id, "status": e.status, "opens_at_ms": e.opens_at_ms,
        "kind": "stock" if e.kind == "stock" else "seats", "currency": e.currency,
        "price_minor": e.price_minor, **details_view(e.details),
    }  # fmt: skip


@endpoint("admin_describe_event")
async def describe_event(request: Request) -> Response:
    """Change a draft event's details; anything else of an event is fixed at its create (409
    not_changeable names it), and an event out of draft keeps its details (409 details_fixed)."""
    c, _admin, event_id, body = await admin_post(request)
    fixed = sorted(k for k in body if k not in DETAIL_FIELDS and k in EVENT_FIELDS)
    unknown = sorted(k for k in body if k not in DETAIL_FIELDS and k not in EVENT_FIELDS)
    if unknown:
        raise ApiError(400, "invalid_request", f"unknown field {unknown[0]}")
    if fixed:
        raise ApiError(409, "not_changeable", f"{fixed[0]} is fixed at the create; "
                       f"a draft's {', '.join(DETAIL_FIELDS)} change")  # fmt: skip
    if not body:
        raise ApiError(400, "invalid_request", "nothing to change")
    details = await describe(c.store.runner, event_id, details_of(body))
    answer: catalogue.EventDetails = {"event_id": event_id, **details_view(details)}
    return json_response(answer)


ROUTES = [
    Route("/v1/events", list_events, methods=["GET"]),
    Route("/v1/admin/events/{event_id}", describe_event, methods=["PATCH"]),
]


def details_view(d: EventDetails) -> atoms.DetailFields:
    """What people recognise an event by, as every event read answers it (the engine's view:
    null when not given), field by field as its type declares them."""
    v = d.view()
    return {
        "name": v["name"], "venue": v["venue"], "description": v["description"],
        "image_url": v["image_url"], "starts_at_ms": v["starts_at_ms"],
        "time_zone": v["time_zone"], "locale": v["locale"],
    }  # fmt: skip
