"""A local identity provider for tests and load tools: it signs buyer tokens (JWTs, RS256) with
its own keys and publishes the public ones as a JWKS over HTTP on loopback, as a production
provider does (ADR 0019). The API is pointed at it with `api_env()`."""

import http.server
import threading
import time
from typing import Any

import jwt
import orjson
from cryptography.hazmat.primitives.asymmetric import rsa

ISSUER, AUDIENCE = "https://id.example.test/", "onsale-api"


class IdentityProvider:
    """Signs tokens with its own RSA keys and publishes the public ones as a JWKS."""

    def __init__(self) -> None:
        self.keys: dict[str, rsa.RSAPrivateKey] = {}
        self.published: list[str] = []
        self.fetches = 0
        self.add_key("k1")
        provider = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                provider.fetches += 1
                body = provider.jwks()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/.well-known/jwks.json"

    def add_key(self, kid: str, *, publish: bool = True) -> None:
        self.keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        if publish:
            self.published.append(kid)

    def jwks(self) -> bytes:
        keys = []
        for kid in self.published:
            jwk = orjson.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.keys[kid].public_key()))
            keys.append({**jwk, "kid": kid, "use": "sig", "alg": "RS256"})
        return orjson.dumps({"keys": keys})

    def token(self, sub: str = "alice", *, kid: str = "k1", **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 600}
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, self.keys[kid], algorithm="RS256", headers={"kid": kid})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def api_env(self) -> dict[str, str]:
        """The API's settings that make it check this provider's tokens (the demo login off)."""
        return {
            "ONSALE_DEMO_LOGIN": "0",
            "ONSALE_JWT_JWKS_URL": self.url,
            "ONSALE_JWT_ISSUER": ISSUER,
            "ONSALE_JWT_AUDIENCE": AUDIENCE,
        }
