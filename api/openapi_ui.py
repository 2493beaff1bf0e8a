"""The seat map and the browser pages in the OpenAPI document (api/routes/seatmap.py,
api/routes/ui.py, ADR 0028): their operations and answer schemas, and the places a seat of the
admin's create may name. api/openapi.py adds UI_PATHS to its paths and the pages' string
catalogue to its components; the seat map's answers are declared as types
(api/contract/seatmap.py, a seat's place in the create event_setup.py SeatPlace; ADR 0054)."""

from typing import Any

from api.openapi_parts import (
    PATHED,
    STORE,
    operation,
    ref,
)
from api.routes.ui import ASSETS
from engine.views.seatmap import SEATMAP_SEATS_MAX

MAP_CODES = (*PATHED, *STORE, "event_not_found", "wrong_event_kind", "seat_map_too_large")
STREAM_CODES = (*MAP_CODES, "watchers_full", "not_acceptable")
COUNT: dict[str, Any] = {"type": "integer", "minimum": 0}
TEXT: dict[str, Any] = {"type": "string"}
ETAG = {"ETag": {"description": "the version: send it back in If-None-Match", "schema": TEXT}}
IF_NONE_MATCH = {
    "name": "If-None-Match",
    "in": "header",
    "required": False,
    "description": "the ETag this client holds: 304 without a body while it is current",
    "schema": {"type": "string", "pattern": "^[ -~]*$", "maxLength": 256},
    "example": '"9f2c51b0a4e7d3c8e6f1"',
}
NOT_MODIFIED = {"304": {"description": "not modified: the ETag sent is current"}}

# The pages' string catalogue (strings.json, ADR 0046): each language's strings by key.
CATALOGUE = {
    "type": "object",
    "description": "For each language (en, de), every string of the buyer's page by key.",
    "additionalProperties": {"type": "object", "additionalProperties": {"type": "string"}},
    "example": {"en": {"sale.on": "On sale now"}, "de": {"sale.on": "Jetzt im Verkauf"}},
}
UI_SCHEMAS: dict[str, Any] = {"StringCatalogue": CATALOGUE}


def _json(name: str, description: str) -> dict[str, Any]:
    content = {"application/json": {"schema": ref(name)}}
    return {"200": {"description": description, "headers": ETAG, "content": content}}


def _text(kind: str, description: str, example: Any) -> dict[str, Any]:
    schema = ref("StringCatalogue") if kind == "application/json" else {"type": "string"}
    content = {kind: {"schema": schema, "example": example}}
    return {"200": {"description": description, "content": content}}


PAGE_EXAMPLES: dict[str, Any] = {
    "html": '<!doctype html>\n<html lang="en">',
    "js": "// The buyer's page",
    "css": "/* onsale pages */",
    "json": {"en": {"lang.name": "English"}, "de": {"lang.name": "Deutsch"}},
}
MEDIA = {
    "html": "text/html",
    "js": "text/javascript",
    "css": "text/css",
    "json": "application/json",
}


def _page(op_id: str, summary: str, kind: str) -> dict[str, Any]:
    answers = {**_text(MEDIA[kind], "the file (ETag, Last-Modified)", PAGE_EXAMPLES[kind]),
               **NOT_MODIFIED}  # fmt: skip
    return {"get": operation(op_id, summary, answers, ("not_found",), bearer=False)}


def _asset_id(name: str) -> str:
    stem, kind = name.rsplit(".", 1)
    return "getUi" + stem.capitalize() + kind.capitalize()


STREAM_EXAMPLE = (
    'retry: 1000\n\nevent: seats\ndata: {"states": "FFHS", "serial": 12, "...": "..."}\n\n'
    'event: change\ndata: {"serial": 13, "base": 12, "changes": [[0, "H"]], "...": "..."}\n\n'
)

UI_PATHS: dict[str, Any] = {
    "/v1/events/{event_id}/seatmap": {
        "get": operation(
            "getSeatMap",
            "Read the seat map a page draws",
            {**_json("SeatMapLayout", "each seat's place, in rank order"), **NOT_MODIFIED},
            MAP_CODES,
            description="Sections, rows, positions and price levels, as the admin's create "
            "gave them (or the seats and sections, in rank order, when it gave none). "
            f"Cacheable: ETag and max-age 60. At most {SEATMAP_SEATS_MAX} seats are drawn: a "
            "larger venue answers 409 seat_map_too_large.",
            parameters=[IF_NONE_MATCH],
            bearer=False,
        )
    },
    "/v1/events/{event_id}/seatmap/state": {
        "get": operation(
            "getSeatMapState",
            "Read every seat's state (versioned)",
            {**_json("SeatMapState", "every seat's state now"), **NOT_MODIFIED},
            MAP_CODES,
            description="Served from this process's board: one read of the event a quarter "
            "second at most, however many pages ask; 304 when If-None-Match names the current "
            "version (a page polling this costs nothing more).",
            parameters=[IF_NONE_MATCH],
            bearer=False,
        )
    },
    "/v1/events/{event_id}/seatmap/stream": {
        "get": operation(
            "streamSeatMap",
            "Follow every seat's state (server-sent events)",
            _text("text/event-stream", "an event stream", STREAM_EXAMPLE),
            STREAM_CODES,
            description="Only for a client that asks for one (Accept: text/event-stream, as an "
            "EventSource does; else 406 not_acceptable). `seats`: the state whole, as "
            "seatmap/state; then `change` (version, serial, base: the serial it follows, "
            "changes: [index, state] pairs) or `seats` again, and `clock` (server_time_ms) at "
            "least every 10 s. The stream ends after 30 s and EventSource reconnects. 503 "
            "watchers_full: poll seatmap/state instead.",
            bearer=False,
        )
    },
    "/ui/": _page("getUiIndex", "The pages: the buyer's page and the dashboard", "html"),
    **{
        f"/ui/{name}": _page(_asset_id(name), f"A file of the pages: {name}", name.split(".")[1])
        for name in ASSETS
    },
    "/ui/runbooks": {
        "get": operation(
            "getUiRunbooks",
            "The runbooks (docs/deploy.md) as a page",
            _text("text/html", "the page", PAGE_EXAMPLES["html"]),
            ("not_found",),
            description="404 where the repository's docs are not installed.",
            bearer=False,
        )
    },
}
