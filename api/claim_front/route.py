"""The claim front's route: the claim request skips Starlette's middleware and router (ADR 0048;
first ADR 0013).

Under the burst, a Starlette app spends about a quarter of each request's CPU in its own layers
(two exception middlewares wrapping `send`, the router trying each route's regex, the
request/response wrappers), none of which the claim needs: its handler is wrapped by
`api.context.endpoint` (or the baseline's equivalent), which already turns every failure into a
JSON error and never raises. `HotRoute` matches one method and path pattern itself and calls
that handler with an ordinary Starlette `Request`; every other request, and the lifespan, go to
the app unchanged. ADR 0013 records why only this route, and what it must keep.

The same class fronts the PostgreSQL baseline, so the benchmarks compare the stores behind the
same HTTP layer."""

import re
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

Handler = Callable[[Request], Awaitable[Response]]
Next = Callable[[Scope, Receive, Send], Awaitable[None]]
Lane = Callable[[Scope, Receive, Send, Next], Awaitable[None]]


class HotRoute:
    early = False  # the connection may hold this route's requests (claim_front/connection.py)

    def __init__(
        self,
        app: ASGIApp,
        method: str,
        path: str,
        handler: Handler,
        lane: Lane | None = None,
        *,
        early: bool = False,
    ) -> None:
        """`path` uses Starlette's `{name}` syntax; each parameter matches one path segment.
        `lane`: given the raw ASGI call and the way to the handler, it answers itself or sends
        the request on (api/claim_front/asgi_lane.py). `early`: `onsale serve`'s connections
        look at a request of this route before it becomes an ASGI call (the claim)."""
        self.app = app
        self.method = method
        self.handler = handler
        self.lane = lane
        self.early = early
        parts = re.split(r"\{(\w+)\}", path)  # literal, name, literal, name, ...
        self.pattern = re.compile(
            "".join(re.escape(p) if i % 2 == 0 else f"(?P<{p}>[^/]+)" for i, p in enumerate(parts))
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)  # app.state, app.routes, ... stay reachable

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == self.method:
            m = self.pattern.fullmatch(scope["path"])
            if m is not None:
                scope["app"] = self.app  # what Starlette sets: request.app.state works
                scope["path_params"] = m.groupdict()
                if self.lane is not None:
                    await self.lane(scope, receive, send, self.handle)
                else:
                    await self.handle(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self.handler(Request(scope, receive))
        await response(scope, receive, send)
