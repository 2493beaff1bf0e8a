"""Identity routes: how the pages sign in (ADR 0050), the demo's name-only login, and an
admin's revocation of a login's tokens (api/identity.py, ADR 0019)."""

from starlette.requests import Request
from starlette.responses import Response

from api.context import ctx, endpoint
from api.contract import admin as admin_answers
from api.contract import service as answers
from api.errors import ApiError
from api.identity import valid_login
from api.responses import json_response, read_json
from api.validate import ident, obj

OIDC_SCOPE = "openid profile"


@endpoint("auth_config")
async def auth_config(request: Request) -> Response:
    """How the browser pages sign in: through the identity provider (its issuer, whose
    discovery document names the endpoints, and the pages' public client), and whether the
    demo's name login is on."""
    settings = ctx(request).settings
    provider = settings.pages_sign_in
    oidc: answers.OidcProvider | None = None
    if provider is not None:
        oidc = {
            "issuer": provider.issuer,
            "client_id": provider.oidc_client_id,
            "scope": OIDC_SCOPE,
        }
    answer: answers.AuthConfig = {"demo_login": settings.demo_login, "oidc": oidc}
    return json_response(answer)


@endpoint("login")
async def login(request: Request) -> Response:
    """Demo and load runs only (ONSALE_DEMO_LOGIN=1): any name gets a signed bearer token,
    limited to one event when the body names it. 404 login_disabled otherwise."""
    c = ctx(request)
    c.addresses.take(request)
    body = obj(await read_json(request, c.settings.body_max_bytes))
    name = ident(body, "login")
    assert name is not None
    event_id = ident(body, "event_id", required=False)
    token = c.identity.issue_demo(name, [event_id] if event_id else [])
    answer: answers.LoginToken = {"token": token, "login": name, "event_id": event_id}
    return json_response(answer)


@endpoint("revoke_login")
async def revoke_login(request: Request) -> Response:
    """Every token of the login issued up to now stops working, on every API process within
    ONSALE_REVOCATION_POLL_MS (at once on this one)."""
    c = ctx(request)
    c.require_admin(request)
    name = str(request.path_params["login"])
    if not valid_login(name):
        raise ApiError(400, "invalid_request", "login must be 1-128 printable ASCII characters")
    at_ms = await c.store.revoked.revoke(name)
    c.identity.revocations.add(name, at_ms)
    revoked: admin_answers.LoginRevoked = {"login": name, "revoked_before_ms": at_ms}
    return json_response(revoked)
