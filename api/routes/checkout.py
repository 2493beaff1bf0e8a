"""Buyer endpoints: availability, claim, hold status, release, charge, abandon.

The claim is the hot path: token check (CPU only), one FCALL, no PostgreSQL. A claim of
stock lines (ADR 0022) is answered with its amount from the same script call."""

import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from api.claim_front.ticket import take_place
from api.context import ctx, endpoint, path_id
from api.contract import catalogue
from api.contract import holds as answers
from api.durable import sale_durable
from api.errors import ApiError
from api.responses import json_response, read_json
from api.routes import waiting
from api.routes.events import details_view
from api.routes.hold_views import goods_view, hold_view
from api.routes.seatmap import board_of
from api.routes.stock import LINES_MAX, cart_of, lines_view
from api.validate import (
    LIMITS,
    access_code,
    idempotency_key,
    ident,
    integer,
    obj,
    query_integer,
)
from engine.config.settings import StripeSettings
from engine.model import errors, keys
from engine.model.holds import Claimed, Hold
from engine.model.states import HoldState
from engine.model.stock_lines import StockLine, lines_of
from engine.providers import ProviderRefused, ProviderTimeout
from engine.store.prices import seat_prices


@endpoint("availability")
async def availability(request: Request) -> Response:
    c = ctx(request)
    event_id = path_id(request, "event_id")
    a = await c.store.read.availability(event_id)
    room = await waiting.rooms(request).room(event_id)
    answer: catalogue.EventAvailability = {
        "event_id": event_id,
        "status": a.status,
        "opens_at_ms": a.opens_at_ms,
        "seats_total": a.seats_total,
        "free": a.free,
        "held": a.held,
        "blocked": a.blocked,
        "sold": a.sold,
        "price_minor": a.price_minor,
        "hold_ttl_ms": a.config.hold_ttl_ms,
        "waiting_room": room is not None,  # ADR 0029: claims then need an admission
        **details_view(a.details),  # name, venue, ... (ADR 0041)
        # the clock that decides T0 and every deadline (the pages' clock: no read per call)
        "server_time_ms": await board_of(request).server_time_ms(),
    }
    return json_response(answer)


@endpoint("free_seats")
async def free_seats(request: Request) -> Response:
    c = ctx(request)
    event_id = path_id(request, "event_id")
    limit = query_integer(request.query_params, "limit", 50)
    seats = await c.store.read.free_seats(event_id, limit)
    if not seats:  # sold out, or no such event: availability tells (404 event_not_found)
        await c.store.read.availability(event_id)
    answer: catalogue.FreeSeats = {"seats": seats}
    return json_response(answer)


PARTY_MAX = int(LIMITS["quantity"].high)  # seats one claim may ask for


@dataclass(frozen=True, slots=True)
class Wanted:
    """What a claim asks for: these seats (all or nothing), or `quantity` best seats (adjacent
    when a block is free; the best single seats otherwise), or stock `lines` (all or nothing)."""

    seat_ids: tuple[str, ...] = ()
    quantity: int = 1
    lines: tuple[StockLine, ...] = ()
    access_code: str = ""  # spent before T0, in a presale window (ADR 0049)

    def answered_by(self, claimed: Claimed) -> bool:
        """Whether a hold found by this claim's Idempotency-Key is what this body asks for:
        the same seats, the same number of best seats, the same lines (a line's location as
        asked, or any when it named none)."""
        if self.lines:
            held = sorted((x.sku, x.quantity, x.location) for x in lines_of(claimed.listing))
            asked = sorted((x.sku, x.quantity, x.location) for x in self.lines)
            return len(held) == len(asked) and all(
                h[:2] == a[:2] and a[2] in ("", h[2]) for h, a in zip(held, asked, strict=True)
            )
        if claimed.is_stock:
            return False
        if self.seat_ids:
            return set(claimed.seat_ids) == set(self.seat_ids)
        return len(claimed.seat_ids) == self.quantity


ASKED = ("seat_id", "seat_ids", "quantity", "lines")


