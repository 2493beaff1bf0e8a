"""Who is calling (ADR 0019).

- Buyers present a JWT from the deployment's identity provider: signature checked against the
  provider's published keys (JWKS URL), then issuer, audience, expiry and issue time, with a
  bounded clock skew. The login is the token's `sub`. The name-only login of the demo and the
  load tools (`POST /v1/login`) exists only when `ONSALE_DEMO_LOGIN=1`.
- A token may name the events it is good for (a list claim); it is refused on any other.
- An admin revokes a login: every token of it issued up to that instant stops working, on every
  API process within one revocation poll.
- The admin credential is separate from buyers': the admin token, or a provider JWT whose admin
  claim is true. A buyer token is never an admin credential.

Verifying costs CPU only (no Redis on the claim path): a verified token is remembered until it
expires, and each use checks the in-memory revocations and scope again."""

import asyncio
import base64
import contextlib
import hmac
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import jwt
import orjson
from itsdangerous import BadSignature, SignatureExpired, TimestampSigner, URLSafeTimedSerializer
from starlette.requests import Request

from api.errors import ApiError

log = logging.getLogger("onsale.identity")

TOKEN_CACHE_MAX = 200_000  # verified tokens kept per process; cleared when full
LOGIN_MAX_CHARS = 128  # a login is a Redis hash field and a Lua argument: bounded
JWKS_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class Caller:
    login: str
    issued_s: float  # when the token was issued (revocation compares it)
    expires_s: float
    events: frozenset[str] | None = None  # None: every event
    admin: bool = False


def valid_login(value: object) -> bool:
    """Printable ASCII without spaces, bounded: identity providers' subjects look like
    `auth0|5f1c...` or a UUID; anything else is refused rather than stored."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= LOGIN_MAX_CHARS
        and all("!" <= ch <= "~" for ch in value)
    )


def bearer_bytes(request: Request) -> bytes | None:
    """The raw token of an `Authorization: Bearer <token>` header, for a constant-time compare
    with a configured credential (bytes: non-ASCII is a wrong token, not a crash); None for
    another scheme."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip().encode("latin-1", "replace")


def bearer_token(request: Request) -> str:
    """The token of an `Authorization: Bearer <token>` header; the scheme is case-insensitive
    (RFC 9110). Anything else, non-ASCII bytes included, is a 401."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or not token.isascii():
        raise ApiError(401, "unauthorized", "send Authorization: Bearer <token>")
    return token


def peek_segment(segment: str) -> dict[str, Any] | None:
    """A token's base64url JSON object segment, read WITHOUT any check of the token; None for
    anything unreadable. Read directly, as `jwt.decode` and itsdangerous decode it: 1.6 µs
    against PyJWT's 23 µs without verification."""
    try:
        data: Any = orjson.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (ValueError, TypeError):  # orjson's and binascii's are ValueError
        return None
    return data if isinstance(data, dict) else None


def peek_claim(segment: str, name: str) -> str | None:
    """Claim `name` of a token's segment, unchecked (the claim front only: a quarter of what
    a refused claim cost the API at T0 went to PyJWT's read); None when not a non-empty string
    (the normal path answers it)."""
    value = (peek_segment(segment) or {}).get(name)
    return value if isinstance(value, str) and value else None


class DemoTokens:
    """Name-only logins for the demo and the load tools: a signed name (itsdangerous), optionally
    limited to one event. Off in production (`ONSALE_DEMO_LOGIN`)."""

    def __init__(self, secret: str, ttl_s: int) -> None:
        self.signer = URLSafeTimedSerializer(secret, salt="onsale-login")
        # Made once, not per token (what `loads` does on each call): about 2 µs a claim.
        self._timestamps = TimestampSigner(secret, salt="onsale-login")
        self.ttl_s = ttl_s

    def issue(self, login: str, event_id: str | None = None) -> str:
        data: dict[str, str] = {"l": login}
        if event_id is not None:
            data["e"] = event_id
        return str(self.signer.dumps(data))

    def peek_login(self, token: str) -> str | None:
        """The login the token names, its signature NOT checked (the claim front only)."""
        payload = token.rsplit(".", 2)[0]
        if payload.startswith("."):  # compressed: never ours, not inflated here
            return None
        return peek_claim(payload, "l")

    def verify(self, token: str) -> Caller:
        try:
            raw, signed_at = self._timestamps.unsign(token, self.ttl_s, return_timestamp=True)
            data: Any = self.signer.load_payload(raw)
        except SignatureExpired:
            raise ApiError(401, "unauthorized", "token expired") from None
        except BadSignature:
            raise ApiError(401, "unauthorized", "invalid token") from None
        issued = signed_at.timestamp()
        events = frozenset([str(data["e"])]) if "e" in data else None
        return Caller(str(data["l"]), issued, issued + self.ttl_s, events)

    def login_of(self, request: Request) -> str:
        """For a server that trusts only this signer (the PostgreSQL baseline)."""
        return self.verify(bearer_token(request)).login


