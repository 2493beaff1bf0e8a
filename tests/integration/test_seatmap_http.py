"""The seat map over HTTP (ADR 0028), against the whole stack: the layout an admin's create
gives (places checked whole, served in rank order with an ETag), the map drawn from seats and
sections when there is none, the live states (versioned snapshot, 304, server-sent events)
following every kind of seat move, and what a thousand watching pages cost Redis, counted
with MONITOR: what one does."""

import asyncio
import csv
import io
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
import pytest
import redis

from engine.views.seatmap import EVENT_FIELDS, SEATMAP_SEATS_MAX, changes_between, encode_states
from tests.conftest import REDIS_URL
from tests.integration.conftest import Stack, claim, eventually, hold_state, pay

pytestmark = [pytest.mark.redis, pytest.mark.slow]

WATCHERS = 1_000


def places(n: int, **extra: Any) -> list[dict[str, Any]]:
    """n seats in two sections of rows of 4, each with its position and price level."""
    return [
        {"seat_id": f"s{i}", "rank": i, "section": "AB"[i * 2 // n], "row": str(i // 4 + 1),
         "x": (i % 4) * 30, "y": (i // 4) * 30, "price_level": "front" if i < 4 else "back",
         "number": str(i % 4 + 1), **extra}
        for i in range(n)
    ]  # fmt: skip


def create(stack: Stack, seats: list[dict[str, Any]], **options: Any) -> httpx.Response:
    body = {"event_id": f"map-{uuid.uuid4().hex[:8]}", "seats": seats, "opens_at_ms": 0,
            "price_minor": 4500, **options}  # fmt: skip
    with stack.client() as c:
        r = c.post("/v1/admin/events", json=body, headers=stack.admin_headers())
    r.event_id = body["event_id"]  # type: ignore[attr-defined]
    return r


def new_map(stack: Stack, seats: list[dict[str, Any]], **options: Any) -> str:
    r = create(stack, seats, **options)
    assert r.status_code == 201, r.text
    return str(r.event_id)  # type: ignore[attr-defined]


def get(stack: Stack, path: str, **headers: str) -> httpx.Response:
    with stack.client() as c:
        return c.get(path, headers=headers)


def states(stack: Stack, event_id: str) -> str:
    return str(get(stack, f"/v1/events/{event_id}/seatmap/state").json()["states"])


@pytest.fixture(autouse=True)
def honest_provider(stack: Stack) -> Iterator[None]:
    stack.sim_config(decline_rate=0.0, fail_rate=0.0, late_rate=0.0, loss_rate=0.0)
    yield
    stack.sim_config(late_rate=0.0)


def test_the_layout_comes_in_rank_order_with_its_places_and_an_etag(stack: Stack) -> None:
    seats = places(8)
    event_id = new_map(stack, seats[::-1])  # sent in reverse: served by rank
    r = get(stack, f"/v1/events/{event_id}/seatmap")
    assert r.status_code == 200
    body = r.json()
    assert body["positioned"] is True
    assert body["columns"] == ["seat_id", "section", "row", "x", "y", "price_level", "number"]
    assert body["seats"][:2] == [["s0", "A", "1", 0, 0, "front", "1"],
                                 ["s1", "A", "1", 30, 0, "front", "2"]]  # fmt: skip
    assert [s[0] for s in body["seats"]] == [f"s{i}" for i in range(8)]
    assert body["seats"][7] == ["s7", "B", "2", 90, 30, "back", "4"]
    assert r.headers["cache-control"] == "public, max-age=60"
    again = get(stack, f"/v1/events/{event_id}/seatmap", **{"If-None-Match": r.headers["etag"]})
    assert (again.status_code, again.content) == (304, b"")
    other = get(stack, f"/v1/events/{event_id}/seatmap", **{"If-None-Match": '"stale"'})
    assert other.status_code == 200


def test_a_map_without_places_is_drawn_from_its_seats_and_sections(stack: Stack) -> None:
    event_id = new_map(stack, [{"seat_id": f"s{i}", "rank": 10 - i, "section": "AB"[i % 2]}
                               for i in range(4)])  # fmt: skip
    expected = [[f"s{i}", "AB"[i % 2], "", None, None, "", ""] for i in (3, 2, 1, 0)]
    stored = get(stack, f"/v1/events/{event_id}/seatmap").json()
    assert (stored["positioned"], stored["seats"]) == (False, expected)
    # An event rebuilt from the ledger has no stored layout: its seats and sections draw it.
    rebuilt = new_map(stack, [{"seat_id": f"s{i}", "rank": 10 - i, "section": "AB"[i % 2]}
                              for i in range(4)])  # fmt: skip
    client = redis.Redis.from_url(REDIS_URL)
    assert client.delete(f"{stack.prefix}:{{{rebuilt}}}:seatmap") == 1
    client.close()
    drawn = get(stack, f"/v1/events/{rebuilt}/seatmap").json()
    assert (drawn["positioned"], drawn["seats"]) == (False, expected)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"x": 5}, "give x and y together"),
        ({"x": 5, "y": 100_001}, "y of s0 must be a number in [-100000, 100000]"),
        ({"x": 5, "y": True}, "y of s0 must be a number"),
        ({"row": "r" * 17}, "row must be a printable string of 1 to 16 characters"),
        ({"row": ""}, "row must be a printable string"),
        ({"price_level": "a\nb"}, "price_level must be a printable string of 1 to 32"),
        ({"x": 1, "y": 1, "place": 3}, "unknown field 'place'"),
    ],
)
def test_places_are_checked_whole_and_a_refused_create_writes_nothing(
    stack: Stack, change: dict[str, Any], says: str
) -> None:
    seats = [{"seat_id": "s0", "rank": 0, **change}, {"seat_id": "s1", "rank": 1}]
    if "x" in change and "y" in change and "place" not in change:
        seats[1] |= {"x": 0, "y": 0}
    r = create(stack, seats)
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request")
    assert says in r.json()["error"]["message"]
    gone = get(stack, f"/v1/events/{r.event_id}/seatmap")  # type: ignore[attr-defined]
    assert gone.json()["error"]["code"] == "event_not_found"


