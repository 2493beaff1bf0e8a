"""Hostile or careless clients: a refused request leaves nothing behind, and every answer says
what is true. The API in process on real Redis; states are arranged with a test-clock store
under the same key prefix, then asked over HTTP."""

import asyncio
import re
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx
import orjson
import pytest

from api.app import create_app
from api.routes.admin import new_event
from api.settings import ApiSettings
from engine.model import keys
from engine.model.signing import HEADER, sign
from engine.model.states import ChargeState, HoldState
from engine.store import Store
from tests.conftest import REDIS_URL, Sale, open_sale
from tests.helpers import callback, reversal

pytestmark = [pytest.mark.redis]

ADMIN = secrets.token_urlsafe(32)
SECRET = secrets.token_urlsafe(32)
T0 = 1_900_000_000_000
PRICE = 4500


@dataclass
class Api:
    http: httpx.AsyncClient
    store: Store  # test clock, same prefix as the app's store

    admin: ClassVar[dict[str, str]] = {"Authorization": f"Bearer {ADMIN}"}

    async def login(self, name: str) -> dict[str, str]:
        r = await self.http.post("/v1/login", json={"login": name})
        assert r.status_code == 200, r.text
        return {"Authorization": f"Bearer {r.json()['token']}"}

    async def create(self, body: Any) -> httpx.Response:
        return await self.http.post("/v1/admin/events", json=body, headers=self.admin)

    async def event_keys(self, event_id: str) -> list[str]:
        pattern = f"{self.store.prefix}:{{{event_id}}}:*"
        return [k async for k in self.store.client.scan_iter(match=pattern, count=1000)]

    async def callback(self, body: dict[str, Any]) -> httpx.Response:
        raw = orjson.dumps(body)
        headers = {HEADER: sign(SECRET, raw, int(time.time())), "Content-Type": "application/json"}
        return await self.http.post("/v1/provider/callbacks", content=raw, headers=headers)


@pytest.fixture
async def api(real_store: Store) -> AsyncIterator[Api]:
    env = {
        "ONSALE_REDIS_URL": REDIS_URL,
        "ONSALE_KEY_PREFIX": real_store.prefix,
        "ONSALE_TOKEN_SECRET": secrets.token_urlsafe(32),
        "ONSALE_ADMIN_TOKEN": ADMIN,
        "ONSALE_WEBHOOK_SECRET": SECRET,
        "ONSALE_DEMO_LOGIN": "1",
        # No rate limits or seat caps here: these tests send what a limit would refuse.
        "ONSALE_ADDRESS_PER_S": "0",
        "ONSALE_CLAIMS_PER_S": "0",
        "ONSALE_CHARGES_PER_S": "0",
        "ONSALE_LOGIN_CAP": "0",
        "ONSALE_PROVIDER_URL": "http://127.0.0.1:9",  # nobody: a charge start times out
        "ONSALE_PROVIDER_TIMEOUT_MS": "200",
        "ONSALE_CONFIRM_AFTER": "redis",
    }
    app = create_app(ApiSettings.from_env(env))
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://api", timeout=60
        ) as http,
    ):
        yield Api(http, real_store)


def error_of(r: httpx.Response) -> dict[str, Any]:
    error: dict[str, Any] = r.json()["error"]
    return error


def good_body(event_id: str, n_seats: int = 3) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "seats": [{"seat_id": f"s{i}", "rank": i, "section": "A"} for i in range(n_seats)],
        "hold_ttl_ms": 60_000,
        "quarantine_ms": 60_000,
        "price_minor": PRICE,
        "opens_at_ms": 0,
    }


# -- admin create: the whole body is checked before anything is written -------------------


def _seat(**fields: Any) -> dict[str, Any]:
    return {"seats": [{"seat_id": "s0", "rank": 0}, {"seat_id": "s1", **fields}]}


