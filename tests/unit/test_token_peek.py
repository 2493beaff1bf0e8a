"""The unverified read of a token's login (api/identity.py `peek_claim`), used only by the
sold-out lane to recognise a retried claim: it gives what the libraries' own decoding gives for
every well-formed token, and None, never an exception, for anything else."""

import base64

import jwt
import orjson
from hypothesis import given
from hypothesis import strategies as st

from api.identity import DemoTokens, JwtSettings, JwtTokens, peek_claim

LOGINS = st.text(min_size=1, max_size=40)
DEMO = DemoTokens("d" * 32, 3600)
JWT = JwtTokens(JwtSettings("http://127.0.0.1:9/jwks", "iss", "aud"), None)  # type: ignore[arg-type]


@given(LOGINS, st.one_of(st.none(), st.text(min_size=1, max_size=20)))
def test_a_demo_token_is_read_as_its_signer_reads_it(login: str, event_id: str | None) -> None:
    token = DEMO.issue(login, event_id)
    assert DEMO.verify(token).login == login
    # itsdangerous compresses a payload when that is shorter: never inflated unverified
    assert DEMO.peek_login(token) == (None if token.startswith(".") else login)


@given(LOGINS, st.dictionaries(st.text(max_size=8), st.integers(), max_size=3))
def test_a_jwt_is_read_as_pyjwt_reads_it_unverified(login: str, extra: dict[str, int]) -> None:
    token = jwt.encode({**extra, "sub": login}, "k" * 32, algorithm="HS256")
    unverified = jwt.decode(token, options={"verify_signature": False})
    assert JWT.peek_login(token) == unverified["sub"] == login


def _segment(value: object) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(value)).rstrip(b"=").decode()


def test_what_is_not_a_readable_login_is_none() -> None:
    assert peek_claim(_segment({"sub": "a"}), "sub") == "a"
    for bad in (
        _segment({"sub": 12}),  # not a string
        _segment({"sub": ""}),
        _segment({"other": "a"}),
        _segment(["sub"]),
        _segment("sub"),
        _segment(7),
        "",
        "!!!!",
        "é" * 8,
        base64.urlsafe_b64encode(b"{not json").decode(),
    ):
        assert peek_claim(bad, "sub") is None, bad
    compressed = "." + _segment({"l": "a"}) + ".x.y"
    assert DEMO.peek_login(compressed) is None  # never inflated unverified
    assert JWT.peek_login("a.b") is None and JWT.peek_login("a.b.c.d") is None


@given(st.text(max_size=200))
def test_no_text_makes_it_raise(text: str) -> None:
    assert peek_claim(text, "sub") is None or isinstance(peek_claim(text, "sub"), str)
    assert DEMO.peek_login(text) is None or isinstance(DEMO.peek_login(text), str)
    assert JWT.peek_login(text) is None or isinstance(JWT.peek_login(text), str)