def test_positions_go_on_every_seat_or_on_none(stack: Stack) -> None:
    r = create(stack, [{"seat_id": "s0", "x": 1, "y": 1}, {"seat_id": "s1"}])
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "give x and y to every seat or to none"


def test_a_venue_too_large_to_draw_takes_no_places_and_answers_409(stack: Stack) -> None:
    n = SEATMAP_SEATS_MAX + 1
    big = [{"seat_id": f"s{i}", "rank": i} for i in range(n)]
    r = create(stack, [{**big[0], "row": "1"}, *big[1:]])
    assert r.status_code == 400 and "at most 20000 seats" in r.json()["error"]["message"]
    event_id = new_map(stack, big)
    for path in ("seatmap", "seatmap/state", "seatmap/stream"):
        answer = get(stack, f"/v1/events/{event_id}/{path}", Accept="text/event-stream")
        assert (answer.status_code, answer.json()["error"]["code"]) == (409, "seat_map_too_large")


def test_a_stock_event_and_an_unknown_one_have_no_seat_map(stack: Stack) -> None:
    body = {"event_id": f"parts-{uuid.uuid4().hex[:6]}", "kind": "stock", "locations": ["east"],
            "skus": [{"sku": "chain", "price_minor": 100, "on_hand": {"east": 3}}]}  # fmt: skip
    r = httpx.post(f"{stack.api}/v1/admin/events", json=body, headers=stack.admin_headers())
    assert r.status_code == 201, r.text
    stock = get(stack, f"/v1/events/{body['event_id']}/seatmap/state")
    assert (stock.status_code, stock.json()["error"]["code"]) == (400, "wrong_event_kind")
    unknown = get(stack, "/v1/events/no-such-event/seatmap/stream", Accept="text/event-stream")
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "event_not_found")
    # A client that did not ask for a stream by name is not left hanging on one.
    plain = get(stack, f"/v1/events/{body['event_id']}/seatmap/stream", Accept="*/*")
    assert (plain.status_code, plain.json()["error"]["code"]) == (406, "not_acceptable")


def test_the_states_follow_every_seat_move_each_under_a_new_version(stack: Stack) -> None:
    event_id = new_map(stack, places(4))
    path = f"/v1/events/{event_id}/seatmap/state"
    seen: list[str] = []

    def now_reads(expected: str) -> dict[str, Any]:
        body: dict[str, Any] = eventually(
            lambda: (b := get(stack, path).json())["states"] == expected and b
        )
        assert body["version"] not in seen  # every seat move is a new version
        seen.append(body["version"])
        return body

    first = now_reads("FFFF")
    assert (first["status"], first["free"], first["price_minor"]) == ("open", 4, 4500)
    assert abs(first["server_time_ms"] - time.time() * 1000) < 5_000
    unchanged = get(stack, path, **{"If-None-Match": f'"{first["version"]}"'})
    assert unchanged.status_code == 304
    ann = stack.buyer(event_id, "ann")
    first_hold = claim(stack, ann, "s1")["hold_id"]
    assert now_reads("FHFF")["held"] == 1
    # The same login claims again: s1 is released and s2 held in one step, the counters equal.
    second_hold = claim(stack, ann, "s2")["hold_id"]
    assert now_reads("FFHF")["held"] == 1
    pay(stack, ann, second_hold)
    assert now_reads("FFSF")["sold"] == 1
    # A release with the payment in flight leaves the seat BLOCKED until the charge resolves.
    stack.sim_config(late_rate=1.0, late_delay_ms=1500)
    ben = stack.buyer(event_id, "ben")
    hold = claim(stack, ben, "s3")["hold_id"]
    now_reads("FFSH")
    pay(stack, ben, hold)
    assert stack.send(ben.release(hold)).status == 200
    assert now_reads("FFSB")["blocked"] == 1
    assert now_reads("FFSF")["free"] == 3  # captured, refunded: the seat is free again
    assert hold_state(stack, ann, first_hold)["reason"] == "replaced_by_new_claim"