@pytest.mark.parametrize(
    "change",
    [
        {"opens_at_ms": -1},
        {"opens_at_ms": 1e30},
        {"opens_at_ms": "tomorrow"},
        {"opens_at_ms": 2**53},
        {"hold_ttl_ms": 999},
        {"hold_ttl_ms": 86_400_001},
        {"quarantine_ms": 0},
        {"quarantine_ms": 10**15},
        {"price_minor": -1},
        {"price_minor": 10**12 + 1},
        {"price_minor": 1.5},
        {"currency": "euro"},
        {"policy": "maybe"},
        {"hold_ttl": 60_000},  # a misspelt field is refused, not silently defaulted
        _seat(rank=1e308),
        _seat(rank=-1e308),
        _seat(rank=1e9 + 1),
        _seat(rank="1"),
        _seat(section="x" * 65),
        _seat(row=3),
        {"seats": [{"seat_id": "s0"}, {"seat_id": "s0"}]},
        {"seats": [{"seat_id": "s0"}, "s1"]},
        {"seats": []},
    ],
    ids=repr,
)
async def test_a_refused_create_leaves_nothing_and_the_corrected_retry_succeeds(
    api: Api, change: dict[str, Any]
) -> None:
    event_id = f"ev-{uuid.uuid4().hex[:8]}"
    r = await api.create({**good_body(event_id), **change})
    assert (r.status_code, error_of(r)["code"]) == (400, "invalid_request"), r.text
    assert await api.event_keys(event_id) == []
    assert event_id not in await api.store.read.event_ids()
    retry = await api.create(good_body(event_id))
    assert retry.status_code == 201, retry.text
    assert (await api.store.read.availability(event_id)).seats_total == 3


async def test_a_create_at_the_edges_of_every_limit_is_accepted(api: Api) -> None:
    event_id = f"ev-{uuid.uuid4().hex[:8]}"
    body = {
        **good_body(event_id),
        "seats": [{"seat_id": "lo", "rank": -1e9}, {"seat_id": "hi", "rank": 1e9, "section": ""}],
        "hold_ttl_ms": 1_000,
        "quarantine_ms": 7 * 86_400_000,
        "price_minor": 10**12,
        "opens_at_ms": 2**53 - 1,
    }
    r = await api.create(body)
    assert r.status_code == 201, r.text
    a = await api.store.read.availability(event_id)
    assert (a.opens_at_ms, a.price_minor, a.config.hold_ttl_ms) == (2**53 - 1, 10**12, 1_000)
    claim = await api.http.post(f"/v1/events/{event_id}/holds", headers=await api.login("al"))
    assert error_of(claim)["opens_at_ms"] == 2**53 - 1  # the scripts handle the largest T0


def good_stock(event_id: str) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "kind": "stock",
        "locations": ["east", "west"],
        "skus": [{"sku": "CHAIN", "price_minor": 2_500, "on_hand": {"east": 5}}],
        "hold_ttl_ms": 60_000,
        "quarantine_ms": 60_000,
        "opens_at_ms": 0,
    }


def _sku(**fields: Any) -> dict[str, Any]:
    return {"skus": [{"sku": "CHAIN", "price_minor": 2_500, **fields}]}


