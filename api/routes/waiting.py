"""The waiting room's routes (engine/waiting/room.py, ADR 0029): a buyer joins an event's queue
and looks at its place; an operator sets the room up before T0 and reads its figures. The claim
route calls `spend_admission` unless the event is known to have no room (api/routes/checkout.py):
an event without one costs the claim nothing but a dictionary lookup."""

import random
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from api.context import admin_post, ctx, endpoint, path_id
from api.contract import waiting as room
from api.contract.atoms import fields_of
from api.contract.waiting import ADMISSION_HEADER
from api.responses import json_response, read_json
from api.validate import LIMITS, obj, only, query_integer, whole
from engine.waiting.errors import AdmissionRequired, NotInQueue
from engine.waiting.room import (
    ADMISSION_TTL_MS,
    FACTOR_PCT,
    Place,
    QueueState,
    RoomSettings,
    WaitingRoom,
)
from engine.waiting.tokens import Admission, admitted_ms_of

ROOM_FIELDS = fields_of(room.WaitingRoomSettings)
NONE = fields_of(room.QueueJoinRequest)  # a join sends nothing
# When a waiting client is told to look again. Before T0: at T0, in its draw's order over a
# spread that brings about POLLS_PER_S first looks a second (the front of the line first, so the
# first admissions are learnt at once). After: the nearer the front, the sooner (POLL_MS_PER_PLACE
# per place ahead, 1 to 20 s): 10,000 waiting look about 1,100 times a second in all, a tenth of
# the claim endpoint's measured rate; sooner when the estimate is shorter. An admitted client with
# no unit free looks again within a second or so.
POLLS_PER_S = 1_000
POLL_MS_PER_PLACE = 5
POLL_SPREAD_MS_MIN, POLL_SPREAD_MS_MAX = 50, 10_000
POLL_MS_MIN, POLL_MS_WAITING, POLL_MS_MAX = 250, 1_000, 20_000


def rooms(request: Request) -> WaitingRoom:
    """This process's view of the events' rooms (made on first use, beside the store)."""
    state = request.app.state
    found: WaitingRoom | None = getattr(state, "waiting_rooms", None)
    if found is None:
        found = state.waiting_rooms = WaitingRoom(ctx(request).store)
    return found


def may_need_admission(request: Request, event_id: str) -> bool:
    """False once the event is known to have no room: then the claim goes straight on."""
    return not rooms(request).skips(event_id)


async def spend_admission(request: Request, event_id: str, login: str, hold_id: str) -> None:
    """An event with a room takes a claim only with the login's live admission, spent here on
    this claim's hold id (the same claim sent again goes through while the admission lives)."""
    waiting = rooms(request)
    room = await waiting.room(event_id)
    if room is None:
        return
    token = request.headers.get(ADMISSION_HEADER)
    if token is None:
        raise AdmissionRequired(f"claim on {event_id} without an admission")
    admitted_ms = admitted_ms_of(room.secret, event_id, login, token)
    await waiting.spend(event_id, login, hold_id, admitted_ms)


def estimate_s(place: Place) -> float | None:
    """Seconds until this place is admitted at the rate admissions are being made now; None
    when none are (before T0, or no unit free: only a unit coming back admits anyone)."""
    if place.state != QueueState.WAITING or not place.drawn or place.free == 0:
        return None
    if place.rate_per_s < 0.01:
        return None
    return round(place.position / place.rate_per_s, 1)


def first_look_spread_ms(place: Place, to_t0_ms: int) -> int:
    """Over how long after T0 the first looks are spread: the places to be drawn at T0 over
    POLLS_PER_S, the count extrapolated from the joins so far at the rate they came."""
    joining_ms = max(1, place.now_ms - place.first_join_ms)
    expected = place.joined_before_t0 * (1 + to_t0_ms / joining_ms)
    return int(min(POLL_SPREAD_MS_MAX, max(POLL_SPREAD_MS_MIN, expected * 1000 / POLLS_PER_S)))


def poll_after_ms(place: Place) -> int | None:
    """When to look again (a hint: looking more often moves no place)."""
    if place.state == QueueState.ADMITTED and place.free == 0:  # a unit may come back
        return int(POLL_MS_WAITING * random.uniform(1.0, 1.25))
    if place.state != QueueState.WAITING:
        return None
    if not place.drawn:
        to_t0_ms = max(0, place.opens_at_ms - place.now_ms)
        return to_t0_ms + int(place.draw_share * first_look_spread_ms(place, to_t0_ms))
    wait = min(POLL_MS_MAX, max(POLL_MS_WAITING, place.position * POLL_MS_PER_PLACE))
    eta = estimate_s(place)
    if eta is not None:  # admissions are being made: look again about halfway there
        wait = min(wait, max(POLL_MS_MIN, int(eta * 500)))
    return int(wait * random.uniform(1.0, 1.25))


