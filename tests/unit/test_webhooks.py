"""Merchant webhooks without a server (ADR 0024): which decisions notify, read from the outbox the
real scripts write (on fakeredis); the notification's id, body and signature, verified with
the Standard Webhooks library as a merchant would; the sender's retry schedule; the settings;
the admin API's checks of what a merchant registers."""

import re
from datetime import UTC, datetime, timedelta

import httpx
import orjson
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from api.errors import ApiError
from api.routes.webhooks import endpoint_url, event_types
from api.webhooks_db import WebhookDb, WebhookDbSettings
from engine.config.variables import MissingSetting
from engine.model import webhooks as wh
from engine.model.orders import order_number
from engine.model.records import OUTBOX_FIELDS, OutboxRecord
from engine.model.states import ReversalPolicy
from engine.store import Store
from loadtest.devstack.stack import spare_port
from persistence.settings import SenderSettings
from persistence.webhook_sender import retry_after_ms, retry_delay_ms
from tests.conftest import Sale, open_sale
from tests.helpers import callback, reversal


async def told(sale: Sale) -> list[tuple[str, str, str]]:
    """(type, decision id, charge whose win is needed) of every notifying outbox record."""
    out = []
    for fields in await sale.store.read.outbox(sale.event_id):
        n = wh.notification_of(OutboxRecord.from_fields(fields))
        if n is not None:
            out.append((n.event_type, n.decision_id, n.needs_winner))
    return out


async def bought(sale: Sale, n: int) -> str:
    await sale.store.claim(sale.event_id, f"u{n}", f"h{n}")
    await sale.store.start_charge(sale.event_id, f"h{n}", f"u{n}", f"c{n}", 4500)
    await callback(sale, f"c{n}", "CAPTURED", attempt=f"att-{sale.event_id}-{n}")
    return f"c{n}"


async def test_an_order_its_refund_and_its_exception_notify_in_order(fake_store: Store) -> None:
    sale = await open_sale(fake_store, 4)
    await bought(sale, 1)
    # A refund from the provider's dashboard: under `manual`, an exception for an operator.
    await reversal(sale, "c1", "REFUND", event_id="pev-r1")
    await fake_store.revoke_hold(sale.event_id, "h1", "admin")
    assert await told(sale) == [
        (wh.ORDER_CONFIRMED, "charge:c1:CAPTURED", ""),
        (wh.ORDER_REFUNDED, "charge:c1:PROVIDER_REFUNDED:pev-r1", "c1"),
        (wh.EXCEPTION_OPENED, "hold:h1:EXCEPTION:pev-r1", ""),
        (wh.EXCEPTION_RESOLVED, "hold:h1:REVOKED:operator", ""),
    ]
    records = [OutboxRecord.from_fields(f) for f in await fake_store.read.outbox(sale.event_id)]
    confirmed = next(n for r in records if (n := wh.notification_of(r)) is not None)
    assert confirmed.data == {
        "event_id": sale.event_id, "decision_id": "charge:c1:CAPTURED",
        "seq": confirmed.data["seq"], "hold_id": "h1", "charge_id": "c1", "buyer": "u1",
        "order_number": order_number(sale.event_id, "h1"),  # ADR 0042
        "seat_ids": ["s00000"], "reason": "winner", "amount": 4500,
    }  # fmt: skip