@pytest.mark.parametrize(
    "change",
    [
        {"kind": "tickets"},
        {"seats": [{"seat_id": "s0"}]},  # seats, a party cap or one price: seat events only
        {"max_party": 2},
        {"price_minor": 100},
        {"locations": []},
        {"locations": ["east", "east"]},
        {"locations": ["ea:st"]},
        {"locations": [f"l{i}" for i in range(17)]},
        {"locations": "east"},
        {"skus": []},
        {"skus": "CHAIN"},
        {"skus": ["CHAIN"]},
        {"skus": [{"sku": "CHAIN", "price_minor": 1}, {"sku": "CHAIN", "price_minor": 2}]},
        _sku(on_hand={"north": 1}),  # a location the event lacks
        _sku(on_hand={"east": -1}),
        _sku(on_hand={"east": 10**9 + 1}),
        _sku(on_hand={"east": "5"}),
        _sku(on_hand=[5]),
        _sku(colour="red"),
        {"skus": [{"sku": "CHAIN"}]},  # no price
        {"skus": [{"sku": "a*b", "price_minor": 1}]},
        {"login_cap": -1},
        {"login_cap": 1.5},
    ],
    ids=repr,
)
async def test_a_refused_stock_create_leaves_nothing_and_the_corrected_retry_succeeds(
    api: Api, change: dict[str, Any]
) -> None:
    event_id = f"ev-{uuid.uuid4().hex[:8]}"
    r = await api.create({**good_stock(event_id), **change})
    assert (r.status_code, error_of(r)["code"]) == (400, "invalid_request"), r.text
    assert await api.event_keys(event_id) == []
    retry = await api.create(good_stock(event_id))
    assert retry.status_code == 201, retry.text
    assert (await api.store.read.availability(event_id)).seats_total == 5


@pytest.mark.parametrize(
    "change",
    [{"locations": ["east"]}, {"skus": []}, {"max_party": 0}, {"max_party": 7}],
    ids=repr,
)
async def test_stock_fields_on_a_seat_event_are_refused(api: Api, change: dict[str, Any]) -> None:
    event_id = f"ev-{uuid.uuid4().hex[:8]}"
    r = await api.create({**good_body(event_id), **change})
    assert (r.status_code, error_of(r)["code"]) == (400, "invalid_request"), r.text
    assert await api.event_keys(event_id) == []


async def test_a_stock_create_at_the_edges_of_its_limits_is_accepted(api: Api) -> None:
    event_id = f"ev-{uuid.uuid4().hex[:8]}"
    locations = [f"l{i}" for i in range(16)]
    body = {
        **good_stock(event_id),
        "locations": locations,
        "skus": [{"sku": "A", "price_minor": 10**12, "on_hand": {"l15": 10**9}}],
        "login_cap": 1_000_000,
    }
    r = await api.create(body)
    assert r.status_code == 201, r.text
    assert r.json() == {"event_id": event_id, "kind": "stock", "skus": 1, "units": 10**9}
    table = (await api.http.get(f"/v1/events/{event_id}/stock")).json()["skus"]
    assert [x["location"] for x in table[0]["locations"]] == sorted(locations)
    assert (table[0]["available"], table[0]["price_minor"]) == (10**9, 10**12)


async def test_an_events_party_and_login_caps_are_enforced(api: Api) -> None:
    event_id = f"ev-{uuid.uuid4().hex[:8]}"
    r = await api.create({**good_body(event_id, 6), "max_party": 2, "login_cap": 1})
    assert r.status_code == 201, r.text
    path, ann = f"/v1/events/{event_id}/holds", await api.login("ann")
    party = await api.http.post(path, json={"quantity": 3}, headers=ann)
    assert (party.status_code, error_of(party)["code"]) == (400, "party_too_large")
    assert error_of(party)["max_party"] == 2
    # The deployment has no cap here (ONSALE_LOGIN_CAP=0): the event's own one counts.
    capped = error_of(await api.http.post(path, json={"quantity": 2}, headers=ann))
    assert (capped["code"], capped["cap"]) == ("limit_exceeded", 1)
    assert (await api.http.post(path, json={}, headers=ann)).status_code == 201


# -- buyers ------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [b"[]", b'"x"', b"5", b"null", b"[{}]"])
async def test_a_charge_start_whose_body_is_not_an_object_is_refused_before_any_effect(
    api: Api, body: bytes
) -> None:
    sale = await open_sale(api.store, 1)
    await api.store.claim(sale.event_id, "ann", "h1")
    r = await api.http.post(
        f"/v1/events/{sale.event_id}/holds/h1/charges",
        content=body,
        headers={**await api.login("ann"), "Content-Type": "application/json"},
    )
    assert (r.status_code, error_of(r)["code"]) == (400, "invalid_request"), r.text
    assert not (await api.store.read.hold(sale.event_id, "h1")).charge_ids