def wanted_of(body: dict[str, Any], party_max: int, lines_max: int = 0) -> Wanted:
    """`seat_id`, `seat_ids` (1 to party_max distinct seats), `quantity` (1 to party_max, at
    most LIMITS["quantity"]) or `lines` (1 to lines_max stock lines; 0: refused); at most one of
    them; none: the best seat. Which kind the event sells is the claim script's to check
    (`wrong_event_kind`): nothing is read here."""
    code = access_code(body)
    wanted = _goods_of(body, party_max, lines_max)
    return replace(wanted, access_code=code) if code else wanted


def _goods_of(body: dict[str, Any], party_max: int, lines_max: int) -> Wanted:
    asked = [name for name in ASKED if body.get(name) is not None]
    if len(asked) > 1:
        raise ApiError(400, "invalid_request", "send one of seat_id, seat_ids, quantity, lines")
    if "lines" in asked:
        return Wanted(lines=cart_of(body["lines"], lines_max))
    if "seat_ids" in asked:
        seats = body["seat_ids"]
        if not isinstance(seats, list) or not 1 <= len(seats) <= party_max:
            raise ApiError(400, "invalid_request", f"seat_ids must list 1 to {party_max} seats")
        if len(set(map(str, seats))) != len(seats):
            raise ApiError(400, "invalid_request", "seat_ids must not repeat a seat")
        return Wanted(tuple(ident({"seat": s}, "seat") or "" for s in seats), len(seats))
    if "quantity" in asked:
        return Wanted((), integer(body, "quantity", low=1, high=party_max))
    seat_id = ident(body, "seat_id", required=False)
    return Wanted((seat_id,) if seat_id else ())


async def claim_input(
    request: Request, body_max_bytes: int, login: str, party_max: int, lines_max: int = 0
) -> tuple[str, Wanted, str]:
    """The claim's event id, what it asks for, and its hold id. Shared with the PostgreSQL
    baseline, which answers the same requests (one seat each: party_max 1, no stock lines).

    The hold id is derived from the login and its Idempotency-Key (or is fresh without one): a
    retry by the same login finds its hold, and another login's use of the same key is a
    different hold, so nothing tells a caller whether someone else used a key."""
    event_id = path_id(request, "event_id")
    body = obj(await read_json(request, body_max_bytes, allow_empty=True))
    wanted = wanted_of(body, party_max, lines_max)
    key = idempotency_key(request.headers.get("idempotency-key"), "")
    hold_id = keys.hold_key(event_id, login, key) if key else os.urandom(16).hex()
    return event_id, wanted, hold_id


def claimed_response(claimed: Claimed, prices: Sequence[int] = ()) -> Response:
    """The claim's answer: what the hold owns (a cart's lines and amount; seats, with `prices`
    each seat's and their sum, as the charge will ask: ADR 0038). Built in one literal, not
    through goods_view: this is the hot path (1.5 µs a claim less)."""
    stock = claimed.is_stock
    seats = () if stock else claimed.seat_ids
    body: answers.Claimed = {
        "hold_id": claimed.hold_id,
        # the first (or only) seat; None: a cart
        "seat_id": None if stock else seats[0] if seats else claimed.listing,
        "seat_ids": list(seats),
        "expires_ms": claimed.expires_ms,
        "state": claimed.state,
        # Two tabs: the login's previous hold, released by this claim (None if there was
        # none); the other tab reads it RELEASED with reason replaced_by_new_claim.
        "replaced_hold_id": claimed.replaced or None,
    }
    if stock:
        body["lines"] = lines_view(claimed.listing)
        body["amount"] = claimed.amount
    elif prices:
        body["seat_prices"] = dict(zip(seats, prices, strict=True))
        body["amount"] = sum(prices)
    return json_response(body, 200 if claimed.replay else 201)


