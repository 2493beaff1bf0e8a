"""What reading a claim's body costs: today's path against msgspec, in the same run (ADR 0026).

    python -m loadtest.bench.validate_cost [--rounds 7] [--loops 20000]

Today's path (api/routes/checkout.py `claim_input`): orjson parses the body (api/responses.py
`parse_json`), then `obj` and `wanted_of` check it field by field (api/validate.py). The msgspec
path decodes the body straight into a typed Struct whose fields carry the same bounds
(patterns, ranges, lengths), then checks what a type cannot say (one of the four asks, no seat
or sku twice). It answers a bad body exactly as today only by running today's path on it (the
error codes and messages are the contract, tests/integration/test_bad_input_and_answers.py), so
its refusals are measured that way too. Each body is first read both ways and must come out the
same (the same ask, or the same error); then µs per body, best of `rounds`."""

import argparse
import time
from collections.abc import Callable
from typing import Annotated, Any

import msgspec
from rich.console import Console
from rich.table import Table

from api.errors import ApiError
from api.responses import parse_json
from api.routes.checkout import PARTY_MAX, Wanted, wanted_of
from api.routes.stock import LINES_MAX
from api.validate import LIMITS, obj
from engine.model.stock_lines import StockLine

SeatId = Annotated[str, msgspec.Meta(pattern="^[A-Za-z0-9_.:-]{1,64}$")]
StockId = Annotated[str, msgspec.Meta(pattern="^[A-Za-z0-9_.-]{1,64}$")]
UNITS = LIMITS["line_quantity"]


class Line(msgspec.Struct, forbid_unknown_fields=True):
    sku: StockId
    quantity: Annotated[int, msgspec.Meta(ge=int(UNITS.low), le=int(UNITS.high))]
    location: StockId | None = None


class ClaimBody(msgspec.Struct):
    seat_id: SeatId | None = None
    seat_ids: Annotated[list[SeatId], msgspec.Meta(min_length=1, max_length=PARTY_MAX)] | None = (
        None
    )
    quantity: Annotated[int, msgspec.Meta(ge=1, le=PARTY_MAX)] | None = None
    lines: Annotated[list[Line], msgspec.Meta(min_length=1, max_length=LINES_MAX)] | None = None


DECODER = msgspec.json.Decoder(ClaimBody)
JSON = "application/json"
BODIES: list[tuple[str, bytes]] = [
    ("valid: empty (the best seat)", b""),
    ("valid: seat_id", b'{"seat_id":"A-12"}'),
    ("valid: quantity", b'{"quantity":4}'),
    ("valid: seat_ids", b'{"seat_ids":["A-1","A-2","A-3"]}'),
    ("valid: lines (a cart)", b'{"lines":[{"sku":"wheel-700c","quantity":2,"location":"east"}]}'),
    ("invalid: quantity 0", b'{"quantity":0}'),
    ("invalid: seat_id pattern", b'{"seat_id":"A 12"}'),
    ("invalid: two asks", b'{"seat_id":"A-1","quantity":2}'),
    ("invalid: seat twice", b'{"seat_ids":["A-1","A-1"]}'),
    ("invalid: not JSON", b'{"quantity":'),
]


def today(raw: bytes) -> Wanted:
    """api/routes/checkout.py claim_input's reading of the body."""
    return wanted_of(obj(parse_json(raw, JSON, allow_empty=True)), PARTY_MAX, LINES_MAX)


def _wanted(body: ClaimBody) -> Wanted | None:
    """The ask of a decoded body; None for what the types cannot refuse (today's path says
    why)."""
    asked = [v for v in (body.seat_id, body.seat_ids, body.quantity, body.lines) if v is not None]
    if len(asked) > 1:
        return None
    if body.lines is not None:
        lines = tuple(StockLine(x.sku, x.quantity, x.location or "") for x in body.lines)
        return Wanted(lines=lines) if len({x.sku for x in lines}) == len(lines) else None
    if body.seat_ids is not None:
        seats = tuple(body.seat_ids)
        return Wanted(seats, len(seats)) if len(set(seats)) == len(seats) else None
    if body.quantity is not None:
        return Wanted((), body.quantity)
    return Wanted((body.seat_id,) if body.seat_id else ())


def with_msgspec(raw: bytes) -> Wanted:
    """Decode into the Struct; a body it refuses is read again today's way, for today's
    error."""
    if not raw.strip():
        return Wanted()
    if "json" not in JSON:  # parse_json's media type check, kept
        raise ApiError(415, "unsupported_media_type", "send application/json")
    try:
        found = _wanted(DECODER.decode(raw))
    except msgspec.MsgspecError:
        found = None
    return found if found is not None else today(raw)


def decode_only(raw: bytes) -> Wanted:
    """msgspec's own decoding and checks, nothing else: what msgspec is, alone."""
    try:  # noqa: SIM105 - a timed call: suppress() would add its own cost to it
        DECODER.decode(raw or b"{}")
    except msgspec.MsgspecError:
        pass
    return Wanted()


def outcome(read: Callable[[bytes], Wanted], raw: bytes) -> Any:
    try:
        return read(raw)
    except ApiError as exc:
        return (exc.status, exc.code, exc.message)


def per_body_us(read: Callable[[bytes], Wanted], raw: bytes, loops: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(loops):
            try:  # noqa: SIM105 - a timed call: suppress() would add its own cost to it
                read(raw)
            except ApiError:
                pass
        best = min(best, time.perf_counter() - started)
    return best / loops * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--loops", type=int, default=20_000)
    args = parser.parse_args(argv)
    for name, raw in BODIES:  # the same reading both ways, or the comparison means nothing
        assert outcome(today, raw) == outcome(with_msgspec, raw), name
    table = Table(title=f"µs per claim body, best of {args.rounds} x {args.loops}")
    columns = ("body", "today (orjson + validators)", "msgspec, today's answers",
               "msgspec / today", "msgspec decode alone")  # fmt: skip
    for column in columns:
        table.add_column(column, justify="left" if column == "body" else "right")
    for name, raw in BODIES:
        now = per_body_us(today, raw, args.loops, args.rounds)
        then = per_body_us(with_msgspec, raw, args.loops, args.rounds)
        alone = per_body_us(decode_only, raw, args.loops, args.rounds)
        table.add_row(name, f"{now:.2f}", f"{then:.2f}", f"{then / now:.2f}", f"{alone:.2f}")
    Console().print(table)


if __name__ == "__main__":
    main()