@pytest.mark.parametrize("body", [b"", b"{}", b'{"note": "tab 2"}'])
async def test_a_charge_start_with_an_empty_body_or_an_object_is_accepted(
    api: Api, body: bytes
) -> None:
    sale = await open_sale(api.store, 1)
    await api.store.claim(sale.event_id, "ann", "h1")
    r = await api.http.post(
        f"/v1/events/{sale.event_id}/holds/h1/charges",
        content=body,
        headers={**await api.login("ann"), "Content-Type": "application/json"},
    )
    assert r.status_code == 202, r.text
    assert len((await api.store.read.hold(sale.event_id, "h1")).charge_ids) == 1


async def test_the_free_seats_of_an_unknown_event_are_a_404_like_its_availability(
    api: Api,
) -> None:
    seats = await api.http.get("/v1/events/no-such-event/seats")
    availability = await api.http.get("/v1/events/no-such-event")
    assert seats.status_code == availability.status_code == 404
    assert error_of(seats)["code"] == error_of(availability)["code"] == "event_not_found"
    sale = await open_sale(api.store, 1)
    await api.store.claim(sale.event_id, "ann", "h1")
    sold_out = await api.http.get(f"/v1/events/{sale.event_id}/seats")
    assert (sold_out.status_code, sold_out.json()) == (200, {"seats": []})


@pytest.mark.parametrize("limit", ["0", "501", "-1", "1.5", "²", "9" * 5000, ""])
async def test_a_free_seats_limit_out_of_range_is_a_400(api: Api, limit: str) -> None:
    sale = await open_sale(api.store, 1)
    r = await api.http.get(f"/v1/events/{sale.event_id}/seats", params={"limit": limit})
    assert (r.status_code, error_of(r)["code"]) == (400, "invalid_request"), r.text


async def test_a_claim_before_t0_is_told_when_the_sale_opens(api: Api) -> None:
    event_id = f"ev-{uuid.uuid4().hex[:8]}"
    opens_at = int(time.time() * 1000) + 3_600_000
    assert (await api.create({**good_body(event_id), "opens_at_ms": opens_at})).status_code == 201
    r = await api.http.post(f"/v1/events/{event_id}/holds", headers=await api.login("bo"))
    assert (r.status_code, error_of(r)["code"]) == (409, "sale_not_open")
    assert error_of(r)["opens_at_ms"] == opens_at
    draft = f"ev-{uuid.uuid4().hex[:8]}"
    body = {k: v for k, v in good_body(draft).items() if k != "opens_at_ms"}
    assert (await api.create(body)).status_code == 201
    r = await api.http.post(f"/v1/events/{draft}/holds", headers=await api.login("bo"))
    assert error_of(r)["code"] == "sale_not_open"
    assert error_of(r)["opens_at_ms"] is None  # a DRAFT: no opening time set yet


# -- release and abandon: a refusal names why ---------------------------------------------


async def quarantined(sale: Sale) -> None:
    """alice's h1 past its deadline with charge c1 in flight (T0 + 1000, quarantine 60 s)."""
    await sale.store.claim(sale.event_id, "alice", "h1")
    await sale.store.start_charge(sale.event_id, "h1", "alice", "c1", PRICE)
    await sale.at(T0 + 1_000)
    await sale.store.sweep(sale.event_id)


async def arrange(sale: Sale, state: HoldState) -> None:
    """alice's hold h1 in `state`, by the scripts (test clock)."""
    store, event_id = sale.store, sale.event_id
    if state == HoldState.QUARANTINED:
        await quarantined(sale)
        return
    await store.claim(event_id, "alice", "h1")
    if state == HoldState.EXPIRED:
        await sale.at(T0 + 1_000)
        await store.sweep(event_id)
    elif state == HoldState.RELEASED:
        await store.release(event_id, "h1", "alice")
    else:  # CONFIRMED, and what money leaving a sold seat makes of it
        await store.start_charge(event_id, "h1", "alice", "c1", PRICE)
        await callback(sale, "c1", "CAPTURED")
        if state in (HoldState.EXCEPTION, HoldState.REVOKED):
            await reversal(sale, "c1", "REFUND")
        if state == HoldState.REVOKED:
            await store.revoke_hold(event_id, "h1", "ops")
    assert (await store.read.hold(event_id, "h1")).state == state


