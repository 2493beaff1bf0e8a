"""Real identity (ADR 0019), the API in process on real Redis: buyer tokens are JWTs checked
against keys a local identity provider publishes (a JWKS over HTTP on loopback, keys made by the
test), the demo login is off, an admin can revoke a login's tokens on every process, a token
may be limited to events, the admin credential is separate, ids reveal nothing about other
logins, and claims are rate limited per login."""

import asyncio
import base64
import hashlib
import hmac
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import jwt
import orjson
import pytest
from cryptography.hazmat.primitives import serialization

from api.app import create_app
from api.settings import ApiSettings
from engine.store import Store
from loadtest.devstack.identity_provider import AUDIENCE, ISSUER, IdentityProvider
from tests.conftest import API_TEST_ENV, REDIS_URL, Sale, open_sale
from tests.helpers import wait_until

pytestmark = pytest.mark.redis

ADMIN = API_TEST_ENV["ONSALE_ADMIN_TOKEN"]


@pytest.fixture(scope="module")
def idp() -> Iterator[IdentityProvider]:
    provider = IdentityProvider()
    yield provider
    provider.close()


def env(store: Store, idp: IdentityProvider, **extra: str) -> dict[str, str]:
    return {
        "ONSALE_REDIS_URL": REDIS_URL,
        "ONSALE_KEY_PREFIX": store.prefix,
        "ONSALE_ADMIN_TOKEN": ADMIN,
        "ONSALE_WEBHOOK_SECRET": "whs-Lr5tY8cV2nQ7mX1zK4bD9fH3jP6wS0a",
        "ONSALE_PROVIDER_URL": "http://127.0.0.1:9",
        "ONSALE_JWT_JWKS_URL": idp.url,
        "ONSALE_JWT_ISSUER": ISSUER,
        "ONSALE_JWT_AUDIENCE": AUDIENCE,
        "ONSALE_JWT_ADMIN_CLAIM": "onsale_admin",
        "ONSALE_JWKS_RETRY_S": "60",
        "ONSALE_CONFIRM_AFTER": "redis",
        **extra,
    }


@asynccontextmanager
async def api(environ: dict[str, str]) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(ApiSettings.from_env(environ))
    async with (
        app.router.lifespan_context(app),  # type: ignore[attr-defined]
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as http,
    ):
        http.app = app  # type: ignore[attr-defined]
        yield http


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def claim(http: httpx.AsyncClient, sale: Sale, token: str, key: str = "") -> httpx.Response:
    headers = {**bearer(token), **({"Idempotency-Key": key} if key else {})}
    return await http.post(f"/v1/events/{sale.event_id}/holds", json={}, headers=headers)


def hs256(claims: dict[str, Any], key: bytes) -> str:
    """A token signed HS256 with `key` (pyjwt refuses to use a public key as an HMAC secret,
    which is exactly the attack: made by hand)."""

    def b64(data: bytes) -> bytes:
        return base64.urlsafe_b64encode(data).rstrip(b"=")

    signing_input = (
        b64(b'{"alg":"HS256","kid":"k1","typ":"JWT"}') + b"." + b64(orjson.dumps(claims))
    )
    mac = hmac.new(key, signing_input, hashlib.sha256).digest()
    return (signing_input + b"." + b64(mac)).decode()


def code(r: httpx.Response) -> tuple[int, str]:
    return r.status_code, str(r.json()["error"]["code"]) if r.status_code >= 400 else ""


async def test_buyer_tokens_are_the_identity_providers(
    real_store: Store, idp: IdentityProvider
) -> None:
    sale = await open_sale(real_store, 20)
    idp.add_key("stranger", publish=False)
    public_pem = (
        idp.keys["k1"]
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "iat": now, "exp": now + 600}
    forged = {
        "wrong issuer": idp.token(iss="https://evil.test/"),
        "wrong audience": idp.token(aud="someone-else"),
        "expired": idp.token(iat=now - 900, exp=now - 120),
        "no subject": idp.token(sub=None),
        "no issue time": idp.token(iat=None),
        "signed by an unpublished key under a known kid": jwt.encode(
            claims, idp.keys["stranger"], algorithm="RS256", headers={"kid": "k1"}
        ),
        "HS256 keyed with the public key (algorithm confusion)": hs256(claims, public_pem),
        "alg none": jwt.encode(claims, None, algorithm="none", headers={"kid": "k1"}),
        "not a JWT": "hello",
    }
    async with api(env(real_store, idp)) as http:
        for why, token in forged.items():
            assert code(await claim(http, sale, token)) == (401, "unauthorized"), why
        r = await claim(http, sale, idp.token("alice"))
        assert r.status_code == 201, r.text
        within_skew = idp.token("bob", iat=now + 20)  # the provider's clock 20 s ahead
        assert (await claim(http, sale, within_skew)).status_code == 201
        r = await http.post("/v1/login", json={"login": "alice"})
        assert code(r) == (404, "login_disabled")
    await sale.audit_ok()


