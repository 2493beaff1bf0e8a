"""The service's own answers (api/routes/meta.py, logins.py): health, readiness, this document,
how the pages sign in, and a demo login's token (and what its request sends)."""

from typing import Annotated, Any, NotRequired, TypedDict

from msgspec import Meta

from api.contract.atoms import EVENT_ID, Id


class LoginRequest(TypedDict):
    """A name (any, in the demo) and optionally the one event the token is for."""

    login: Id
    event_id: NotRequired[Id]


class Health(TypedDict):
    ok: bool


class Readiness(TypedDict):
    ok: bool
    scripts: Annotated[int, Meta(description="scripts loaded")]


class OpenApiDocument(TypedDict):
    """This document."""

    openapi: str
    info: dict[str, Any]
    paths: dict[str, Any]
    components: NotRequired[dict[str, Any]]
    tags: NotRequired[list[dict[str, Any]]]


class OidcProvider(TypedDict):
    """Sign in through this OpenID provider: authorization code with PKCE; its access token is
    the bearer token."""

    issuer: Annotated[str, Meta(description="its discovery document's base")]
    client_id: Annotated[str, Meta(description="the pages' public client")]
    scope: str


class AuthConfig(TypedDict):
    """How the browser pages sign in (ADR 0050)."""

    demo_login: Annotated[bool, Meta(description="POST /v1/login is on (demo runs)")]
    oidc: OidcProvider | None


class LoginToken(TypedDict):
    """A bearer token for the login (for `event_id` only, when named)."""

    token: str
    login: Id
    event_id: Id | None


# Each answer and its example (api/contract/document.py).
EXAMPLES: dict[type, Any] = {
    LoginRequest: LoginRequest(login="alice", event_id=EVENT_ID),
    Health: Health(ok=True),
    Readiness: Readiness(ok=True, scripts=21),
    OpenApiDocument: OpenApiDocument(
        openapi="3.0.3", info={"title": "onsale checkout API", "version": "1"}, paths={}
    ),
    AuthConfig: AuthConfig(demo_login=False, oidc=None),
    OidcProvider: OidcProvider(
        issuer="https://id.example.com", client_id="onsale-pages", scope="openid profile"
    ),
    LoginToken: LoginToken(
        token="eyJsIjoiYWxpY2UiLCJlIjoiZXYxIn0.aw8XTA.GHSiNPZ8IapAMaxY",
        login="alice",
        event_id=EVENT_ID,
    ),
}