@dataclass(frozen=True)
class JwtSettings:
    jwks_url: str
    issuer: str
    audience: str
    leeway_s: int = 30  # clock skew tolerated on exp, iat and nbf
    algorithms: tuple[str, ...] = ("RS256", "ES256")  # asymmetric only: no shared secret
    admin_claim: str = ""  # a claim that, when true, makes the token an admin credential
    events_claim: str = "onsale_events"  # optional list of the event ids a token is good for
    jwks_refresh_s: int = 300  # keys are fetched again this often
    jwks_retry_s: int = 10  # a token naming an unknown key refetches at most this often
    # The browser pages sign in through the provider with this public client (ADR 0050); "":
    # the pages have no sign-in of their own (tokens come from elsewhere).
    oidc_client_id: str = ""


class Jwks:
    """The identity provider's signing keys by key id. Fetched at boot and every
    `jwks_refresh_s`; a token naming a key we do not know asks for one early fetch (the
    provider rotated its keys), at most every `jwks_retry_s`, so forged key ids cannot make us
    hammer the provider."""

    def __init__(self, settings: JwtSettings) -> None:
        self.settings = settings
        self.keys: dict[str, jwt.PyJWK] = {}
        # Bumped when a fetch finds the published keys changed: tokens verified with the old
        # set are checked again (a withdrawn key's tokens refused, ADR 0019).
        self.generation = 0
        self._published: dict[str, Any] = {}
        self.fetched_at = 0.0  # monotonic time of the last successful fetch
        self._early_at = -1e9  # monotonic time of the last early fetch (an unknown key id)
        self._pending: asyncio.Task[bool] | None = None

    async def fetch(self) -> None:
        async with httpx.AsyncClient(timeout=JWKS_TIMEOUT_S) as client:
            response = await client.get(self.settings.jwks_url)
            response.raise_for_status()
            data = response.json()
        keys = {}
        for key in jwt.PyJWKSet.from_dict(data).keys:
            if key.key_id and key.public_key_use in (None, "sig"):
                keys[key.key_id] = key
        published = {str(k.get("kid")): k for k in data.get("keys", []) if isinstance(k, dict)}
        if published != self._published:
            self._published = published
            self.generation += 1
        self.keys = keys
        self.fetched_at = time.monotonic()
        log.info("identity provider keys: %s", ", ".join(sorted(keys)) or "none")

    async def fetch_quietly(self) -> bool:
        try:
            await self.fetch()
            return True
        except (httpx.HTTPError, jwt.PyJWTError, ValueError) as exc:
            log.warning("cannot fetch the identity provider's keys: %r", exc)
            return False

    def key(self, kid: str) -> jwt.PyJWK | None:
        found = self.keys.get(kid)
        due = time.monotonic() - self._early_at >= self.settings.jwks_retry_s
        if found is None and due and not self.fetching():
            self._early_at = time.monotonic()
            self._pending = asyncio.get_running_loop().create_task(self.fetch_quietly())
        return found

    def fetching(self) -> bool:
        return self._pending is not None and not self._pending.done()

    async def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pending


