"""The OpenAPI document against the running API (ADR 0026): it is served, it names exactly the
routes the app serves, schemathesis fuzzing of every operation (admin ones with the admin
credential) gets only declared answers (status, content type, a body valid against its schema,
an error code the answer lists) and no 5xx, and every answer of a purchase flow, of an admin's
day and of the merchant webhooks is one the document declares, field for field (a property the
schema does not name fails: `conforms` checks closed schemas)."""

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from api.app import ROUTES
from api.openapi import OPENAPI
from api.openapi_parts import EVENT_ID
from engine.model.signing import HEADER, sign
from tests.integration.conftest import WEBHOOK_SECRET, Stack
from tests.integration.test_webhooks_http import hooks
from tests.receiver import Receiver
from tests.unit.test_openapi_examples import operations, problems

__all__ = ["hooks"]  # a fixture: the stack with a ledger of its own (test_webhooks_http)

pytestmark = [pytest.mark.redis, pytest.mark.slow]

schema = schemathesis.openapi.from_dict(OPENAPI)
ADMIN_PATHS = ("/v1/admin/", "/metrics", "/openapi.json")
WEBHOOKS = "/v1/admin/webhooks/"
# What a purchase flow and an admin's day answer with a success, below.
FLOW = {
    "getHealth", "getReadiness", "getMetrics", "getOpenApi", "login", "getEvent",
    "listFreeSeats", "getSections", "getStock", "claimHold", "getHold", "releaseHold",
    "startCharge", "abandonCharge", "postProviderCallback", "createEvent", "listEvents",
    "getEventConfig", "listHolds", "listCharges", "listOrders", "listExceptionCharges",
    "exportOrdersCsv", "getExceptions", "openSale", "closeSale", "cancelSale", "correctStock",
    "revokeLogin",
}  # fmt: skip


def conforms(method: str, template: str, response: httpx.Response) -> Any:
    """`response` is an answer the document declares for the operation: its status, its
    content type, a body valid against the answer's schema with no undocumented property, and
    for an error, a code the answer lists. Returns the body."""
    op = OPENAPI["paths"][template][method.lower()]
    status = response.status_code
    answer = op["responses"].get(str(status))
    assert answer is not None, f"{method} {template}: undeclared {status}: {response.text[:300]}"
    kind = response.headers.get("content-type", "").split(";")[0]
    assert kind in answer.get("content", {}), f"{method} {template} {status}: {kind}"
    if kind != "application/json":
        return response.text
    body = response.json()
    found = problems(answer["content"][kind]["schema"], body)
    assert not found, (method, template, status, found, body)
    if status >= 400:
        code = body["error"]["code"]
        assert code in answer["x-error-codes"], f"{method} {template} {status}: {code} unlisted"
    return body


@dataclass
class Api:
    """Requests by operation (method and path template), each answer checked by `conforms`;
    `seen` records the operationIds answered with a success."""

    base_url: str
    seen: set[str] = field(default_factory=set)

    def call(
        self,
        method: str,
        template: str,
        expect: int,
        headers: dict[str, str] | None = None,
        **kw: Any,
    ) -> Any:
        params = {k: kw.pop(k) for k in list(kw) if "{" + k + "}" in template}
        url = self.base_url + template.format(**params)
        response = httpx.request(method, url, headers=headers, timeout=10, **kw)
        assert response.status_code == expect, (method, url, response.text[:300])
        body = conforms(method, template, response)
        if expect < 400:
            self.seen.add(OPENAPI["paths"][template][method.lower()]["operationId"])
        return body


@schemathesis.check
def error_code_listed(ctx: Any, response: Any, case: Any) -> bool | None:
    """An error answer's code is one its answer lists (`x-error-codes`); schemathesis's probes
    of methods the path does not serve (405) are its own checks' business."""
    if response.status_code < 400 or case.method.lower() != case.operation.method.lower():
        return None
    answer = case.operation.definition.raw["responses"].get(str(response.status_code), {})
    code = orjson.loads(response.content)["error"]["code"]
    listed = answer.get("x-error-codes", [])
    assert code in listed, (
        f"{case.method} {case.path}: {response.status_code} {code} not in {listed}"
    )
    return None


