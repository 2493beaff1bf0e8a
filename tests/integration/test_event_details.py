"""Events people recognise (ADR 0041), against the whole stack and a private ledger: the
details given at the create are on every event read and in the public list (on sale and to
come, soonest show first, paged, no login), a draft's details change by PATCH and nothing else
does, an event out of draft keeps them, and the ledger keeps them through a rebuild."""

import uuid
from typing import Any

import httpx
import pytest

from engine.model.event_config import EventConfig
from engine.model.holds import SeatSpec
from engine.store.event_catalogue import describe
from persistence.rebuild import rebuild
from tests.integration.conftest import Stack, StackLedger

pytestmark = [pytest.mark.redis, pytest.mark.slow]

GALA = {"name": "Spring Gala", "venue": "Konzerthaus, Berlin", "description": "Brahms and Ravel",
        "image_url": "https://example.org/gala.jpg", "starts_at_ms": 1_893_456_000_000,
        "time_zone": "Europe/Berlin", "locale": "de-DE"}  # fmt: skip


def admin(stack: Stack, method: str, path: str, **kw: Any) -> httpx.Response:
    with stack.client() as c:
        return c.request(method, path, headers=stack.admin_headers(), **kw)


def create(stack: Stack, opens_at_ms: int | None = 0, **details: Any) -> str:
    event_id = f"ev-{uuid.uuid4().hex[:8]}"
    body = {"event_id": event_id, "seats": [{"seat_id": "s0"}], "price_minor": 100, **details}
    if opens_at_ms is not None:
        body["opens_at_ms"] = opens_at_ms
    r = admin(stack, "POST", "/v1/admin/events", json=body)
    assert r.status_code == 201, r.text
    return event_id


def test_details_are_on_every_read_and_the_public_list_names_the_open_events(
    stack: Stack,
) -> None:
    later = create(stack, **GALA)
    sooner = create(stack, **{**GALA, "name": "Matinee", "starts_at_ms": GALA["starts_at_ms"] - 1})
    draft = create(stack, None, name="Not yet")
    with stack.client() as c:
        public = c.get(f"/v1/events/{later}").json()
    assert {k: public[k] for k in GALA} == GALA
    assert {k: admin(stack, "GET", f"/v1/admin/events/{later}").json()[k] for k in GALA} == GALA
    listed, offset = [], 0
    while offset is not None:
        with stack.client() as c:
            page = c.get("/v1/events", params={"offset": offset, "limit": 2}).json()
        listed += page["events"]
        offset = page["next_offset"]
    mine = [e for e in listed if e["event_id"] in (later, sooner, draft)]
    assert [(e["event_id"], e["name"]) for e in mine] == [
        (sooner, "Matinee"),
        (later, GALA["name"]),
    ]
    assert mine[1]["status"] == "open" and mine[1]["time_zone"] == "Europe/Berlin"


def test_a_drafts_details_change_and_nothing_else_does(stack: Stack) -> None:
    event_id = create(stack, None, **GALA)
    path = f"/v1/admin/events/{event_id}"
    r = admin(stack, "PATCH", path, json={"name": "Spring Gala II", "description": None})
    assert r.status_code == 200, r.text
    assert (r.json()["name"], r.json()["description"], r.json()["venue"]) == (
        "Spring Gala II", None, GALA["venue"],
    )  # fmt: skip
    for body, status, code in (
        ({"currency": "USD"}, 409, "not_changeable"),
        ({"colour": "red"}, 400, "invalid_request"),
        ({}, 400, "invalid_request"),
        ({"time_zone": "Mars/Olympus"}, 400, "invalid_request"),
        ({"locale": "de_DE.UTF-8"}, 400, "invalid_request"),
        ({"locale": "x"}, 400, "invalid_request"),
        ({"image_url": "javascript:alert(1)"}, 400, "invalid_request"),
        ({"name": ""}, 400, "invalid_request"),
        ({"starts_at_ms": -1}, 400, "invalid_request"),
    ):
        r = admin(stack, "PATCH", path, json=body)
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), (body, r.text)
    assert admin(stack, "POST", f"{path}/open", json={"opens_at_ms": 0}).status_code == 200
    r = admin(stack, "PATCH", path, json={"name": "Too late"})
    assert (r.status_code, r.json()["error"]["code"]) == (409, "details_fixed")
    assert admin(stack, "PATCH", "/v1/admin/events/nope", json={"name": "x"}).status_code == 404
    with stack.client() as c:
        assert c.get(f"/v1/events/{event_id}").json()["name"] == "Spring Gala II"


@pytest.mark.postgres
async def test_the_ledger_keeps_the_details_through_a_rebuild(
    stack: Stack, stack_ledger: StackLedger
) -> None:
    store, pool = stack_ledger.store, stack_ledger.pool
    event_id = f"ev-{uuid.uuid4().hex[:8]}"
    await store.create_event(
        event_id, [SeatSpec("a", 0)], EventConfig(hold_ttl_ms=60_000, quarantine_ms=60_000)
    )
    await describe(store.runner, event_id, GALA)
    await store.open_sale(event_id, 0)
    await stack_ledger.drain(event_id)
    async with pool.acquire() as conn:
        await store.restore.drop_event(event_id)
        await rebuild(store, conn, event_id)
    details = (await store.read.availability(event_id)).details.view()
    assert {k: details[k] for k in GALA} == GALA
