"""An event's terms are one type (engine/model/event_config.py, ADR 0052): what a create is given
is what the event read answers, on fakeredis and Redis, for seat and stock events; the admin
parser, the ledger's row and the listings' fields are made from the same declaration."""

import pytest

from api.routes.admin import new_event
from engine.model.event_config import FIELDS, INTEGER_FIELDS, EventConfig
from engine.model.holds import SeatSpec
from engine.model.states import LatePolicy, ReversalPolicy
from engine.model.stock_lines import SkuSpec
from engine.store import Store
from engine.views.listings import CONFIG_FIELDS
from engine.views.listings import INTEGER_FIELDS as LISTED_INTEGERS
from persistence.ledger_rows import config_row

ODD = EventConfig(
    hold_ttl_ms=61_000, quarantine_ms=7_000, policy=LatePolicy.RELEASE_REFUND, currency="CHF",
    reversal_policy=ReversalPolicy.REVOKE, login_cap=3, max_party=4,
)  # fmt: skip


@pytest.mark.parametrize("config", [EventConfig(), ODD, EventConfig(login_cap=0)])
async def test_a_seat_events_read_answers_the_terms_it_was_created_with(
    store: Store, config: EventConfig
) -> None:
    await store.create_event("e", [SeatSpec("s1", 0), SeatSpec("s2", 1)], config)
    assert (await store.read.availability("e")).config == config


async def test_a_stock_events_read_answers_its_terms(store: Store) -> None:
    terms = EventConfig(hold_ttl_ms=30_000, quarantine_ms=9_000, currency="USD", login_cap=2)
    await store.stock.create_event("g", ["east"], [SkuSpec("ga", 500, {"east": 5})], terms)
    assert (await store.read.availability("g")).config == terms


def test_the_admin_parser_builds_the_terms_with_their_defaults() -> None:
    body = b'{"event_id": "e", "seats": [{"seat_id": "s1"}]}'
    assert new_event(body, "application/json").config == EventConfig()
    body = (
        b'{"event_id": "e", "seats": [{"seat_id": "s1"}], "hold_ttl_ms": 61000, "quarantine_ms":'
        b' 7000, "policy": "release_refund", "currency": "CHF", "reversal_policy": "revoke",'
        b' "login_cap": 3, "max_party": 4}'
    )
    assert new_event(body, "application/json").config == ODD


def test_the_ledger_row_and_a_rebuild_read_the_same_terms() -> None:
    stored = {  # the event hash lua/event_create.lua writes
        "hold_ttl_ms": "61000", "quarantine_ms": "7000", "policy": "release_refund",
        "currency": "CHF", "reversal_policy": "revoke", "login_cap": "3", "max_party": "4",
        "opens_at_ms": "0", "kind": "seats",
    }  # fmt: skip
    row = config_row("e", stored, 2)
    assert EventConfig.of(dict(zip(("event_id", *ROW_TERMS), row, strict=False))) == ODD


ROW_TERMS = ("hold_ttl_ms", "quarantine_ms", "policy", "price_minor", "opens_at_ms",
             "seats_total", "currency", "reversal_policy", "kind", "locations", "login_cap",
             "max_party")  # fmt: skip


def test_listings_name_every_term_and_answer_its_integers_as_numbers() -> None:
    assert set(FIELDS) <= set(CONFIG_FIELDS)
    assert set(INTEGER_FIELDS) == {"hold_ttl_ms", "quarantine_ms", "login_cap", "max_party"}
    assert set(INTEGER_FIELDS) <= LISTED_INTEGERS
