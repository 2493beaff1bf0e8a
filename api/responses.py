"""JSON responses via orjson, and bounded JSON request bodies."""

from typing import Any

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from api.errors import ApiError


def json_response(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


async def read_body(request: Request, max_bytes: int) -> bytes:
    """The raw body, refused past `max_bytes` (checked on the header and while streaming)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ApiError(400, "invalid_request", "bad Content-Length")
        if int(declared) > max_bytes:
            raise ApiError(413, "body_too_large", f"body larger than {max_bytes} bytes")
    # The ASGI messages read here, as Request.stream() reads them, without its generator
    # (about 4 µs of a claim); every body is read once, by this.
    chunks: list[bytes] = []
    size = 0
    receive = request.receive
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        if message["type"] != "http.request":
            continue
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            raise ApiError(413, "body_too_large", f"body larger than {max_bytes} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def read_json(request: Request, max_bytes: int, *, allow_empty: bool = False) -> Any:
    raw = await read_body(request, max_bytes)
    return parse_json(raw, request.headers.get("content-type"), allow_empty=allow_empty)


def parse_json(raw: bytes, content_type: str | None, *, allow_empty: bool = False) -> Any:
    """The body as JSON (`{}` for an empty one when allowed). CPU only: a large body can be
    parsed off the event loop (api/routes/admin.py)."""
    if not raw.strip():
        if allow_empty:
            return {}
        raise ApiError(400, "invalid_request", "a JSON body is required")
    if "json" not in (content_type or "application/json"):
        raise ApiError(415, "unsupported_media_type", "send application/json")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ApiError(400, "invalid_request", "body is not valid JSON") from None
