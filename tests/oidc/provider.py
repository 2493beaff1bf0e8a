"""A small OpenID provider for the tests (ADR 0050): OpenID Connect authorization code with PKCE
for a public client, refresh tokens, and access tokens as JWTs (RFC 9068) the API checks like a
real provider's. The protocol is Authlib's (its Flask authorization server, its OpenID Connect
and PKCE extensions, its JWT access token generator); this file gives it in-memory users,
codes and tokens, a login form and a discovery document. Any name may sign in; a name starting
with `admin` gets the admin claim. Run in a thread on a spare loopback port."""

import logging
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlsplit

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import ClientMixin, grants
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc9068 import JWTBearerTokenGenerator
from authlib.oidc.core import UserInfo
from authlib.oidc.core.grants import OpenIDCode
from cryptography.hazmat.primitives.asymmetric import rsa
from flask import Flask, Response, request
from joserfc.jwk import KeySet, RSAKey
from markupsafe import escape
from werkzeug.serving import make_server

logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise

AUDIENCE = "onsale"
ADMIN_CLAIM = "onsale_admin"
SCOPES = "openid profile"
COOKIE = "op_session"


@dataclass(frozen=True)
class User:
    name: str

    def get_user_id(self) -> str:
        return self.name


@dataclass(frozen=True)
class Client(ClientMixin):
    """A public client (a browser page): no secret, PKCE required, its redirect URIs exact."""

    client_id: str
    redirect_uris: tuple[str, ...]

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return self.redirect_uris[0]

    def get_allowed_scope(self, scope: str) -> str:
        return " ".join(s for s in scope.split() if s in SCOPES.split())

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        return False

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == "none"

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in ("authorization_code", "refresh_token")


@dataclass
class Code:
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    user: User
    nonce: str | None
    code_challenge: str | None
    code_challenge_method: str | None
    auth_time: int = field(default_factory=lambda: int(time.time()))

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope

    def get_nonce(self) -> str | None:
        return self.nonce

    def get_auth_time(self) -> int:
        return self.auth_time

    def get_acr(self) -> None:
        return None

    def get_amr(self) -> None:
        return None


@dataclass
class Refresh:
    token: str
    client_id: str
    scope: str
    user: User
    revoked: bool = False

    def check_client(self, client: Client) -> bool:
        return client.client_id == self.client_id

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return 86_400

    def is_expired(self) -> bool:
        return False

    def is_revoked(self) -> bool:
        return self.revoked

    def get_user(self) -> User:
        return self.user