async def test_a_dispute_opens_an_exception_and_its_outcome_resolves_it(fake_store: Store) -> None:
    sale = await open_sale(fake_store, 4, reversal_policy=ReversalPolicy.REVOKE)
    await bought(sale, 1)
    await bought(sale, 2)
    await reversal(sale, "c1", "DISPUTE_OPENED")
    await reversal(sale, "c1", "DISPUTE_WON")  # the seat has its money back: reinstated
    await reversal(sale, "c2", "DISPUTE_OPENED")
    await reversal(sale, "c2", "DISPUTE_LOST")  # charged back; the revoke policy takes the seat
    kinds = [(t, d.split(":")[0] + ":" + d.split(":")[1]) for t, d, _w in await told(sale)]
    assert kinds == [
        (wh.ORDER_CONFIRMED, "charge:c1"),
        (wh.ORDER_CONFIRMED, "charge:c2"),
        (wh.EXCEPTION_OPENED, "hold:h1"),
        (wh.EXCEPTION_RESOLVED, "hold:h1"),
        (wh.EXCEPTION_OPENED, "hold:h2"),
        (wh.ORDER_REFUNDED, "charge:c2"),
        (wh.EXCEPTION_RESOLVED, "hold:h2"),
    ]
    records = [OutboxRecord.from_fields(f) for f in await fake_store.read.outbox(sale.event_id)]
    notes = [n for r in records if (n := wh.notification_of(r)) is not None]
    assert [n.data.get("resolution") for n in notes if n.event_type == wh.EXCEPTION_RESOLVED] == [
        "reinstated",
        "revoked",
    ]
    assert [n.data["refunded_by"] for n in notes if n.event_type == wh.ORDER_REFUNDED] == [
        "chargeback"
    ]


async def test_money_that_never_bought_anything_is_not_an_order(fake_store: Store) -> None:
    """A release with a charge in flight, then its capture: the money goes back (REFUNDED) and
    the notification candidate needs the charge to have won, which the ledger will not find; a
    decline tells nothing; under `revoke`, money leaving a sale revokes the order."""
    sale = await open_sale(fake_store, 4, reversal_policy=ReversalPolicy.REVOKE)
    await fake_store.claim(sale.event_id, "u3", "h3")
    await fake_store.start_charge(sale.event_id, "h3", "u3", "c3", 4500)
    await fake_store.release(sale.event_id, "h3", "u3")
    await callback(sale, "c3", "CAPTURED", attempt=f"att-{sale.event_id}-3")
    await fake_store.refund_result(sale.event_id, "c3", refunded=True)
    await fake_store.claim(sale.event_id, "u4", "h4")
    await fake_store.start_charge(sale.event_id, "h4", "u4", "c4", 4500)
    await callback(sale, "c4", "DECLINED", attempt=f"att-{sale.event_id}-4")
    await bought(sale, 5)
    await reversal(sale, "c5", "REFUND")
    got = await told(sale)
    assert got[0] == (wh.ORDER_REFUNDED, "charge:c3:REFUNDED", "c3")
    assert [t for t, _d, _w in got[1:]] == [wh.ORDER_CONFIRMED, wh.ORDER_REFUNDED, wh.ORDER_REVOKED]


def record(**fields: str) -> OutboxRecord:
    base = dict.fromkeys(OUTBOX_FIELDS, "")
    base.update(terminal="0", amount="0", now_ms="1700000000123", captured="0", seq="9")
    base.update(fields)
    return OutboxRecord.from_fields(base)


def test_a_part_of_an_order_is_told_once_its_money_is_back() -> None:
    """ADR 0043: the part's REFUNDED record tells order.partially_refunded with the seats and
    the amount it gave back, and needs its order's charge to have won; its REFUNDING record
    tells nothing yet."""
    winner = "ev1~" + "ab" * 12
    part = f"{winner}:r0123456789ab"
    fields = {
        "event": "ev1",
        "kind": "charge",
        "id": part,
        "hold": "h1",
        "seat": "s2",
        "login": "u1",
        "amount": "4500",
        "captured": "4500",
        "reason": "operator_refund:x",
    }
    assert wh.notification_of(record(**fields, to="REFUNDING")) is None
    n = wh.notification_of(record(**fields, to="REFUNDED", decision_id=f"charge:{part}:REFUNDED"))
    assert n is not None and (n.event_type, n.needs_winner) == (wh.ORDER_PARTIALLY_REFUNDED, winner)
    assert (n.data["seat_ids"], n.data["amount"], n.data["charge_id"]) == (["s2"], 4500, winner)