@endpoint("claim")
async def claim(request: Request) -> Response:
    c = ctx(request)
    login_name = c.login_of(request, request.path_params["event_id"])
    event_id, wanted, hold_id = await claim_input(
        request, c.settings.body_max_bytes, login_name, PARTY_MAX, LINES_MAX
    )
    if waiting.may_need_admission(request, event_id):  # no Redis call once known (ADR 0029)
        await waiting.spend_admission(request, event_id, login_name, hold_id)
    try:
        claimed = await c.claims.claim(
            event_id,
            login_name,
            hold_id,
            seats=wanted.seat_ids,
            quantity=wanted.quantity,
            lines=wanted.lines,
            access_code=wanted.access_code,
            admitted=take_place(request.scope),  # its place, taken by the claim front
        )
    except Exception as exc:
        c.metrics.claimed(getattr(exc, "code", "error"))
        raise
    if claimed.replay and not wanted.answered_by(claimed):
        # Stripe's convention: a key sent again with another body is a client bug, said at once.
        c.metrics.claimed(errors.IdempotencyKeyReused.code)
        raise errors.IdempotencyKeyReused(
            f"the key made hold {claimed.hold_id} ({claimed.listing}) with another body",
            first_request=goods_view(claimed),
        )
    c.metrics.claimed("replay" if claimed.replay else "ok")
    c.store.read.saw(event_id)  # from now on, this event missing from Redis is a recovery
    if claimed.is_stock:  # a cart (or its replay): its lines and amount
        return claimed_response(claimed)
    return claimed_response(claimed, await c.store.prices.prices(event_id, claimed.seat_ids))


async def owned_hold(request: Request) -> tuple[str, str, Hold]:
    c = ctx(request)
    event_id, hold_id = path_id(request, "event_id"), path_id(request, "hold_id")
    login_name = c.login_of(request, event_id)
    h = await c.store.read.hold(event_id, hold_id)
    if h.login != login_name:
        # Another login's hold answers exactly as an unknown one: ids reveal nothing.
        raise errors.HoldNotFound("no such hold for this login")
    return event_id, login_name, h


@endpoint("hold_status")
async def hold_status(request: Request) -> Response:
    c = ctx(request)
    event_id, _login, h = await owned_hold(request)
    durable = c.settings.confirm_after != "ledger" or await sale_durable(c.store, event_id, h)
    charges = await c.store.read.charges(event_id, h.charge_ids)
    currency: str | None = ""
    if durable and h.state == HoldState.CONFIRMED:  # its order names the event's currency
        (currency,) = await c.store.read.event_fields(event_id, "currency")
    prices = [] if h.is_stock else await seat_prices(c.store.runner, event_id, h.seat_ids)
    now_ms = await board_of(request).server_time_ms()  # the clock of its deadline
    view = hold_view(
        event_id, h, charges, durable=durable, currency=currency or "EUR", prices=prices,
        now_ms=now_ms,
    )  # fmt: skip
    return json_response(view)


# A hold that ended otherwise cannot be given up: the 409 names why (and carries its state).
RELEASE_REFUSALS: dict[str, type[errors.EngineError]] = {
    HoldState.CONFIRMED: errors.AlreadyConfirmed,
    HoldState.EXCEPTION: errors.AlreadyConfirmed,  # sold; its money left and ops decide
    HoldState.EXPIRED: errors.HoldExpired,
    HoldState.REVOKED: errors.HoldRevoked,
}


@endpoint("release")
async def release(request: Request) -> Response:
    """Give the hold up. RELEASED, by this call or an earlier one: 200. QUARANTINED (its deadline
    passed with a charge in flight): given up at once (a late capture is refunded, the login
    may claim again) but it ends only when that charge resolves or the quarantine times out:
    202 with the state it is still in. A hold that ended otherwise: 409 naming why."""
    c = ctx(request)
    event_id, login_name, h = await owned_hold(request)
    state = await c.store.release(event_id, h.hold_id, login_name)
    if state == HoldState.RELEASED:
        released: answers.HoldReleased = {"hold_id": h.hold_id, "state": "RELEASED"}
        return json_response(released)
    if state == HoldState.QUARANTINED:
        h = await c.store.read.hold(event_id, h.hold_id)  # quarantined by this very call, maybe
        given_up: answers.HoldGivenUp = {
            "hold_id": h.hold_id, "state": "QUARANTINED", "given_up": True,
            "quarantine_until_ms": h.until_ms,
        }  # fmt: skip
        return json_response(given_up, 202)
    refusal = RELEASE_REFUSALS.get(state, errors.HoldExpired)
    raise refusal(f"release of hold {h.hold_id}: {state}", state=state)