# -- server-sent events, read from raw connections (a thousand of them below) ----------------


class Watcher:
    """One page's stream: the last whole state it holds after applying what it was sent."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.states = ""
        self.serial = 0
        self.kinds: list[str] = []
        self.buffer = b""

    @classmethod
    async def open(cls, api: str, event_id: str) -> "Watcher":
        url = urlsplit(api)
        reader, writer = await asyncio.open_connection(url.hostname, url.port)
        writer.write(f"GET /v1/events/{event_id}/seatmap/stream HTTP/1.1\r\nHost: api\r\n"
                     "Accept: text/event-stream\r\n\r\n".encode())  # fmt: skip
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        assert b"transfer-encoding: chunked" in head.lower()
        return cls(reader, writer)

    async def next(self) -> tuple[str, dict[str, Any]]:
        """The next message (de-chunked), applied to `states`."""
        while b"\n\n" not in self.buffer:
            size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
            self.buffer += (await self.reader.readexactly(size + 2))[:-2]
        message, self.buffer = self.buffer.split(b"\n\n", 1)
        fields = dict(line.split(": ", 1) for line in message.decode().splitlines())
        if "event" not in fields:
            return await self.next()  # the retry hint
        data: dict[str, Any] = orjson.loads(fields["data"])
        self.kinds.append(fields["event"])
        if fields["event"] == "seats":
            self.states, self.serial = data["states"], data["serial"]
        elif fields["event"] == "change":
            assert data["base"] == self.serial, "a change that does not follow what was sent"
            chars = list(self.states)
            for i, state in data["changes"]:
                chars[i] = state
            self.states, self.serial = "".join(chars), data["serial"]
        return fields["event"], data

    async def until(self, expected: str, timeout_s: float = 10.0) -> None:
        async with asyncio.timeout(timeout_s):
            while self.states != expected:
                await self.next()

    def close(self) -> None:
        self.writer.close()


async def poll(api: str, event_id: str, etag: str) -> int:
    """One page's conditional GET of the seat states, on a connection of its own: the status."""
    url = urlsplit(api)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    writer.write(f"GET /v1/events/{event_id}/seatmap/state HTTP/1.1\r\nHost: api\r\n"
                 f"If-None-Match: {etag}\r\nConnection: close\r\n\r\n".encode())  # fmt: skip
    head = await reader.readuntil(b"\r\n\r\n")
    writer.close()
    return int(head.split(b" ", 2)[1])


async def test_a_stream_sends_the_seats_then_what_changed(stack: Stack) -> None:
    event_id = new_map(stack, places(6))
    page = await Watcher.open(stack.api, event_id)
    kind, first = await page.next()
    assert (kind, first["states"], first["free"]) == ("seats", "FFFFFF", 6)
    await asyncio.to_thread(claim, stack, stack.buyer(event_id, "cy"), "s4")
    kind, change = await page.next()
    while kind == "clock":
        kind, change = await page.next()
    assert (kind, change["changes"], change["held"]) == ("change", [[4, "H"]], 1)
    assert page.states == "FFFFHF"
    page.close()


class RedisReads:
    """Counts, with MONITOR, the commands the seat boards send about one event: the version
    (HMGET of the event hash, the board's own field list) and the seats (HGETALL owners)."""

    def __init__(self, prefix: str, event_id: str) -> None:
        tag = f"{prefix}:{{{event_id}}}"
        self.version = f"HMGET {tag}:event {' '.join(EVENT_FIELDS)}"
        self.seats = f"HGETALL {tag}:owners"
        self.counts = {"version": 0, "seats": 0}
        self.began = time.monotonic()
        self.counting = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        client = redis.Redis.from_url(REDIS_URL, socket_timeout=0.3)
        with client.monitor() as m:
            while not self.stop.is_set():
                try:
                    command = str(m.next_command()["command"])
                except redis.TimeoutError:
                    continue
                if self.counting.is_set():
                    self.counts["version"] += command == self.version
                    self.counts["seats"] += command == self.seats
        client.close()

    def begin(self) -> None:
        self.counts = {"version": 0, "seats": 0}
        self.began = time.monotonic()
        self.counting.set()

    def end(self) -> dict[str, int]:
        """The counts since begin(), and how long that was (ms, as `window_ms`)."""
        self.counting.clear()
        return {**self.counts, "window_ms": int((time.monotonic() - self.began) * 1000)}


