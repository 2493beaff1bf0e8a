"""The simulator's money semantics, in process (no webhooks are delivered: the webhook URL
points nowhere and delivery is retried in the background, which these tests do not wait for)."""

import asyncio

import httpx
import orjson
import pytest

from loadtest.provider_sim.server import SimConfig, create_app


@pytest.fixture
async def sim() -> httpx.AsyncClient:
    app = create_app(
        SimConfig(
            webhook_url="http://127.0.0.1:9/none",
            decline_rate=0.0,
            fail_rate=0.0,
            delay_min_ms=1,
            delay_max_ms=2,
            retries_max=1,
        )
    )
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sim") as client,
    ):
        yield client


async def test_same_key_same_attempt_and_refund_is_idempotent(sim: httpx.AsyncClient) -> None:
    body = {"amount": 4500, "metadata": {"event_id": "e"}}
    first = await sim.post("/v1/charges", json=body, headers={"Idempotency-Key": "c1"})
    again = await sim.post("/v1/charges", json=body, headers={"Idempotency-Key": "c1"})
    assert first.status_code == 201 and again.status_code == 200
    assert first.json()["attempt_id"] == again.json()["attempt_id"]
    other = await sim.post("/v1/charges", json=body, headers={"Idempotency-Key": "c2"})
    assert other.json()["attempt_id"] != first.json()["attempt_id"]
    attempt = first.json()["attempt_id"]
    not_yet = await sim.post(
        "/v1/refunds", json={"attempt_id": attempt}, headers={"Idempotency-Key": "r1"}
    )
    assert not_yet.status_code in (201, 409)  # captured after 1-2 ms: either is honest
    for _ in range(100):
        status = (await sim.get(f"/v1/charges/{attempt}")).json()["status"]
        if status == "captured":
            break
        await asyncio.sleep(0.01)
    r1 = await sim.post(
        "/v1/refunds", json={"attempt_id": attempt}, headers={"Idempotency-Key": "r-c1"}
    )
    r2 = await sim.post(
        "/v1/refunds", json={"attempt_id": attempt}, headers={"Idempotency-Key": "r-c1"}
    )
    assert r1.json()["refund_id"] == r2.json()["refund_id"]
    other_key = await sim.post(
        "/v1/refunds", json={"attempt_id": attempt}, headers={"Idempotency-Key": "r-other"}
    )
    assert other_key.status_code == 409  # never refunds more than it captured
    ledger = (await sim.get("/v1/ledger")).json()
    kinds = [e["kind"] for e in ledger["entries"] if e["attempt_id"] == attempt]
    assert kinds == ["capture", "refund"]
    assert (await sim.get("/v1/charges", params={"idempotency_key": "c1"})).json()[
        "attempt_id"
    ] == attempt
    assert (await sim.get("/v1/charges", params={"idempotency_key": "nope"})).status_code == 404


async def test_missing_idempotency_key_is_refused(sim: httpx.AsyncClient) -> None:
    r = await sim.post("/v1/charges", json={"amount": 1})
    assert r.status_code == 400


async def test_plants_move_money_as_a_provider_would(sim: httpx.AsyncClient) -> None:
    """A capture after its own decline, a dashboard refund, a dispute opened then lost or won:
    each is one money movement with its time, and `net` is what the provider holds."""
    await sim.put("/v1/config", json={"decline_rate": 1.0})
    body = {"amount": 4500, "currency": "EUR", "metadata": {"event_id": "e"}}
    declined = (await sim.post("/v1/charges", json=body, headers={"Idempotency-Key": "k1"})).json()
    await sim.put("/v1/config", json={"decline_rate": 0.0})
    paid = (await sim.post("/v1/charges", json=body, headers={"Idempotency-Key": "k2"})).json()
    other = (await sim.post("/v1/charges", json=body, headers={"Idempotency-Key": "k3"})).json()
    for a in (declined, paid, other):
        for _ in range(100):
            if (await sim.get(f"/v1/charges/{a['attempt_id']}")).json()["status"] != "processing":
                break
            await asyncio.sleep(0.01)
    d = declined["attempt_id"]
    assert (await sim.get(f"/v1/charges/{d}")).json()["status"] == "declined"
    captured = await sim.post(f"/v1/test/attempts/{d}/capture", json={"amount": 1})
    assert (captured.json()["status"], captured.json()["amount"]) == ("captured", 1)
    refund = await sim.post(f"/v1/test/attempts/{paid['attempt_id']}/refund")
    assert refund.json()["requested_by"] == "provider"
    o = other["attempt_id"]
    assert (await sim.post(f"/v1/test/attempts/{o}/dispute", json={})).status_code == 201
    lost = await sim.post(f"/v1/test/attempts/{o}/dispute", json={"status": "lost"})
    assert lost.json()["status"] == "lost"
    again = await sim.post(f"/v1/test/attempts/{o}/dispute", json={"status": "won"})
    assert again.status_code == 409  # a closed dispute stays closed
    ledger = (await sim.get("/v1/ledger")).json()
    kinds = [(e["attempt_id"], e["kind"]) for e in ledger["entries"]]
    assert (d, "capture") in kinds and (o, "dispute_withdrawal") in kinds
    assert [e.get("contradicted") for e in ledger["entries"] if e["attempt_id"] == d] == [True]
    assert ledger["net"] == 1  # only the contradicting capture is still held
    assert all("at_s" in e for e in ledger["entries"])


async def test_concurrent_requests_with_one_key_make_one_attempt() -> None:
    """Bodies arrive in pieces, as over a socket: every request is inside the endpoint, waiting
    for its body, before any of them registers the key."""
    app = create_app(SimConfig(webhook_url="http://127.0.0.1:9/none", retries_max=1))
    body = orjson.dumps({"amount": 4500, "metadata": {"event_id": "e"}})

    async def post() -> tuple[int, dict[str, object]]:
        sent: list[dict[str, object]] = []
        parts = [body[:5], body[5:]]

        async def receive() -> dict[str, object]:
            await asyncio.sleep(0.01)
            chunk = parts.pop(0)
            return {"type": "http.request", "body": chunk, "more_body": bool(parts)}

        async def send(message: dict[str, object]) -> None:
            sent.append(message)

        scope = {
            "type": "http", "method": "POST", "path": "/v1/charges", "query_string": b"",
            "headers": [(b"idempotency-key", b"same"), (b"content-type", b"application/json")],
        }  # fmt: skip
        await app(scope, receive, send)
        status = int(str(sent[0]["status"]))
        return status, orjson.loads(b"".join(bytes(m.get("body", b"")) for m in sent[1:]))

    async with app.router.lifespan_context(app):
        answers = await asyncio.gather(*(post() for _ in range(8)))
    assert sorted(status for status, _ in answers) == [200] * 7 + [201]
    assert len({data["attempt_id"] for _, data in answers}) == 1