async def test_a_rotated_key_is_fetched_once_and_forged_key_ids_are_not(
    real_store: Store, idp: IdentityProvider
) -> None:
    sale = await open_sale(real_store, 5)
    async with api(env(real_store, idp)) as http:
        idp.add_key("k2")  # the provider rotates; our copy of its keys is stale
        fetches = idp.fetches
        rotated = idp.token("carol", kid="k2")
        assert code(await claim(http, sale, rotated)) == (503, "identity_unavailable")
        await wait_until(lambda: idp.fetches == fetches + 1)
        for _ in range(100):
            r = await claim(http, sale, rotated)
            if r.status_code != 503:
                break
            await asyncio.sleep(0.02)
        assert r.status_code == 201, r.text
        idp.add_key("k3", publish=False)
        for _ in range(20):  # a forger's key ids: refused, without asking the provider again
            assert code(await claim(http, sale, idp.token("mallory", kid="k3"))) == (
                401,
                "unauthorized",
            )
        assert idp.fetches == fetches + 1


async def test_a_key_the_provider_withdrew_refuses_its_tokens_even_those_seen_before(
    real_store: Store, idp: IdentityProvider
) -> None:
    """A verified token is remembered until it expires (the claim path checks a signature once
    per token); the provider withdrawing its key (say, a compromised one) forgets them: the next
    request with such a token is checked again, and refused."""
    sale = await open_sale(real_store, 5)
    idp.add_key("k-withdrawn")
    try:
        async with api(env(real_store, idp, ONSALE_JWKS_REFRESH_S="1")) as http:
            token = idp.token("dave", kid="k-withdrawn")
            assert (await claim(http, sale, token, "first")).status_code == 201
            idp.published.remove("k-withdrawn")
            fetches = idp.fetches
            await wait_until(lambda: idp.fetches >= fetches + 2, timeout_s=10)
            for _ in range(100):  # a 503 while the early fetch it asked for is under way
                r = await claim(http, sale, token, "second")
                if r.status_code != 503:
                    break
                await asyncio.sleep(0.02)
            assert code(r) == (401, "unauthorized")
            other = idp.token("erin")  # the provider's other keys are still good
            assert (await claim(http, sale, other)).status_code == 201
    finally:
        if "k-withdrawn" in idp.published:
            idp.published.remove("k-withdrawn")
    await sale.audit_ok()