@endpoint("start_charge")
async def start_charge(request: Request) -> Response:
    """Register the charge (CHARGING) first, then ask the provider: a crash in between leaves a
    charge that reconciliation resolves, never money we do not know about."""
    c = ctx(request)
    event_id, login_name, h = await owned_hold(request)
    obj(await read_json(request, c.settings.body_max_bytes, allow_empty=True))  # before any effect
    # The client's Idempotency-Key deduplicates its own requests on this hold; the charge id,
    # which is also the provider's idempotency key, is minted here from it (ADR 0014).
    client_key = idempotency_key(request.headers.get("idempotency-key"), uuid.uuid4().hex)
    charge_id = keys.charge_key(event_id, h.hold_id, login_name, client_key)
    # The event's currency, one field read with the tick's calls (not the whole event hash).
    (currency,) = await c.store.read.event_fields(event_id, "currency")
    currency = currency or "EUR"
    # One charge for the whole party, its seats' prices added (ADR 0038); a cart's amount was
    # fixed by its claim (ADR 0022).
    price = h.amount if h.is_stock else sum(await seat_prices(c.store.runner, event_id, h.seat_ids))
    started = await c.store.start_charge(event_id, h.hold_id, login_name, charge_id, price)
    provider_status, client_secret = "processing", ""
    if not started.replay or started.state == "CHARGING":
        try:
            pc = await c.provider.create_charge(
                charge_id,
                price,
                currency,
                {
                    "event_id": event_id,
                    "hold_id": h.hold_id,
                    "seat_id": h.listing,
                    "charge_id": charge_id,
                },
            )
            if pc.idempotency_key != charge_id or pc.amount != price:
                # The provider answered with an attempt that is not the one we asked for: we
                # say nothing about it to the buyer; its callbacks are verified on arrival.
                provider_status = "unverified"
            else:
                provider_status, client_secret = pc.status, pc.client_secret
        except ProviderTimeout:
            provider_status = "timeout"  # outcome unknown: the callback or reconciliation decides
        except ProviderRefused as exc:
            # The provider's own words (its URL, its error text) are not the buyer's business.
            raise ApiError(502, "provider_unavailable", "the payment provider refused") from exc
    answer: answers.ChargeStarted = {
        "charge_id": charge_id,
        "hold_id": h.hold_id,
        "state": started.state,
        "amount": price,
        "currency": currency,
        "provider_status": provider_status,
        # The buyer's page confirms the payment with the provider (Stripe.js) with this;
        # None for a provider that needs nothing (the simulator) or an unverified answer.
        "client_secret": client_secret or None,
        "payment_form": payment_form(c.settings.engine.stripe) if client_secret else None,
        "expires_ms": h.expires_ms,
    }
    return json_response(answer, 202)


def payment_form(stripe: StripeSettings | None) -> answers.PaymentForm | None:
    """What the buyer's page needs to take the card itself (ADR 0039): Stripe.js and the
    deployment's publishable key (public by design); None when none is configured."""
    if stripe is None or not stripe.publishable_key:
        return None
    return {
        "provider": "stripe",
        "publishable_key": stripe.publishable_key,
        "js_url": stripe.js_url,
    }


@endpoint("abandon_charge")
async def abandon_charge(request: Request) -> Response:
    c = ctx(request)
    event_id, login_name, h = await owned_hold(request)
    charge_id = str(request.path_params["charge_id"])
    if not keys.valid_charge_id(charge_id):
        raise ApiError(400, "invalid_request", "charge_id is not a charge id of ours")
    # A charge that is not in flight answers 409 charge_captured or charge_not_in_flight.
    await c.store.abandon_charge(event_id, h.hold_id, login_name, charge_id)
    answer: answers.ChargeAbandoned = {"charge_id": charge_id, "abandoned": True}
    return json_response(answer)