class OpenIdProvider:
    """The provider: its issuer URL once started, its clients, what it issued."""

    def __init__(self, access_token_ttl_s: int = 300) -> None:
        self.key = RSAKey.import_key(rsa.generate_private_key(public_exponent=65537, key_size=2048))
        self.key.ensure_kid()
        self.clients: dict[str, Client] = {}
        self.codes: dict[str, Code] = {}
        self.refresh: dict[str, Refresh] = {}
        self.sessions: dict[str, User] = {}
        self.cors_origins: set[str] = set()
        self.ttl_s = access_token_ttl_s
        self.app = Flask(__name__)
        self.server = make_server("127.0.0.1", 0, self.app, threaded=True)
        self.issuer = f"http://127.0.0.1:{self.server.server_port}"
        self.oauth = self._authorization_server()
        self._routes()
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def add_client(self, client_id: str, *redirect_uris: str) -> None:
        self.clients[client_id] = Client(client_id, tuple(redirect_uris))
        for uri in redirect_uris:
            parts = urlsplit(uri)
            self.cors_origins.add(f"{parts.scheme}://{parts.netloc}")

    def start(self) -> "OpenIdProvider":
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()

    def jwks(self) -> dict[str, Any]:
        return KeySet([self.key]).as_dict(private=False)

    def _authorization_server(self) -> AuthorizationServer:
        provider = self

        class Tokens(JWTBearerTokenGenerator):
            def get_jwks(self) -> KeySet:
                return KeySet([provider.key])

            def get_audiences(self, client: Client, user: User, scope: str) -> str:
                return AUDIENCE

            def get_extra_claims(
                self, client: Client, grant_type: str, user: User, scope: str
            ) -> dict[str, Any]:
                return {ADMIN_CLAIM: True} if user.name.startswith("admin") else {}

        class OpenID(OpenIDCode):
            def resolve_client_private_key(self, client: Client) -> KeySet:
                return KeySet([provider.key])

            def get_client_claims(self, client: Client) -> dict[str, Any]:
                return {"iss": provider.issuer, "aud": [client.client_id]}

            def exists_nonce(self, nonce: str, request: Any) -> bool:
                return any(c.nonce == nonce for c in provider.codes.values())

            def generate_user_info(self, user: User, scope: str) -> UserInfo:
                return UserInfo(sub=user.name, name=user.name)

        class CodeGrant(grants.AuthorizationCodeGrant):
            TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = ["none"]

            def save_authorization_code(self, code: str, request: Any) -> None:
                data = request.payload.data
                provider.codes[code] = Code(
                    code, request.client.client_id, request.payload.redirect_uri,
                    request.payload.scope, request.user, data.get("nonce"),
                    data.get("code_challenge"), data.get("code_challenge_method"),
                )  # fmt: skip

            def query_authorization_code(self, code: str, client: Client) -> Code | None:
                found = provider.codes.get(code)
                return found if found is not None and found.client_id == client.client_id else None

            def delete_authorization_code(self, authorization_code: Code) -> None:
                provider.codes.pop(authorization_code.code, None)

            def authenticate_user(self, authorization_code: Code) -> User:
                return authorization_code.user

        class RefreshGrant(grants.RefreshTokenGrant):
            TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = ["none"]
            INCLUDE_NEW_REFRESH_TOKEN = True  # rotated: each used once

            def authenticate_refresh_token(self, refresh_token: str) -> Refresh | None:
                found = provider.refresh.get(refresh_token)
                return found if found is not None and not found.revoked else None

            def authenticate_user(self, refresh_token: Refresh) -> User:
                return refresh_token.user

            def revoke_old_credential(self, refresh_token: Refresh) -> None:
                refresh_token.revoked = True

        def query_client(client_id: str) -> Client | None:
            return provider.clients.get(client_id)

        def save_token(token: dict[str, Any], request: Any) -> None:
            if token.get("refresh_token"):
                provider.refresh[token["refresh_token"]] = Refresh(
                    token["refresh_token"], request.client.client_id, token["scope"], request.user
                )

        server = AuthorizationServer(self.app, query_client=query_client, save_token=save_token)
        server.register_token_generator(
            "default",
            Tokens(
                self.issuer,
                refresh_token_generator=lambda **_: secrets.token_urlsafe(32),
                expires_generator=lambda *_: self.ttl_s,
            ),
        )
        server.register_grant(CodeGrant, [OpenID(require_nonce=True), CodeChallenge(required=True)])
        server.register_grant(RefreshGrant)
        return server

    def _routes(self) -> None:
        app, provider = self.app, self

        @app.after_request
        def cors(response: Response) -> Response:
            origin = request.headers.get("Origin", "")
            if origin in provider.cors_origins:  # the pages call discovery and token endpoints
                response.headers["Access-Control-Allow-Origin"] = origin
                response.headers["Access-Control-Allow-Headers"] = "Content-Type"
            return response

        @app.get("/.well-known/openid-configuration")
        def discovery() -> dict[str, Any]:
            return {
                "issuer": provider.issuer,
                "authorization_endpoint": f"{provider.issuer}/authorize",
                "token_endpoint": f"{provider.issuer}/token",
                "jwks_uri": f"{provider.issuer}/jwks",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "scopes_supported": SCOPES.split(),
            }

        @app.get("/jwks")
        def jwks() -> dict[str, Any]:
            return provider.jwks()

        @app.route("/token", methods=["POST", "OPTIONS"])
        def token() -> Any:
            if request.method == "OPTIONS":
                return Response(status=204)
            return provider.oauth.create_token_response()

        @app.route("/authorize", methods=["GET", "POST"])
        def authorize() -> Any:
            user = provider.sessions.get(request.cookies.get(COOKIE, ""))
            signed_in = None
            if request.method == "POST":  # the login form: any name
                user = User(request.form["username"].strip())
                signed_in = secrets.token_urlsafe(16)
                provider.sessions[signed_in] = user
            try:
                grant = provider.oauth.get_consent_grant(end_user=user)
            except OAuth2Error as error:  # prompt=none without a session: login_required
                return provider.oauth.handle_error_response(None, error)
            if user is None:
                return login_form()
            answer = provider.oauth.create_authorization_response(grant_user=user, grant=grant)
            if signed_in:
                answer.set_cookie(COOKIE, signed_in, httponly=True, samesite="Lax")
            return answer

        def login_form() -> str:
            action = escape(request.full_path)
            return (
                "<!doctype html><title>Test provider</title><h1>Sign in to the test provider</h1>"
                f'<form method="post" action="{action}"><label>Name <input name="username" '
                'id="username" required></label> <button id="sign-in">Sign in</button></form>'
            )

    def sign_out_everyone(self) -> None:
        self.sessions.clear()


def running_provider(**options: Any) -> OpenIdProvider:
    return OpenIdProvider(**options).start()