async def test_revoking_a_login_refuses_its_older_tokens_on_every_process(
    real_store: Store, idp: IdentityProvider
) -> None:
    sale = await open_sale(real_store, 5)
    polling = env(real_store, idp, ONSALE_REVOCATION_POLL_MS="50")
    async with api(polling) as one, api(polling) as two:
        old = idp.token("alice", iat=int(time.time()) - 5)
        assert (await claim(one, sale, old)).status_code == 201
        r = await one.post("/v1/admin/logins/alice/revoke", headers=bearer(ADMIN))
        assert r.status_code == 200, r.text
        revoked_ms = r.json()["revoked_before_ms"]
        assert code(await claim(one, sale, old)) == (401, "token_revoked")  # at once here
        for _ in range(100):  # within a poll there
            if (await claim(two, sale, old)).status_code == 401:
                break
            await asyncio.sleep(0.02)
        assert code(await claim(two, sale, old)) == (401, "token_revoked")
        fresh = idp.token("alice", iat=revoked_ms // 1000 + 1)
        assert (await claim(two, sale, fresh)).status_code == 201
        assert (await claim(one, sale, idp.token("bob"))).status_code == 201  # others unaffected


async def test_a_token_limited_to_events_is_refused_on_others(
    real_store: Store, idp: IdentityProvider
) -> None:
    sale = await open_sale(real_store, 5)
    async with api(env(real_store, idp)) as http:
        elsewhere = idp.token("dave", onsale_events=["another-event"])
        assert code(await claim(http, sale, elsewhere)) == (403, "token_scope")
        here = idp.token("dave", onsale_events=[sale.event_id])
        assert (await claim(http, sale, here)).status_code == 201
        malformed = idp.token("dave", onsale_events="everything")
        assert code(await claim(http, sale, malformed)) == (401, "unauthorized")


async def test_the_admin_credential_is_separate_from_buyers(
    real_store: Store, idp: IdentityProvider
) -> None:
    sale = await open_sale(real_store, 5)
    path = f"/v1/admin/events/{sale.event_id}/exceptions"
    async with api(env(real_store, idp)) as http:
        assert (await http.get(path, headers=bearer(ADMIN))).status_code == 200
        lower = {"Authorization": f"bearer {ADMIN}"}  # the scheme is case-insensitive
        assert (await http.get(path, headers=lower)).status_code == 200
        operator = idp.token("ops-jane", onsale_admin=True)
        assert (await http.get(path, headers=bearer(operator))).status_code == 200
        for who in (idp.token("erin"), idp.token("erin", onsale_admin="true"), "x" * 40):
            assert code(await http.get(path, headers=bearer(who))) == (401, "unauthorized")
        raw = [(b"authorization", b"Bearer \xff\xfe" + ADMIN.encode())]
        r = await http.get(path, headers=httpx.Headers(raw))
        assert code(r) == (401, "unauthorized")
        for ops_path in ("/metrics", "/openapi.json"):
            assert code(await http.get(ops_path)) == (401, "unauthorized")
            assert (await http.get(ops_path, headers=bearer(ADMIN))).status_code == 200


async def test_the_metrics_token_opens_metrics_only(
    real_store: Store, idp: IdentityProvider
) -> None:
    scraper = "mtr-Pz3Wq8Ek1Yt6Ua9Ri4Oo7Sd2Fg5Hj0Kl"
    async with api(env(real_store, idp, ONSALE_METRICS_TOKEN=scraper)) as http:
        assert (await http.get("/metrics", headers=bearer(scraper))).status_code == 200
        sale = await open_sale(real_store, 1)
        path = f"/v1/admin/events/{sale.event_id}/exceptions"
        assert code(await http.get(path, headers=bearer(scraper))) == (401, "unauthorized")


async def test_ids_reveal_nothing_about_other_logins(
    real_store: Store, idp: IdentityProvider
) -> None:
    sale = await open_sale(real_store, 5)
    async with api(env(real_store, idp)) as http:
        alice, bob = idp.token("alice"), idp.token("bob")
        mine = await claim(http, sale, alice, key="order-1")
        assert mine.status_code == 201
        hold_id = mine.json()["hold_id"]
        theirs = await claim(http, sale, bob, key="order-1")  # the same key, another login
        assert theirs.status_code == 201 and theirs.json()["hold_id"] != hold_id
        again = await claim(http, sale, alice, key="order-1")
        assert (again.status_code, again.json()["hold_id"]) == (200, hold_id)
        other = await http.get(f"/v1/events/{sale.event_id}/holds/{hold_id}", headers=bearer(bob))
        unknown = await http.get(f"/v1/events/{sale.event_id}/holds/h-none", headers=bearer(bob))
        assert code(other) == code(unknown) == (404, "hold_not_found")
        gone = await http.delete(f"/v1/events/{sale.event_id}/holds/{hold_id}", headers=bearer(bob))
        assert code(gone) == (404, "hold_not_found")
        assert (await real_store.read.hold(sale.event_id, hold_id)).state == "RESERVED"


async def test_a_second_tab_is_told_which_hold_it_replaced(
    real_store: Store, idp: IdentityProvider
) -> None:
    sale = await open_sale(real_store, 5)
    async with api(env(real_store, idp)) as http:
        first = await claim(http, sale, idp.token("frank"))
        second = await claim(http, sale, idp.token("frank"))
        assert first.json()["replaced_hold_id"] is None
        assert second.json()["replaced_hold_id"] == first.json()["hold_id"]


async def test_a_claim_flood_from_one_login_gets_429_with_retry_after(
    real_store: Store, idp: IdentityProvider
) -> None:
    sale = await open_sale(real_store, 50)
    limits = {"ONSALE_CLAIMS_PER_S": "1", "ONSALE_CLAIMS_BURST": "5"}
    async with api(env(real_store, idp, **limits)) as http:
        flood = idp.token("flooder")
        answers = [await claim(http, sale, flood) for _ in range(40)]
        assert [r.status_code for r in answers[:5]] == [201] * 5
        assert {r.status_code for r in answers[5:]} == {429}
        assert answers[-1].headers["Retry-After"] == "1"
        assert code(answers[-1]) == (429, "rate_limited")
        assert (await claim(http, sale, idp.token("bystander"))).status_code == 201
        holds = await real_store.read.holds(sale.event_id)
        assert len(holds) == 6  # five from the burst (four replaced), the bystander's


async def test_login_and_admin_routes_are_limited_per_address(
    real_store: Store, idp: IdentityProvider
) -> None:
    sale = await open_sale(real_store, 1)
    limits = {"ONSALE_ADDRESS_PER_S": "1", "ONSALE_ADDRESS_BURST": "3"}
    async with api(env(real_store, idp, **limits)) as http:
        path = f"/v1/admin/events/{sale.event_id}/exceptions"
        answers = [
            (await http.get(path, headers=bearer("wrong" * 8))).status_code for _ in range(6)
        ]
        assert answers == [401, 401, 401, 429, 429, 429]
        r = await http.get(path, headers=bearer(ADMIN))
        assert code(r) == (429, "rate_limited") and r.headers["Retry-After"] == "1"
        assert (await claim(http, sale, idp.token("buyer"))).status_code == 201  # not the claim
