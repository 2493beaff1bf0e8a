"""The service's own answers (api/routes/meta.py, logins.py): health, readiness, this document,
and a demo login's token."""

from typing import Annotated, Any, NotRequired, TypedDict

from msgspec import Meta

from api.contract.atoms import Id


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


class LoginToken(TypedDict):
    """A bearer token for the login (for `event_id` only, when named)."""

    token: str
    login: Id
    event_id: Id | None


# Each answer and its example (api/contract/document.py).
EXAMPLES: dict[type, Any] = {
    LoginRequest: LoginRequest(login="alice", event_id="spring-gala"),
    Health: Health(ok=True),
    Readiness: Readiness(ok=True, scripts=21),
    OpenApiDocument: OpenApiDocument(
        openapi="3.0.3", info={"title": "onsale checkout API", "version": "1"}, paths={}
    ),
    LoginToken: LoginToken(
        token="eyJsIjoiYWxpY2UiLCJlIjoiZXYxIn0.aw8XTA.GHSiNPZ8IapAMaxY",
        login="alice",
        event_id="spring-gala",
    ),
}