class JwtTokens:
    def __init__(self, settings: JwtSettings, jwks: Jwks) -> None:
        self.settings = settings
        self.jwks = jwks

    def peek_login(self, token: str) -> str | None:
        """The token's subject, its signature NOT checked (the claim front only)."""
        parts = token.split(".")
        return peek_claim(parts[1], "sub") if len(parts) == 3 else None

    def verify(self, token: str) -> Caller:
        # The header is read here only to choose the key: PyJWT's decode checks all of it
        # (reading it with PyJWT too cost 35 µs a claim, its segment checks run twice).
        parts = token.split(".")
        header = peek_segment(parts[0]) if len(parts) == 3 else None
        if header is None:
            raise ApiError(401, "unauthorized", "invalid token")
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in self.settings.algorithms or not isinstance(kid, str):
            raise ApiError(401, "unauthorized", "invalid token")
        key = self.jwks.key(kid)
        if key is None:
            if not self.jwks.keys or self.jwks.fetching():
                # No keys at all (the provider unreachable since boot), or a fetch for a key
                # the provider may just have rotated in: the token may be good, retry soon.
                raise ApiError(503, "identity_unavailable", "cannot verify tokens yet")
            raise ApiError(401, "unauthorized", "invalid token")
        return self._decode(token, key, alg)

    def _decode(self, token: str, key: jwt.PyJWK, alg: str) -> Caller:
        s = self.settings
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
                audience=s.audience,
                issuer=s.issuer,
                leeway=s.leeway_s,
                options={"require": ["exp", "iat", "sub", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise ApiError(401, "unauthorized", "token expired") from None
        except (jwt.PyJWTError, TypeError, ValueError):
            # TypeError: an algorithm named for a key of another type (ES256 over an RSA key)
            raise ApiError(401, "unauthorized", "invalid token") from None
        login = claims["sub"]
        if not valid_login(login):
            raise ApiError(401, "unauthorized", "the token's subject is not a usable login")
        return Caller(
            login,
            float(claims["iat"]),
            float(claims["exp"]) + s.leeway_s,
            _events(claims.get(s.events_claim)),
            bool(s.admin_claim) and claims.get(s.admin_claim) is True,
        )


def _events(value: object) -> frozenset[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ApiError(401, "unauthorized", "the token's event list is malformed")
    return frozenset(value)


class Revocations:
    """login -> revoked up to (ms). Loaded from Redis by each process every poll; an admin's
    revocation is applied at once by the process that received it."""

    def __init__(self) -> None:
        self.before_ms: dict[str, int] = {}

    def load(self, entries: Mapping[str, int]) -> None:
        self.before_ms = dict(entries)

    def add(self, login: str, at_ms: int) -> None:
        self.before_ms[login] = max(at_ms, self.before_ms.get(login, 0))

    def revoked(self, caller: Caller) -> bool:
        # JWT `iat` has one-second resolution: a token issued in the second of the revocation
        # is revoked too (the safe side).
        before = self.before_ms.get(caller.login)
        return before is not None and int(caller.issued_s) * 1000 <= before


class Identity:
    def __init__(
        self,
        *,
        admin_token: str,
        demo: DemoTokens | None = None,
        jwt_tokens: JwtTokens | None = None,
        revocations: Revocations | None = None,
    ) -> None:
        assert (demo is None) != (jwt_tokens is None), "exactly one kind of buyer token"
        self.demo = demo
        self.jwt = jwt_tokens
        self.admin_token = admin_token.encode()
        self.revocations = revocations or Revocations()
        self._known: dict[str, Caller] = {}
        self._generation = 0  # of the identity provider's keys the known tokens were checked with

    def _verify(self, token: str) -> Caller:
        if self.jwt is not None and self.jwt.jwks.generation != self._generation:
            self._known.clear()  # the provider's keys changed: every token is checked again
            self._generation = self.jwt.jwks.generation
        known = self._known.get(token)
        if known is not None and time.time() < known.expires_s:
            return known
        verifier = self.demo or self.jwt
        assert verifier is not None
        caller = verifier.verify(token)
        if len(self._known) >= TOKEN_CACHE_MAX:
            self._known.clear()
        self._known[token] = caller
        return caller

    def peek_login(self, token: str) -> str | None:
        """The login a buyer token names, unverified: only to recognise a retried claim that
        may be answered without proof of identity (a sold-out refusal, api/claim_front/)."""
        verifier = self.demo or self.jwt
        assert verifier is not None
        return verifier.peek_login(token)

    def names(self, token: str, login: str) -> bool | None:
        """Whether `token` is a good buyer token (not revoked) of `login`; None when that
        cannot be told now (the identity provider's keys unavailable)."""
        try:
            caller = self._verify(token)
        except ApiError as exc:
            return None if exc.status == 503 else False
        return caller.login == login and not self.revocations.revoked(caller)

    def caller(self, request: Request, event_id: str | None = None) -> Caller:
        caller = self._verify(bearer_token(request))
        if self.revocations.revoked(caller):
            raise ApiError(401, "token_revoked", "this token was revoked; log in again")
        if event_id is not None and caller.events is not None and event_id not in caller.events:
            raise ApiError(403, "token_scope", "this token is not valid for this event")
        return caller

    def admin(self, request: Request) -> str:
        """The acting admin's name for audit records: `admin` for the admin token, the JWT's
        subject for an admin JWT. Compared as bytes: non-ASCII is a wrong token, not a crash."""
        raw = bearer_bytes(request)
        if raw is not None and hmac.compare_digest(raw, self.admin_token):
            return "admin"
        if self.jwt is not None and raw is not None and raw.isascii():
            caller = self.caller(request)
            if caller.admin:
                return caller.login
        raise ApiError(401, "unauthorized", "admin credential required")

    def issue_demo(self, login: str, events: Iterable[str] = ()) -> str:
        if self.demo is None:
            raise ApiError(
                404, "login_disabled", "this deployment takes tokens from its identity provider"
            )
        scoped = list(events)
        return self.demo.issue(login, scoped[0] if scoped else None)