def changes(stack: Stack, event_id: str, names: list[str], first: int) -> Any:
    """Claims of seats s<first>, s<first + 1>, ... by `names`, a third of a second apart (in a
    thread)."""

    def run() -> None:
        for i, name in enumerate(names, start=first):
            claim(stack, stack.buyer(event_id, name), f"s{i}")
            time.sleep(0.33)

    return lambda: threading.Thread(target=run, daemon=True).start()


async def test_a_thousand_watching_pages_cost_redis_what_one_does(stack: Stack) -> None:
    event_id = new_map(stack, places(8))
    counter = RedisReads(stack.prefix, event_id)
    counter.thread.start()
    await asyncio.sleep(0.5)  # MONITOR is on
    one = await Watcher.open(stack.api, event_id)
    await one.until("F" * 8)
    counter.begin()
    changes(stack, event_id, ["a", "b", "c"], 0)()
    await asyncio.sleep(3.0)
    alone = counter.end()
    await one.until("HHH" + "F" * 5)

    started = time.monotonic()
    crowd = await asyncio.gather(*(Watcher.open(stack.api, event_id) for _ in range(WATCHERS)))
    await asyncio.gather(*(w.until("HHH" + "F" * 5) for w in crowd))
    opened_s = time.monotonic() - started
    version = get(stack, f"/v1/events/{event_id}/seatmap/state").headers["etag"]
    counter.begin()  # the same 3 s, with a thousand more pages watching, and a thousand polling
    started = time.monotonic()
    polled = await asyncio.gather(*(poll(stack.api, event_id, version) for _ in range(WATCHERS)))
    polled_s = time.monotonic() - started
    changes(stack, event_id, ["d", "e", "f", "g"], 3)()
    await asyncio.sleep(3.0 - polled_s)
    crowded = counter.end()
    expected = "H" * 7 + "F"
    await asyncio.gather(*(w.until(expected) for w in [one, *crowd]))
    counter.stop.set()
    for w in [one, *crowd]:
        w.close()

    print(f"\n1 watcher: {alone}; {WATCHERS} more watchers and {WATCHERS} pollers: {crowded} "
          f"(connected and told in {opened_s:.1f} s, polled in {polled_s:.1f} s)")  # fmt: skip
    assert set(polled) == {304}  # the pollers cost no read either
    assert 4 <= alone["version"] <= 20 and 1 <= alone["seats"] <= 8  # every 0.25 s, per change
    # The board reads the version at most once per refresh (0.25 s), whoever watches, and once
    # more with the seats of each change (4 here), give or take one read at each end of the
    # window: a bound from the window's own length, not from the other window's count (a busy
    # machine reads less often, never more).
    assert crowded["version"] <= crowded["window_ms"] / 250 + 4 + 2
    assert crowded["seats"] <= alone["seats"] + 3


def test_states_and_changes_are_computed_from_the_owners() -> None:
    owners = {"s1": "H:h1", "s2": "B:h2", "s3": "S:h3"}
    assert encode_states(("s0", "s1", "s2", "s3"), owners) == "FHBS"
    assert changes_between("FHBS", "FFBH") == [(1, "F"), (3, "H")]


def test_an_operators_orders_name_their_seats_as_printed(stack: Stack) -> None:
    """The admin orders and the CSV say where each order sits, as the pages do."""
    event_id = new_map(stack, places(8))
    buyer = stack.buyer(event_id, "named-a")
    h = claim(stack, buyer, party=2)  # the best block: s0, s1 (section A, row 1, seats 1, 2)
    pay(stack, buyer, h["hold_id"])
    eventually(lambda: hold_state(stack, buyer, h["hold_id"])["state"] == "CONFIRMED")
    with stack.client() as c:
        orders = c.get(f"/v1/admin/events/{event_id}/orders", headers=stack.admin_headers())
        csv_text = c.get(f"/v1/admin/events/{event_id}/orders.csv", headers=stack.admin_headers())
    (order,) = orders.json()["orders"]
    assert order["seats_named"] == "Section A, row 1, seats 1, 2"
    (row,) = list(csv.DictReader(io.StringIO(csv_text.text)))
    assert row["seats_named"] == "Section A, row 1, seats 1, 2"