@pytest.mark.parametrize(
    ("state", "code"),
    [
        (HoldState.CONFIRMED, "already_confirmed"),
        (HoldState.EXCEPTION, "already_confirmed"),
        (HoldState.EXPIRED, "hold_expired"),
        (HoldState.REVOKED, "hold_revoked"),
    ],
)
async def test_a_release_of_an_ended_hold_is_a_409_naming_why_and_changes_nothing(
    api: Api, state: HoldState, code: str
) -> None:
    sale = await open_sale(api.store, 2, hold_ttl_ms=1_000, now_ms=T0)
    await arrange(sale, state)
    outbox = len(await api.store.read.outbox(sale.event_id))
    r = await api.http.delete(
        f"/v1/events/{sale.event_id}/holds/h1", headers=await api.login("alice")
    )
    assert (r.status_code, error_of(r)["code"]) == (409, code), r.text
    assert error_of(r)["state"] == state
    assert (await api.store.read.hold(sale.event_id, "h1")).state == state
    assert len(await api.store.read.outbox(sale.event_id)) == outbox


async def test_a_repeated_release_stays_idempotent(api: Api) -> None:
    sale = await open_sale(api.store, 2, hold_ttl_ms=1_000, now_ms=T0)
    await api.store.claim(sale.event_id, "alice", "h1")
    auth = await api.login("alice")
    for _ in range(2):
        r = await api.http.delete(f"/v1/events/{sale.event_id}/holds/h1", headers=auth)
        assert (r.status_code, r.json()) == (200, {"hold_id": "h1", "state": "RELEASED"})


async def test_giving_up_a_quarantined_hold_is_accepted_and_says_it_waits_for_its_charge(
    api: Api,
) -> None:
    """The hold cannot end while its charge is in flight: it is given up (a late capture is
    refunded, the login may claim again) and ends when the charge resolves, which the answer
    says with 202 and the state the hold is still in."""
    sale = await open_sale(api.store, 2, hold_ttl_ms=1_000, quarantine_ms=60_000, now_ms=T0)
    await arrange(sale, HoldState.QUARANTINED)
    auth = await api.login("alice")
    for _ in range(2):  # a retry answers the same
        r = await api.http.delete(f"/v1/events/{sale.event_id}/holds/h1", headers=auth)
        assert r.status_code == 202, r.text
        assert r.json() == {
            "hold_id": "h1",
            "state": "QUARANTINED",
            "given_up": True,
            "quarantine_until_ms": T0 + 61_000,
        }
    assert (await api.store.read.hold(sale.event_id, "h1")).given_up
    again = await api.store.claim(sale.event_id, "alice", "h2")  # the login may buy again
    assert again.listing != (await api.store.read.hold(sale.event_id, "h1")).listing


async def capture_then(sale: Sale, outcome: str) -> None:
    await sale.store.claim(sale.event_id, "alice", "h1")
    await sale.store.start_charge(sale.event_id, "h1", "alice", "c1", PRICE)
    if outcome:
        await callback(sale, "c1", outcome)