@pytest.fixture(scope="module")
def example_event(stack: Stack) -> str:
    """The event the document's examples name, so example requests meet a real sale."""
    seats = [{"seat_id": f"{'AB'[i // 20]}-{i % 20 + 1}", "rank": i, "section": "AB"[i // 20]}
             for i in range(40)]  # fmt: skip
    stack.local.create_event(EVENT_ID, seats, price_minor=4500)
    return EVENT_ID


def test_spec_names_exactly_the_served_routes() -> None:
    served = {(r.path, m.lower()) for r in ROUTES for m in (r.methods or ()) if m != "HEAD"}
    documented = {(p, m) for p, ops in OPENAPI["paths"].items() for m in ops}
    assert served == documented


def test_spec_is_served(stack: Stack) -> None:
    with stack.client() as c:
        assert c.get("/openapi.json").status_code == 401  # ops only
        assert c.get("/openapi.json", headers=stack.admin_headers()).json() == OPENAPI


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_answer_is_declared(
    case: schemathesis.Case, stack: Stack, example_event: str
) -> None:
    admin = case.path.startswith(ADMIN_PATHS)
    headers = stack.admin_headers() if admin else stack.login("fuzz")
    response = case.call(base_url=stack.api, headers=headers, timeout=10)
    checks = [status_code_conformance, content_type_conformance, response_schema_conformance,
              error_code_listed]  # fmt: skip
    # This stack has no ledger database: the webhook routes answer their declared 503
    # (webhooks_unavailable); their other answers are checked on a stack with one, below.
    if not case.path.startswith(WEBHOOKS):
        checks.append(not_a_server_error)
    case.validate_response(response, checks=checks)


def _signed(api: Api, message: dict[str, Any], expect: int) -> Any:
    body = orjson.dumps(message)
    headers = {HEADER: sign(WEBHOOK_SECRET, body, int(time.time())),
               "Content-Type": "application/json"}  # fmt: skip
    return api.call("POST", "/v1/provider/callbacks", expect, headers, content=body)


def _buyer_flow(api: Api, stack: Stack, event_id: str) -> None:
    """Login, read, claim (and its replay), charge, the simulator captures, CONFIRMED."""
    token = api.call("POST", "/v1/login", 200, json={"login": "flow-buyer", "event_id": event_id})
    me = {"Authorization": f"Bearer {token['token']}"}
    api.call("GET", "/v1/events/{event_id}", 200, event_id=event_id)
    api.call("GET", "/v1/events/{event_id}/seats", 200, event_id=event_id, params={"limit": 3})
    api.call("GET", "/v1/events/{event_id}/sections", 200, event_id=event_id)
    keyed = {**me, "Idempotency-Key": "flow-1"}
    claim = "/v1/events/{event_id}/holds"
    held = api.call("POST", claim, 201, keyed, event_id=event_id, json={"quantity": 2})
    assert api.call("POST", claim, 200, keyed, event_id=event_id, json={"quantity": 2}) == held
    hold = "/v1/events/{event_id}/holds/{hold_id}"
    ids = {"event_id": event_id, "hold_id": held["hold_id"]}
    assert api.call("GET", hold, 200, me, **ids)["state"] == "RESERVED"
    charge = api.call("POST", hold + "/charges", 202, me, **ids)
    deadline = time.monotonic() + 15
    while api.call("GET", hold, 200, me, **ids)["state"] != "CONFIRMED":
        assert time.monotonic() < deadline, "not CONFIRMED in 15 s"
        time.sleep(0.1)
    abandon = hold + "/charges/{charge_id}/abandon"
    api.call("POST", abandon, 409, me, charge_id=charge["charge_id"], **ids)
    paid = httpx.get(f"{stack.sim}/v1/charges", params={"idempotency_key": charge["charge_id"]})
    attempt = paid.json()
    capture = {
        "id": f"evt-{uuid.uuid4().hex[:8]}",
        "type": "charge.captured",
        "data": {
            "attempt_id": attempt["attempt_id"],
            "intent_id": attempt["intent_id"],
            "idempotency_key": charge["charge_id"],
            "amount": charge["amount"],
            "currency": "EUR",
            "status": "captured",
            "metadata": {"event_id": event_id, "charge_id": charge["charge_id"]},
        },
    }
    assert _signed(api, capture, 200)["duplicate"] is False
    assert _signed(api, capture, 200)["duplicate"] is True
    _signed(api, {"id": "evt-x", "type": "charge.unknown", "data": {"metadata": {}}}, 400)
    other = {"Authorization": f"Bearer {stack.token('flow-other')}"}
    second = api.call("POST", claim, 201, other, event_id=event_id, json={"seat_id": "s5"})
    ids = {"event_id": event_id, "hold_id": second["hold_id"]}
    stack.sim_config(late_rate=1.0, late_delay_ms=1500)  # its charge stays in flight
    late = api.call("POST", hold + "/charges", 202, other, **ids)
    stack.sim_config(late_rate=0.0)
    api.call("POST", abandon, 200, other, charge_id=late["charge_id"], **ids)
    api.call("DELETE", hold, 200, other, **ids)
    api.call("POST", hold + "/charges", 409, other, **ids)


def _stock_flow(api: Api, stack: Stack, admin: dict[str, str]) -> None:
    """A stock event: its table, a cart, a correction and its replay, the admin's hold page."""
    event_id = f"oa-stock-{uuid.uuid4().hex[:6]}"
    create = {"event_id": event_id, "kind": "stock", "locations": ["east", "west"],
              "skus": [{"sku": "wheel", "price_minor": 1200, "on_hand": {"east": 5}}],
              "opens_at_ms": 0}  # fmt: skip
    api.call("POST", "/v1/admin/events", 201, admin, json=create)
    api.call("GET", "/v1/events/{event_id}/stock", 200, event_id=event_id)
    me = {"Authorization": f"Bearer {stack.token('flow-cart')}"}
    lines = {"lines": [{"sku": "wheel", "quantity": 2}]}
    cart = api.call("POST", "/v1/events/{event_id}/holds", 201, me, event_id=event_id, json=lines)
    hold = api.call("GET", "/v1/events/{event_id}/holds/{hold_id}", 200, me,
                    event_id=event_id, hold_id=cart["hold_id"])  # fmt: skip
    assert hold["lines"] == cart["lines"] == [{"sku": "wheel", "location": "east", "quantity": 2}]
    page = api.call("GET", "/v1/admin/events/{event_id}/holds", 200, admin, event_id=event_id)
    assert page["holds"][0]["lines"] == cart["lines"]  # the same lines as every other view
    fix = {"correction_id": "c1", "sku": "wheel", "location": "west", "set": 3, "reason": "count"}
    corrections = "/v1/admin/events/{event_id}/stock/corrections"
    api.call("POST", corrections, 201, admin, event_id=event_id, json=fix)
    api.call("POST", corrections, 200, admin, event_id=event_id, json=fix)
    api.call("GET", "/v1/admin/events/{event_id}", 200, admin, event_id=event_id)


def test_every_answer_of_a_purchase_flow_matches_the_document(stack: Stack) -> None:
    stack.sim_config(decline_rate=0.0, fail_rate=0.0, late_rate=0.0, loss_rate=0.0)
    api = Api(stack.api)
    admin = stack.admin_headers()
    event_id = f"oa-{uuid.uuid4().hex[:8]}"
    seats = [{"seat_id": f"s{i}", "rank": i, "section": "AB"[i // 3]} for i in range(6)]
    body = {"event_id": event_id, "seats": seats, "price_minor": 4500, "opens_at_ms": 0}
    api.call("POST", "/v1/admin/events", 201, admin, json=body)
    api.call("POST", "/v1/admin/events", 409, admin, json=body)
    api.call("GET", "/healthz", 200)
    api.call("GET", "/readyz", 200)
    api.call("GET", "/metrics", 200, admin)
    api.call("GET", "/openapi.json", 200, admin)
    _buyer_flow(api, stack, event_id)
    _stock_flow(api, stack, admin)
    e = {"event_id": event_id}
    for template in ("", "/holds", "/charges", "/orders", "/exceptions/charges", "/orders.csv",
                     "/exceptions"):  # fmt: skip
        api.call("GET", "/v1/admin/events/{event_id}" + template, 200, admin, **e)
    api.call("GET", "/v1/admin/events", 200, admin, params={"limit": 2})
    revoke = "/v1/admin/events/{event_id}/holds/{hold_id}/revoke"
    api.call("POST", revoke, 404, admin, hold_id="no-such-hold", **e)
    api.call("POST", "/v1/admin/events/{event_id}/open", 409, admin, json={}, **e)
    draft = {"event_id": f"{event_id}-draft", "seats": [{"seat_id": "a"}]}
    api.call("POST", "/v1/admin/events", 201, admin, json=draft)
    api.call("POST", "/v1/admin/events/{event_id}/open", 200, admin, event_id=draft["event_id"])
    api.call("POST", "/v1/admin/logins/{login}/revoke", 200, admin, login="flow-gone")
    api.call("POST", "/v1/admin/events/{event_id}/close", 200, admin, **e)
    api.call("POST", "/v1/admin/events/{event_id}/cancel", 200, admin, json={"batch": 50}, **e)
    assert api.seen == FLOW  # every one answered with a success (revokeHold's needs an EXCEPTION)


@pytest.mark.postgres
def test_every_answer_of_the_merchant_webhooks_matches_the_document(hooks: Stack) -> None:
    api, admin, receiver = Api(hooks.api), hooks.admin_headers(), Receiver().up()
    try:
        ep = "/v1/admin/webhooks/endpoints"
        made = api.call("POST", ep, 201, admin, json={"url": receiver.url, "description": "desk"})
        one = {"endpoint_id": made["endpoint_id"]}
        api.call("GET", ep, 200, admin)
        api.call("GET", ep + "/{endpoint_id}", 200, admin, **one)
        api.call("POST", ep + "/{endpoint_id}/rotate-secret", 200, admin, json={}, **one)
        api.call("POST", ep + "/{endpoint_id}/disable", 200, admin, **one)
        api.call("POST", ep + "/{endpoint_id}/replay", 409, admin, json={"since_ms": 0}, **one)
        api.call("POST", ep + "/{endpoint_id}/enable", 200, admin, **one)
        fix = {"event_id": "oa-shop", "kind": "stock", "locations": ["east"],
               "skus": [{"sku": "bell", "price_minor": 500, "on_hand": {"east": 2}}]}  # fmt: skip
        api.call("POST", "/v1/admin/events", 201, admin, json=fix)  # a stock.corrected record
        deliveries = ep + "/{endpoint_id}/deliveries"
        deadline = time.monotonic() + 15
        while not (page := api.call("GET", deliveries, 200, admin, **one))["deliveries"]:
            assert time.monotonic() < deadline, "no delivery in 15 s"
            time.sleep(0.1)
        delivery = {"delivery_id": page["deliveries"][0]["delivery_id"], **one}
        api.call("POST", deliveries + "/{delivery_id}/replay", 202, admin, **delivery)
        api.call("POST", ep + "/{endpoint_id}/replay", 202, admin, json={"since_ms": 0}, **one)
        api.call("DELETE", ep + "/{endpoint_id}", 200, admin, **one)
        api.call("GET", ep + "/{endpoint_id}", 404, admin, **one)
    finally:
        receiver.down()
    webhooks = {op["operationId"] for _, _, op in operations() if "webhooks" in op["tags"]}
    assert webhooks == api.seen - {"createEvent"}
