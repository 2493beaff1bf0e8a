"""What checking a buyer's token costs the API, per request, in process.

    python -m loadtest.bench.token_cost [--rounds 5] [--loops 2000]

The benchmarks' load tools log in with demo tokens (a signed name, itsdangerous); a production
deployment checks its identity provider's JWTs (api/identity.py `JwtTokens`, RS256 or ES256
from a JWKS). For each: µs per `verify` of a good token, best of `rounds`, and, for the JWTs,
the signature check alone (cryptography's verify of the same signing input), which is the floor
of any JWT library. No server is involved: the keys are made here and set as the JWKS."""

import argparse
import time
import timeit
from collections.abc import Callable

import jwt
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from jwt.api_jws import PyJWS
from rich.console import Console
from rich.table import Table

from api.identity import DemoTokens, Jwks, JwtSettings, JwtTokens

Row = tuple[str, float, float | None, float | None]  # kind, verify, signature alone, segments
SETTINGS = JwtSettings("http://127.0.0.1:9/jwks", "iss", "aud", jwks_retry_s=10**9)


def best_us(fn: Callable[[], object], loops: int, rounds: int) -> float:
    return min(timeit.repeat(fn, number=loops, repeat=rounds)) / loops * 1e6


def measure(loops: int, rounds: int) -> list[Row]:
    """(token kind, µs per verify, µs of the signature check alone, µs of PyJWT's segment
    decoding)."""
    demo = DemoTokens("d" * 32, ttl_s=3600)
    token = demo.issue("buyer-1")
    rows: list[Row] = [
        ("demo (itsdangerous)", best_us(lambda: demo.verify(token), loops * 10, rounds), None, None)
    ]
    jwks = Jwks(SETTINGS)
    jwks._early_at = time.monotonic()  # never fetch: the keys are set below
    tokens = JwtTokens(SETTINGS, jwks)
    rows.append(jwt_row(tokens, "RS256", rsa.generate_private_key(65537, 2048), loops, rounds))
    rows.append(jwt_row(tokens, "ES256", ec.generate_private_key(ec.SECP256R1()), loops, rounds))
    return rows


def jwt_row(
    tokens: JwtTokens,
    alg: str,
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey,
    loops: int,
    rounds: int,
) -> Row:
    """A good token of `alg` checked as the API checks it, and its signature alone."""
    public = key.public_key()
    jwk = jwt.algorithms.get_default_algorithms()[alg].to_jwk(public, as_dict=True)
    tokens.jwks.keys[alg] = jwt.PyJWK.from_dict({**jwk, "kid": alg, "alg": alg, "use": "sig"})
    now = int(time.time())
    claims = {"sub": "buyer-1", "iss": "iss", "aud": "aud", "iat": now, "exp": now + 3600}
    signed = jwt.encode(claims, key, algorithm=alg, headers={"kid": alg})
    assert tokens.verify(signed).login == "buyer-1"
    head, _, sig = signed.rpartition(".")
    signing_input, raw = head.encode(), jwt.utils.base64url_decode(sig)
    if isinstance(public, rsa.RSAPublicKey):
        rsa_key = public

        def alone() -> None:
            rsa_key.verify(raw, signing_input, padding.PKCS1v15(), hashes.SHA256())
    else:
        assert isinstance(public, ec.EllipticCurvePublicKey)
        ec_key, der = public, jwt.utils.raw_to_der_signature(raw, ec.SECP256R1())

        def alone() -> None:
            ec_key.verify(der, signing_input, ec.ECDSA(hashes.SHA256()))

    segments = [s.encode() for s in signed.split(".")]

    def decoded() -> None:
        for segment in segments:
            PyJWS._decode_base64url_segment(segment, "segment")

    return (
        f"JWT {alg} (PyJWT)",
        best_us(lambda: tokens.verify(signed), loops, rounds),
        best_us(alone, loops, rounds),
        best_us(decoded, loops, rounds),
    )


def report(rows: list[Row]) -> Table:
    t = Table(title="a token's check, µs per request (best of the rounds)")
    for col in ("token", "verify µs", "signature alone µs", "of which PyJWT's segments µs"):
        t.add_column(col, justify="left" if col == "token" else "right")
    for kind, us, alone, segments in rows:
        t.add_row(
            kind,
            f"{us:.1f}",
            "" if alone is None else f"{alone:.1f}",
            "" if segments is None else f"{segments:.1f}",
        )
    return t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--loops", type=int, default=2_000)
    args = ap.parse_args()
    Console().print(report(measure(args.loops, args.rounds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