@pytest.mark.parametrize(
    ("outcome", "status", "code", "charge_state"),
    [
        ("CAPTURED", 409, "charge_captured", ChargeState.CAPTURED),
        ("DECLINED", 409, "charge_not_in_flight", ChargeState.DECLINED),
        ("FAILED", 409, "charge_not_in_flight", ChargeState.FAILED),
        ("", 200, "", ChargeState.CHARGING),
    ],
)
async def test_an_abandon_of_a_charge_not_in_flight_is_a_409_naming_what_it_is(
    api: Api, outcome: str, status: int, code: str, charge_state: ChargeState
) -> None:
    sale = await open_sale(api.store, 2, now_ms=T0)
    await capture_then(sale, outcome)
    path = f"/v1/events/{sale.event_id}/holds/h1/charges/c1/abandon"
    auth = await api.login("alice")
    for _ in range(2):  # a retry answers the same
        r = await api.http.post(path, headers=auth)
        assert r.status_code == status, r.text
        if status == 200:
            assert r.json() == {"charge_id": "c1", "abandoned": True}
        else:
            assert (error_of(r)["code"], error_of(r)["charge_state"]) == (code, charge_state)
    assert (await api.store.read.charge(sale.event_id, "c1")).state == charge_state


# -- provider callbacks ---------------------------------------------------------------------


def capture_message(sale: Sale, charge_id: str, provider_event_id: str) -> dict[str, Any]:
    digest = charge_id.rsplit("~", 1)[-1]
    return {
        "id": provider_event_id,
        "type": "charge.captured",
        "data": {
            "attempt_id": f"att-{digest}",
            "intent_id": f"pi-{digest}",
            "idempotency_key": charge_id,
            "amount": PRICE,
            "currency": "EUR",
            "status": "captured",
            "metadata": {"event_id": sale.event_id, "charge_id": charge_id},
        },
    }


async def test_a_duplicate_callback_reports_the_current_state_beside_the_recorded_decision(
    api: Api,
) -> None:
    sale = await open_sale(api.store, 2, now_ms=T0)
    charge_id = keys.charge_key(sale.event_id, "h1", "alice", "k")
    await api.store.claim(sale.event_id, "alice", "h1")
    await api.store.start_charge(sale.event_id, "h1", "alice", charge_id, PRICE)
    message = capture_message(sale, charge_id, "pe-capture")
    first = (await api.callback(message)).json()
    assert first == {
        "decision": "CONFIRMED",
        "duplicate": False,
        "charge_state": "CAPTURED",
        "hold_state": "CONFIRMED",
        "recorded": {"charge_state": "CAPTURED", "hold_state": "CONFIRMED"},
        "problems": None,
    }
    await reversal(sale, charge_id, "REFUND")  # the provider refunds it from its dashboard
    again = await api.callback(message)
    assert again.status_code == 200, again.text
    assert again.json() == {
        "decision": "CONFIRMED",
        "duplicate": True,
        "charge_state": "PROVIDER_REFUNDED",
        "hold_state": "EXCEPTION",
        "recorded": {"charge_state": "CAPTURED", "hold_state": "CONFIRMED"},
        "problems": None,
    }


# -- messages name only what the client sent ------------------------------------------------

MINTED = re.compile(r"[0-9a-f]{24}")  # a server-minted hold id (32 hex) or charge key digest


async def test_refusals_never_quote_ids_the_client_did_not_send(api: Api) -> None:
    sale = await open_sale(api.store, 1)
    tab1, tab2 = await api.login("alice"), await api.login("alice")
    holds = f"/v1/events/{sale.event_id}/holds"
    hold_id = (await api.http.post(holds, headers=tab1)).json()["hold_id"]  # minted: no key sent
    charges = f"{holds}/{hold_id}/charges"
    assert (await api.http.post(charges, headers={**tab1, "Idempotency-Key": "k1"})).is_success
    refusals = [
        # tab 2 pays too: the charge in flight is tab 1's, minted by the server
        await api.http.post(charges, headers={**tab2, "Idempotency-Key": "k2"}),
        # a new claim by the same login while its charge is in flight (previous hold named?)
        await api.http.post(holds, headers=tab2),
        # sold out, for a claim whose hold id the server would mint
        await api.http.post(holds, headers=await api.login("bob")),
    ]
    assert [error_of(r)["code"] for r in refusals] == [
        "charge_in_flight",
        "charge_in_flight",
        "sold_out",
    ]
    for r in refusals:
        assert not MINTED.search(r.text.replace(error_of(r)["request_id"], "")), r.text