def test_a_stock_correction_and_a_cart_say_what_they_moved() -> None:
    correction = record(
        decision_id="correction:k1:12", event="ev", kind="correction", id="k1", to="12",
        terminal="1", seat="CHAIN@east", login="ops", reason="recount", mode="set", value="12",
        **{"from": "10"},
    )  # fmt: skip
    n = wh.notification_of(correction)
    assert n is not None and n.event_type == wh.STOCK_CORRECTED
    assert n.data | {"decision_id": ""} == {
        "event_id": "ev", "decision_id": "", "seq": 9, "correction_id": "k1", "sku": "CHAIN",
        "location": "east", "mode": "set", "value": 12, "on_hand_before": 10,
        "on_hand_after": 12, "reason": "recount", "operator": "ops",
    }  # fmt: skip
    cart = record(
        decision_id="charge:c1:CAPTURED", event="ev", kind="charge", id="c1", to="CAPTURED",
        terminal="1", hold="h1", seat="CHAIN@east*2,BELL@west*1", login="ann", amount="9000",
        captured="9000", winner="c1", **{"from": "CHARGING"},
    )  # fmt: skip
    n = wh.notification_of(cart)
    assert n is not None and n.data["lines"] == [
        {"sku": "CHAIN", "location": "east", "quantity": 2},
        {"sku": "BELL", "location": "west", "quantity": 1},
    ]
    body = orjson.loads(n.body("EUR"))
    assert body["type"] == wh.ORDER_CONFIRMED
    assert body["timestamp"] == "2023-11-14T22:13:20.123Z"
    assert (body["data"]["amount"], body["data"]["currency"]) == (9000, "EUR")
    assert "currency" not in orjson.loads(wh.notification_of(correction).body("EUR"))["data"]  # type: ignore[union-attr]


def test_the_webhook_id_is_the_decisions_own() -> None:
    a = wh.message_id("ev1", "charge:c1:CAPTURED")
    assert a == wh.message_id("ev1", "charge:c1:CAPTURED")  # every attempt, endpoint, replay
    assert len({a, wh.message_id("ev2", "charge:c1:CAPTURED"), wh.message_id("ev1", "x")}) == 3
    assert re.fullmatch(r"msg_[a-z2-7]{32}", a)  # no '.': it is part of the signed content


def test_a_merchant_verifies_a_delivery_with_the_library() -> None:
    secret = wh.new_secret()
    assert secret.startswith("whsec_") and len(secret) > 40
    body = '{"type":"order.confirmed","timestamp":"2024-01-01T00:00:00.000Z","data":{}}'
    now = datetime.now(UTC)
    headers = wh.signed_headers("msg_abc", body, (secret, ""), now)
    assert headers["webhook-timestamp"] == str(int(now.timestamp()))
    assert (
        headers["webhook-signature"].startswith("v1,") and " " not in headers["webhook-signature"]
    )
    assert Webhook(secret).verify(body, headers)["type"] == "order.confirmed"
    for bad_body, bad_headers, bad_secret in (
        (body.replace("{}", '{"x":1}'), headers, secret),  # tampered
        (body, headers, wh.new_secret()),  # another endpoint's secret
        (body, {**headers, "webhook-id": "msg_other"}, secret),  # the id is signed too
        (body, wh.signed_headers("msg_abc", body, (secret,), now - timedelta(hours=1)), secret),
    ):
        with pytest.raises(WebhookVerificationError):
            Webhook(bad_secret).verify(bad_body, bad_headers)


def test_during_a_rotation_both_secrets_verify() -> None:
    old, new = wh.new_secret(), wh.new_secret()
    headers = wh.signed_headers("msg_r", "{}", (new, old), datetime.now(UTC))
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert Webhook(old).verify("{}", headers) == {}
    assert Webhook(new).verify("{}", headers) == {}


