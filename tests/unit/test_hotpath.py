"""api/claim_front/route.py: the direct lane answers its one route exactly as the app would, and
leaves everything else (other paths, other methods, the lifespan, app.state) to the app."""

import contextlib
from collections.abc import AsyncIterator

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from api.claim_front.route import HotRoute


async def claim(request: Request) -> Response:
    return JSONResponse(
        {
            "lane": request.scope.get("lane", "router"),
            "event": request.path_params["event_id"],
            "state": request.app.state.marker,
            "body": (await request.body()).decode(),
        },
        201,
    )


async def hot_claim(request: Request) -> Response:
    request.scope["lane"] = "hot"
    return await claim(request)


def make() -> HotRoute:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        app.state.marker = "started"
        yield

    app = Starlette(
        routes=[
            Route("/v1/events/{event_id}/holds", claim, methods=["POST"]),
            Route("/v1/events/{event_id}/holds/{hold_id}", claim, methods=["POST"]),
        ],
        lifespan=lifespan,
    )
    return HotRoute(app, "POST", "/v1/events/{event_id}/holds", hot_claim)


async def test_the_hot_route_and_everything_else() -> None:
    app = make()
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as http,
    ):
        r = await http.post("/v1/events/e.1/holds", content=b'{"a":1}')
        assert r.status_code == 201
        assert r.json() == {"lane": "hot", "event": "e.1", "state": "started", "body": '{"a":1}'}
        # One segment per parameter: a longer path is another route, served by the router.
        r = await http.post("/v1/events/e1/holds/h1")
        assert (r.status_code, r.json()["lane"]) == (201, "router")
        assert (await http.get("/v1/events/e1/holds")).status_code == 405
        assert (await http.post("/v1/events/e1/holds/")).status_code in (307, 404)
        assert (await http.post("/v1/events//holds")).status_code == 404
        assert app.state.marker == "started"  # app attributes reach through the lane