# -- a large seat map does not block the buyers ------------------------------------------------


@pytest.mark.slow
async def test_an_8_mib_seat_map_is_created_while_buyers_are_answered(
    api: Api, capsys: pytest.CaptureFixture[str]
) -> None:
    n_seats = 125_000
    event_id = f"big-{uuid.uuid4().hex[:8]}"
    seats = [
        {"seat_id": f"seat-{i:07d}", "rank": i, "section": f"section-{i % 40:03d}"}
        for i in range(n_seats)
    ]
    raw = orjson.dumps({**good_body(event_id), "seats": seats})
    assert 7 * 2**20 < len(raw) <= 8 * 2**20, len(raw)
    other = await open_sale(api.store, 1)
    # What parsing and checking this map costs when done on the event loop: the stall the
    # buyers saw before it moved to a thread (0.8 s here), measured first, as a yardstick.
    started = time.perf_counter()
    new_event(raw, "application/json")
    blocking_s = time.perf_counter() - started
    stall_s, answers = 0.0, []
    done = asyncio.Event()

    async def watch_the_loop() -> None:
        nonlocal stall_s
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            stall_s, last = max(stall_s, now - last), now

    async def buyer() -> None:
        while not done.is_set():
            r = await api.http.get(f"/v1/events/{other.event_id}")
            answers.append(r.status_code)

    # The watcher and the buyer run before the create starts: a handler that never yields
    # would otherwise run before them and its stall would go unseen.
    watcher, buying = asyncio.create_task(watch_the_loop()), asyncio.create_task(buyer())
    await asyncio.sleep(0.05)
    started = time.perf_counter()
    headers = {**api.admin, "Content-Type": "application/json"}
    r = await api.http.post("/v1/admin/events", content=raw, headers=headers)
    took_s = time.perf_counter() - started
    done.set()
    await asyncio.gather(watcher, buying)
    assert r.status_code == 201, r.text
    assert (await api.store.read.availability(event_id)).seats_total == n_seats
    with capsys.disabled():
        print(f"\n8 MiB seat map: created in {took_s:.2f} s; longest event-loop stall "
              f"{stall_s:.3f} s (parsing it on the loop: {blocking_s:.3f} s); "
              f"{len(answers)} buyer answers meanwhile")  # fmt: skip
    assert set(answers) == {200} and len(answers) >= 20
    # What remains is the JSON parser and the garbage collector, which hold the interpreter
    # lock in the worker thread too (about 0.1 s each here).
    assert stall_s < blocking_s / 2, (stall_s, blocking_s)


async def test_an_idempotency_key_sent_again_with_another_body_is_a_422_naming_the_first(
    api: Api,
) -> None:
    """Stripe's convention, which integrators know: the same key with the same body is a
    replay (200, the same hold); with another body it is a client bug, refused at once."""
    sale = await open_sale(api.store, 6)
    tab = {**await api.login("alice"), "Idempotency-Key": "order-1"}
    holds = f"/v1/events/{sale.event_id}/holds"
    first = await api.http.post(holds, headers=tab, json={"seat_ids": ["s00001", "s00002"]})
    assert first.status_code == 201, first.text
    same = await api.http.post(holds, headers=tab, json={"seat_ids": ["s00002", "s00001"]})
    assert (same.status_code, same.json()["hold_id"]) == (200, first.json()["hold_id"])
    for other in ({"seat_ids": ["s00003", "s00004", "s00005"]}, {"quantity": 3}, {}):
        r = await api.http.post(holds, headers=tab, json=other)
        assert (r.status_code, error_of(r)["code"]) == (422, "idempotency_key_reused"), r.text
        assert error_of(r)["first_request"]["seat_ids"] == ["s00001", "s00002"]
    # Nothing was claimed by the refused bodies.
    assert len(await api.store.read.free_seats(sale.event_id)) == 4