def test_retries_back_off_exponentially_with_jitter_and_honour_retry_after() -> None:
    s = SenderSettings(backoff_ms=1_000, backoff_max_ms=60_000)
    for attempts, (low, high) in {1: (500, 1_000), 3: (2_000, 4_000), 20: (30_000, 60_000)}.items():
        delays = {retry_delay_ms(s, attempts) for _ in range(200)}
        assert low <= min(delays) and max(delays) <= high and len(delays) > 1
    assert retry_delay_ms(s, 1, retry_after_ms=30_000) == 30_000
    assert retry_delay_ms(s, 1, retry_after_ms=10**9) == 60_000  # capped like the backoff
    answer = httpx.Response(503, headers={"retry-after": "7"})
    assert retry_after_ms(answer) == 7_000
    for odd in ("Wed, 21 Oct 2015 07:28:00 GMT", "-1", "1.5", ""):
        assert retry_after_ms(httpx.Response(429, headers={"retry-after": odd})) == 0


def test_settings_come_from_the_environment() -> None:
    assert SenderSettings.from_env({}) == SenderSettings()
    s = SenderSettings.from_env(
        {"ONSALE_MERCHANT_WEBHOOKS": "0", "ONSALE_MERCHANT_WEBHOOK_TIMEOUT_MS": "900"}
    )
    assert (s.merchant_webhooks, s.timeout_ms) == (False, 900)
    with pytest.raises(MissingSetting, match="ONSALE_MERCHANT_WEBHOOK_MAX_AGE_MS"):
        SenderSettings.from_env({"ONSALE_MERCHANT_WEBHOOK_MAX_AGE_MS": "soon"})
    api = WebhookDbSettings.from_env({"ONSALE_PG_DSN": "postgresql://x/db"})
    assert (api.pg_dsn, api.merchant_webhook_http) == ("postgresql://x/db", False)


@pytest.mark.parametrize(
    ("url", "allow_http", "ok"),
    [
        ("https://shop.example/hooks?k=1", False, True),
        ("http://127.0.0.1:9000/hooks", True, True),
        ("http://shop.example/hooks", False, False),  # https only unless allowed
        ("ftp://shop.example/hooks", True, False),
        ("https:///hooks", False, False),
        ("https://user:pw@shop.example/hooks", False, False),
        ("https://shop.example/hooks#frag", False, False),
        ("shop.example/hooks", False, False),
    ],
)
def test_an_endpoint_url_is_checked(url: str, allow_http: bool, ok: bool) -> None:
    if ok:
        assert endpoint_url({"url": url}, allow_http) == url
        return
    with pytest.raises(ApiError) as caught:
        endpoint_url({"url": url}, allow_http)
    assert (caught.value.status, caught.value.code) == (400, "invalid_webhook_url")


def test_event_types_are_known_unique_and_default_to_all() -> None:
    assert event_types({}) == list(wh.EVENT_TYPES)
    assert event_types({"event_types": ["order.refunded", "order.confirmed"]}) == [
        "order.confirmed",
        "order.refunded",
    ]
    for bad, code in (
        (["order.shipped"], "unknown_event_type"),
        (["order.confirmed", "order.confirmed"], "invalid_request"),
        ([], "invalid_request"),
        ("order.confirmed", "invalid_request"),
    ):
        with pytest.raises(ApiError) as caught:
            event_types({"event_types": bad})
        assert caught.value.code == code, bad


@pytest.mark.parametrize("configured", [False, True])
async def test_a_webhook_store_that_cannot_be_reached_answers_503(configured: bool) -> None:
    """No ledger database configured, or one that refuses connections: the webhook routes
    answer 503 webhooks_unavailable (every other route is unaffected)."""
    dsn = f"postgresql://postgres@127.0.0.1:{spare_port()}/none" if configured else ""
    store = WebhookDb(WebhookDbSettings(pg_dsn=dsn, pg_timeout_ms=1_000))
    with pytest.raises(ApiError) as caught:
        await store.fetch("endpoints")
    assert (caught.value.status, caught.value.code) == (503, "webhooks_unavailable")
    await store.close()
