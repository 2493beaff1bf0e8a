"""A production token's check (api/identity.py `JwtTokens.verify`) reads the header's key id and
algorithm itself, to choose the key, and leaves every check to PyJWT's decode. It must accept
and refuse exactly the tokens the plain PyJWT path accepts and refuses (its unverified header,
then its decode): the same tokens, their headers rewritten, their segments mangled."""

import base64
import time

import jwt
import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from hypothesis import given, settings
from hypothesis import strategies as st

from api.errors import ApiError
from api.identity import Jwks, JwtSettings, JwtTokens

SETTINGS = JwtSettings("http://127.0.0.1:9/jwks", "iss", "aud", jwks_retry_s=10**9)
RSA_KEY = rsa.generate_private_key(65537, 2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
KEYS = {"r1": ("RS256", RSA_KEY), "e1": ("ES256", EC_KEY)}


def jwks() -> Jwks:
    keys = Jwks(SETTINGS)
    for kid, (alg, key) in KEYS.items():
        public = jwt.algorithms.get_default_algorithms()[alg].to_jwk(key.public_key(), as_dict=True)
        keys.keys[kid] = jwt.PyJWK.from_dict({**public, "kid": kid, "alg": alg, "use": "sig"})
    keys._early_at = time.monotonic()  # no early fetch for an unknown key id here
    return keys


TOKENS = JwtTokens(SETTINGS, jwks())


def reference(token: str) -> str:
    """The plain PyJWT path: the login, or "401"."""
    try:
        header = jwt.get_unverified_header(token)
        alg, kid = header.get("alg"), header.get("kid")
        if alg not in SETTINGS.algorithms or not isinstance(kid, str) or kid not in KEYS:
            return "401"
        claims = jwt.decode(
            token,
            TOKENS.jwks.keys[kid].key,
            algorithms=[alg],
            audience="aud",
            issuer="iss",
            leeway=SETTINGS.leeway_s,
            options={"require": ["exp", "iat", "sub", "iss", "aud"]},
        )
    except (jwt.PyJWTError, TypeError, ValueError):  # TypeError: ES256 over an RSA key, ...
        return "401"
    return str(claims["sub"])


def outcome(token: str) -> str:
    try:
        return TOKENS.verify(token).login
    except ApiError as exc:
        assert exc.status == 401, exc
        return "401"


def seg(value: object) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(value)).rstrip(b"=").decode()


HEADERS = st.fixed_dictionaries(
    {},
    optional={
        "alg": st.sampled_from(["RS256", "ES256", "HS256", "none", "rs256", ""]),
        "kid": st.one_of(st.sampled_from(["r1", "e1", "x"]), st.integers(-(2**40), 2**40)),
        "typ": st.just("JWT"),
    },
)
MANGLE = st.sampled_from(["", "=", "==", "===", "!", "é", " ", ".", "A"])


@settings(max_examples=300, deadline=None)
@given(
    kid=st.sampled_from(sorted(KEYS)),
    header=HEADERS,
    rewrite=st.booleans(),
    mangle=MANGLE,
    where=st.integers(0, 2),
    aud=st.sampled_from(["aud", "other"]),
    age_s=st.sampled_from([0, 7200]),
)
def test_the_header_read_accepts_and_refuses_what_pyjwt_does(
    kid: str,
    header: dict[str, object],
    rewrite: bool,
    mangle: str,
    where: int,
    aud: str,
    age_s: int,
) -> None:
    alg, key = KEYS[kid]
    now = int(time.time()) - age_s
    claims = {"sub": "buyer-1", "iss": "iss", "aud": aud, "iat": now, "exp": now + 3600}
    token = jwt.encode(claims, key, algorithm=alg, headers={"kid": kid})
    parts = token.split(".")
    if rewrite:  # another header over the same signature
        parts[0] = seg(header)
    parts[where] += mangle
    token = ".".join(parts)
    assert outcome(token) == reference(token)


@pytest.mark.parametrize("kid", sorted(KEYS))
def test_a_good_token_of_each_algorithm_is_accepted(kid: str) -> None:
    alg, key = KEYS[kid]
    now = int(time.time())
    claims = {"sub": "buyer-2", "iss": "iss", "aud": "aud", "iat": now, "exp": now + 60}
    token = jwt.encode(claims, key, algorithm=alg, headers={"kid": kid})
    assert outcome(token) == reference(token) == "buyer-2"


@given(st.text(max_size=120))
def test_no_text_is_anything_but_refused(text: str) -> None:
    assert outcome(text) == reference(text) == "401"


def test_an_algorithm_named_for_a_key_of_another_type_is_refused_not_a_500() -> None:
    """ES256 named over the RSA key's id: PyJWT raises TypeError, not one of its own errors;
    the check answered 500 before."""
    now = int(time.time())
    claims = {"sub": "buyer-3", "iss": "iss", "aud": "aud", "iat": now, "exp": now + 60}
    token = jwt.encode(claims, EC_KEY, algorithm="ES256", headers={"kid": "r1"})
    with pytest.raises(ApiError) as refused:
        TOKENS.verify(token)
    assert (refused.value.status, refused.value.message) == (401, "invalid token")
