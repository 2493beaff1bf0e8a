"""What a claim's bytes cost the API process, each beside the library's own way in the same run:

    python -m loadtest.bench.wire_cost [--rounds 5] [--loops 100000]

- packing the claim's FCALL arguments (engine/store/pipeline.py `bulk_args`) against redis-py's
  encoder and a bulk string per argument, as the pipeline packed them before;
- reading its body, `{}` with its Content-Length (api/responses.py `read_body`) against
  Starlette's `Request.body()`, with the request's headers already read (the claim has read its
  token by then).

Each pair is first checked to give the same bytes; then µs per claim, the two ways alternated
round after round, medians. No server, about 20 seconds."""

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from redis._parsers.encoders import Encoder
from rich.console import Console
from rich.table import Table
from starlette.requests import Request

from api.responses import read_body
from engine.store.pipeline import bulk_args

# A claim's arguments as engine/store/transitions.py `claim` passes them: hold id, login, what
# it wants, the four limits, the access code.
ARGS: list[Any] = ["h_" + "5e" * 16, "login-123", "", 2, 10, 6, 600_000, ""]
ENCODE = Encoder("utf-8", "strict", True).encode  # type: ignore[no-untyped-call]
SCOPE = {
    "type": "http", "method": "POST", "path": "/v1/events/e1/holds", "query_string": b"",
    "headers": [(b"content-length", b"2"), (b"content-type", b"application/json")],
}  # fmt: skip
BODY_MAX = 16 * 1024


def packed_by_redis_py() -> bytes:
    return b"".join(b"$%d\r\n%s\r\n" % (len(b), b) for b in map(ENCODE, ARGS))


def packed_here() -> bytes:
    return b"".join(bulk_args(ARGS, ENCODE, True))


async def _receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b"{}", "more_body": False}


def _request() -> Request:
    request = Request(SCOPE, _receive)
    request.headers  # noqa: B018 - read before, as the claim's token is
    return request


async def body_by_starlette() -> bytes:
    return await _request().body()


async def body_here() -> bytes:
    return await read_body(_request(), BODY_MAX)


def per_call_us(f: Callable[[], Any], loops: int) -> float:
    began = time.perf_counter()
    for _ in range(loops):
        f()
    return (time.perf_counter() - began) / loops * 1e6


async def per_read_us(f: Callable[[], Any], loops: int) -> float:
    began = time.perf_counter()
    for _ in range(loops):
        await f()
    return (time.perf_counter() - began) / loops * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--loops", type=int, default=100_000)
    args = ap.parse_args()
    assert packed_here() == packed_by_redis_py()
    assert asyncio.run(body_here()) == asyncio.run(body_by_starlette()) == b"{}"
    runs: dict[str, list[float]] = {k: [] for k in ("pack lib", "pack", "body lib", "body")}
    for _ in range(args.rounds):
        runs["pack lib"].append(per_call_us(packed_by_redis_py, args.loops))
        runs["pack"].append(per_call_us(packed_here, args.loops))
        runs["body lib"].append(asyncio.run(per_read_us(body_by_starlette, args.loops)))
        runs["body"].append(asyncio.run(per_read_us(body_here, args.loops)))
    med = {k: statistics.median(v) for k, v in runs.items()}
    table = Table(title=f"a claim's bytes, µs per claim, median of {args.rounds} rounds")
    for column in ("part", "the library's way", "ours", "ours / library", "saved µs"):
        table.add_column(column, justify="left" if column == "part" else "right")
    for part, name in (("pack the FCALL's arguments", "pack"), ("read a `{}` body", "body")):
        lib, ours = med[f"{name} lib"], med[name]
        table.add_row(part, f"{lib:.2f}", f"{ours:.2f}", f"{ours / lib:.2f}", f"{lib - ours:.2f}")
    Console().print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