def place_view(event_id: str, place: Place, admission: Admission | None) -> room.QueuePlace:
    """A place the login has (a join gives one; a look without one is refused before)."""
    if place.state is None:
        raise NotInQueue(f"no place in {event_id}'s room")
    waiting = place.state == QueueState.WAITING
    return {
        "event_id": event_id,
        "state": place.state,
        "position": place.position if waiting and place.drawn else None,
        "drawn": place.drawn,
        "entries": place.entries,
        "joined_before_t0": place.joined_before_t0,
        "admitted": place.admitted,
        "admission_rate_per_s": place.rate_per_s,
        "estimate_s": estimate_s(place),
        "free": place.free,
        "held": place.held,
        "blocked": place.blocked,
        "opens_at_ms": place.opens_at_ms,
        "server_time_ms": place.now_ms,
        "admission": None
        if admission is None
        else {
            "header": ADMISSION_HEADER,
            "token": admission.token,
            "expires_ms": admission.expires_ms,
        },
        "poll_after_ms": poll_after_ms(place),
    }


@endpoint("queue_join")
async def join(request: Request) -> Response:
    """Take a place in the event's queue, or keep the one this login has (201: a new place)."""
    c = ctx(request)
    c.addresses.take(request)
    event_id = path_id(request, "event_id")
    login = c.login_of(request, event_id)
    only(obj(await read_json(request, c.settings.body_max_bytes, allow_empty=True)), NONE, "queue")
    waiting = rooms(request)
    place = await waiting.join(event_id, login)
    view = place_view(event_id, place, waiting.admission(event_id, login, place))
    return json_response(view, 201 if place.created else 200)


@endpoint("queue_me")
async def me(request: Request) -> Response:
    """The login's place now, the figures behind it, and its admission once admitted."""
    c = ctx(request)
    event_id = path_id(request, "event_id")
    login = c.login_of(request, event_id)
    waiting = rooms(request)
    place = await waiting.look(event_id, login)
    return json_response(place_view(event_id, place, waiting.admission(event_id, login, place)))


@endpoint("admin_set_waiting_room")
async def configure(request: Request) -> Response:
    """Give the event a room, or change its settings, until T0 (201: a new room)."""
    _c, _admin, event_id, body = await admin_post(request, ROOM_FIELDS, "waiting_room", empty=True)
    settings = RoomSettings(
        admit_per_s=None if body.get("admit_per_s") is None else whole(body, "admit_per_s"),
        admit_factor_pct=whole(body, "admit_factor_pct", FACTOR_PCT),
        admission_ttl_ms=whole(body, "admission_ttl_ms", ADMISSION_TTL_MS),
    )
    waiting = rooms(request)
    created = await waiting.configure(event_id, settings)
    figures = await waiting.figures(event_id)
    return json_response(room_view(event_id, figures), 201 if created else 200)


@endpoint("admin_waiting_room")
async def figures(request: Request) -> Response:
    c = ctx(request)
    c.require_admin(request)
    event_id = path_id(request, "event_id")
    return json_response(room_view(event_id, await rooms(request).figures(event_id)))


def room_view(event_id: str, f: dict[str, Any]) -> room.WaitingRoom:
    """The room's settings and counters as the engine reads them (engine/waiting/room.py)."""
    return {
        "event_id": event_id, "admit_per_s": f["admit_per_s"], "auto": f["auto"],
        "admit_factor_pct": f["admit_factor_pct"], "admission_ttl_ms": f["admission_ttl_ms"],
        "drawn": f["drawn"], "entries": f["entries"], "joined_before_t0": f["joined_before_t0"],
        "admitted": f["admitted"], "used": f["used"], "lapsed": f["lapsed"],
        "outstanding": f["outstanding"], "admission_rate_per_s": f["admission_rate_per_s"],
        "server_time_ms": f["server_time_ms"],
    }  # fmt: skip


@endpoint("queue_draw")
async def published_draw(request: Request) -> Response:
    """The room's draw as anyone may check it (ADR 0040): its commitment before T0; from T0 on
    its seed and, a page at a time in place order, the anonymous entries drawn before T0. No
    login: the list names no one (an entry is a hash a buyer can compute of their own login)."""
    event_id = path_id(request, "event_id")
    offset = query_integer(request.query_params, "offset", 0)
    limit = query_integer(request.query_params, "limit", int(LIMITS["limit"].high))
    d = await rooms(request).published_draw(event_id, offset, limit)
    answer: room.QueueDraw = {
        "event_id": event_id,
        "commitment": d.commitment,
        "seed": d.seed,
        "entries": [{"entry": a.entry, "seq": a.seq} for a in d.arrivals],
        "next_offset": d.next_offset,
    }
    return json_response(answer)


ROUTES = [
    Route("/v1/events/{event_id}/queue/draw", published_draw, methods=["GET"]),
    Route("/v1/events/{event_id}/queue", join, methods=["POST"]),
    Route("/v1/events/{event_id}/queue/me", me, methods=["GET"]),
    Route("/v1/admin/events/{event_id}/waiting-room", configure, methods=["PUT"]),
    Route("/v1/admin/events/{event_id}/waiting-room", figures, methods=["GET"]),
]
