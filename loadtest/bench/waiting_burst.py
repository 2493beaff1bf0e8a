"""The T0 burst with and without a waiting room, in one run (ADR 0029, docs/benchmarks.md).

    python -m loadtest.bench.waiting_burst [--clients 10000] [--seats 80] [--workers 2] [--spread-s
    10]
        [--late-share 0.1] [--release-share 0.1] [--admit-per-s N] [--factor-pct 150] [--json F]

One stack (API, worker, a provider simulator that captures every charge). First
loadtest/burst/main.py's burst on an event without a room: every claim written at once at T0. Then
as many clients on an event with a room: each, on its own connection, joins at a random instant of
the --spread-s seconds before T0 (a --late-share in the second after), looks again when told, claims
once admitted and pays (a --release-share of buyers releases instead: seats come back mid-sale). A
client is done at its final answer: a seat, or "sold out". Reported for both: the answers, when the
last seat was held and every client had its final answer, the claim requests, the logins whose claim
ran the claim script, the script calls Redis ran, and fairness (Spearman's rank correlation of the
arrival, or the draw, with the order seats were held in)."""

import argparse
import asyncio
import contextlib
import random
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
import redis.asyncio as redis_asyncio
import uvloop
from rich.console import Console
from rich.table import Table

from api.identity import DemoTokens
from engine.model import keys
from engine.store import Store
from loadtest.bench.persistence_cost import private_server
from loadtest.burst import main as burst
from loadtest.burst import targets
from loadtest.burst.client import BurstClient
from loadtest.devstack.invariants import check_burst
from loadtest.devstack.stack import LocalStack

ROOM_EVENT = "burst-room"
FINAL_S = 90.0  # a client with no final answer by then is counted as unanswered
SIM_ARGS = ("--decline-rate", "0", "--fail-rate", "0", "--duplicate-rate", "0")
SCRIPT_COMMANDS = ("cmdstat_fcall", "cmdstat_evalsha", "cmdstat_eval")
# No hold ends in a run: the worker's sweeps would only add to the script calls counted.
QUIET_WORKER = {"ONSALE_SWEEP_INTERVAL_MS": "60000", "ONSALE_TRIM_INTERVAL_MS": "60000"}


@dataclass
class Fan:
    """One client of the room's burst and what it saw (times in ms after T0)."""

    n: int
    token: str
    arrive_ms: float  # when it is to join
    client: BurstClient | None = None
    joined_ms: float = 0.0  # when it sent its join
    final: str = ""
    final_ms: float = 0.0
    held_ms: float | None = None
    sent: Counter[str] = field(default_factory=Counter)


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rank correlation (ties ranked in list order); None under three pairs."""

    def ranks(values: Sequence[float]) -> list[float]:
        out = [0.0] * len(values)
        for rank, i in enumerate(sorted(range(len(values)), key=values.__getitem__)):
            out[i] = float(rank)
        return out

    return round(statistics.correlation(ranks(xs), ranks(ys)), 3) if len(xs) > 2 else None


def raw_request(host: str, method: str, path: str, token: str, **headers: str) -> bytes:
    body = b"{}" if method == "POST" else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
    head += "".join(f"{name.replace('_', '-')}: {value}\r\n" for name, value in headers.items())
    head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


@dataclass
class Room:
    """The room's burst: where to send, when T0 is (time.monotonic()), when to give up."""

    host: str
    t0: float
    deadline: float
    release_share: float

    def ms(self) -> float:
        return (time.monotonic() - self.t0) * 1000

    async def call(self, fan: Fan, kind: str, method: str, path: str, **headers: str) -> Any:
        """One request; a 503 is sent again after its Retry-After (1 s, plus jitter)."""
        assert fan.client is not None
        raw = raw_request(self.host, method, path, fan.token, **headers)
        while True:
            fan.sent[kind] += 1
            timeout = max(0.1, self.deadline - time.monotonic())
            status, body = await asyncio.wait_for(fan.client.send(raw), timeout)
            parsed = orjson.loads(body) if body else {}
            if status != 503 or time.monotonic() + 1 > self.deadline:
                break
            fan.sent["503"] += 1
            await asyncio.sleep(random.uniform(1, 2))
        if status >= 400:
            return status, str(parsed.get("error", {}).get("code", status))
        return status, parsed

    def done(self, fan: Fan, final: str) -> None:
        fan.final, fan.final_ms = final, self.ms()

    async def buy(self, fan: Fan, token: str) -> bool:
        """Claim with the admission; pay (or release). False: no seat free now, look again."""
        path, key = f"/v1/events/{ROOM_EVENT}/holds", f"k{fan.n}"
        status, body = await self.call(
            fan, "claim", "POST", path, Idempotency_Key=key, Onsale_Admission=token
        )
        if status == 409 and body == "sold_out":
            return False
        if status not in (200, 201):
            self.done(fan, f"refused:{body}")
            return True
        fan.held_ms = fan.held_ms or self.ms()
        hold = f"{path}/{body['hold_id']}"
        if random.random() < self.release_share:
            await self.call(fan, "release", "DELETE", hold)
            self.done(fan, "released")
        else:
            await self.call(fan, "charge", "POST", f"{hold}/charges", Idempotency_Key=key)
            self.done(fan, "bought")
        return True

    async def journey(self, fan: Fan) -> None:
        """Join, look again when told, claim once admitted while a unit is free. A claim refused
        "sold out" after it spent the admission (the last seat went meanwhile) is sent again,
        same key, when a unit is free again; without spending, the admission is kept."""
        await asyncio.sleep(max(0.0, self.t0 + fan.arrive_ms / 1000 - time.monotonic()))
        queue, token = f"/v1/events/{ROOM_EVENT}/queue", ""
        fan.joined_ms = self.ms()
        try:
            status, body = await self.call(fan, "join", "POST", queue)
            while status in (200, 201) and time.monotonic() < self.deadline:
                state, wait_ms = body["state"], body.get("poll_after_ms") or 1_000
                token = body["admission"]["token"] if state == "admitted" else token
                gone = body["free"] + body["held"] + body["blocked"] == 0
                if state in ("admitted", "used") and token and body["free"]:
                    if await self.buy(fan, token):
                        return
                elif state in ("sold_out", "lapsed") or (state == "used" and gone):
                    return self.done(fan, "sold_out" if gone else state)
                await asyncio.sleep(wait_ms / 1000)
                status, body = await self.call(fan, "poll", "GET", f"{queue}/me")
            self.done(fan, f"refused:{body}" if status >= 400 else "no answer")
        except (ConnectionError, TimeoutError) as exc:
            self.done(fan, f"transport:{type(exc).__name__}")


async def connect(url: str, n: int, timeout_s: float = 60.0) -> list[BurstClient]:
    """n keep-alive connections, each answered one GET /healthz."""
    split = urlsplit(url)
    host, port = split.hostname or "127.0.0.1", split.port or 80
    loop, gate = asyncio.get_running_loop(), asyncio.Semaphore(500)
    health = f"GET /healthz HTTP/1.1\r\nHost: {split.netloc}\r\n\r\n".encode()

    async def one() -> BurstClient:
        async with gate:
            _t, c = await loop.create_connection(BurstClient, host, port)
            status, _ = await asyncio.wait_for(c.send(health), timeout_s)
            assert status == 200, status
            return c

    return list(await asyncio.gather(*(one() for _ in range(n))))


async def script_calls(redis: "redis_asyncio.Redis") -> int:
    stats = await redis.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k in SCRIPT_COMMANDS)


async def reached_claim_script(redis: "redis_asyncio.Redis", prefix: str, event_id: str) -> int:
    """Logins whose claim ran the claim script: it spends a claim-rate token of each (quota)."""
    fields = await redis.hkeys(keys.event_key(event_id, "quota", prefix))
    return sum(1 for f in fields if str(f).startswith("claim:"))


async def plain_phase(args: argparse.Namespace, stack: LocalStack, store: Store) -> dict[str, Any]:
    """loadtest/burst/main.py's burst on an event without a room."""
    await asyncio.to_thread(stack.create_event, targets.EVENT_ID, args.seats, hold_ttl_ms=600_000)
    target = targets.Target(stack.api_url, stack.token_secret, check=None)  # type: ignore[arg-type]
    before = await script_calls(store.client)
    clients, t0 = await burst.release_burst(target, args.clients, Console(stderr=True))
    calls = await script_calls(store.client) - before
    answers = Counter(c.answer for c in clients)
    verdict = await check_burst(store, targets.EVENT_ID, answers, args.clients, args.seats)
    won = [(n, c) for n, c in enumerate(clients) if c.answer == "201"]
    done = [(c.done - t0) * 1000 for c in clients]
    return {
        "answers": dict(answers),
        "last_seat_ms": max((c.done - t0) * 1000 for _n, c in won) if won else None,
        "all_final_ms": max(done),
        "final_p50_ms": statistics.median(done),
        "claim_requests": args.clients,
        "claim_script_logins": await reached_claim_script(
            store.client, store.prefix, targets.EVENT_ID
        ),
        "script_calls": calls,
        "requests": {"claim": args.clients},
        "rho_arrival_vs_seat": spearman([n for n, _ in won], [c.done for _, c in won]),
        "seats_to_first_tenth": sum(1 for n, _ in won if n < args.clients // 10),
        "invariants_ok": verdict.ok,
    }


async def open_room(args: argparse.Namespace, stack: LocalStack, store: Store) -> float:
    """The room's event, T0 ahead; returns T0 as time.monotonic()."""
    await asyncio.to_thread(
        stack.create_event, ROOM_EVENT, args.seats, opens_at_ms=None, hold_ttl_ms=600_000
    )
    settings: dict[str, int] = {"admit_factor_pct": args.factor_pct}
    if args.admit_per_s:
        settings["admit_per_s"] = args.admit_per_s
    headers = stack.admin_headers()
    async with httpx.AsyncClient(base_url=stack.api_url, headers=headers, timeout=30) as http:
        r = await http.put(f"/v1/admin/events/{ROOM_EVENT}/waiting-room", json=settings)
        assert r.status_code == 201, r.text
        lead_ms = int(args.spread_s * 1000) + max(3_000, 2 * int(args.clients))  # to connect
        opens = await store.read.server_time_ms() + lead_ms
        r = await http.post(f"/v1/admin/events/{ROOM_EVENT}/open", json={"opens_at_ms": opens})
        assert r.status_code == 200, r.text
    return time.monotonic() + (opens - await store.read.server_time_ms()) / 1000


def arrivals(args: argparse.Namespace) -> list[float]:
    """Each client's arrival, ms after T0: before T0 over the spread, or in the second after."""
    rng = random.Random(11)
    early_ms = -args.spread_s * 1000
    return [
        rng.uniform(0, 1000) if rng.random() < args.late_share else rng.uniform(early_ms, -300)
        for _ in range(args.clients)
    ]


async def room_phase(args: argparse.Namespace, stack: LocalStack, store: Store) -> dict[str, Any]:
    t0 = await open_room(args, stack, store)
    tokens = DemoTokens(stack.token_secret, ttl_s=3_600)
    fans = [Fan(n, tokens.issue(f"f{n}"), at) for n, at in enumerate(arrivals(args))]
    clients = await connect(stack.api_url, args.clients)
    for fan, client in zip(fans, clients, strict=True):
        fan.client = client
    room = Room(urlsplit(stack.api_url).netloc, t0, t0 + FINAL_S, args.release_share)
    before = await script_calls(store.client)
    try:
        await asyncio.gather(*(room.journey(fan) for fan in fans))
    finally:
        for c in clients:
            c.close()
    calls = await script_calls(store.client) - before
    report = await store.read.audit(ROOM_EVENT)
    return await room_result(args, store, fans, calls, report.ok)


async def room_result(
    args: argparse.Namespace, store: Store, fans: list[Fan], calls: int, audit_ok: bool
) -> dict[str, Any]:
    order_key = keys.queue_keys(ROOM_EVENT, store.prefix)[3]
    order: list[Any] = await store.client.zrange(order_key, 0, -1, withscores=True)
    place = {str(entry[0]): n for n, entry in enumerate(order)}
    drawn = {str(entry[0]) for entry in order if float(entry[1]) < 2**52}  # before T0

    def placed(some: list[Fan]) -> list[int]:
        return [place[f"f{f.n}"] for f in some]

    early = [f for f in fans if f"f{f.n}" in drawn]
    held = sorted((f for f in fans if f.held_ms is not None), key=lambda f: place[f"f{f.n}"])
    sent: Counter[str] = sum((f.sent for f in fans), Counter())
    finals = [f.final_ms for f in fans]
    avail = await store.read.availability(ROOM_EVENT)
    return {
        "answers": dict(Counter(f.final for f in fans)),
        "last_seat_ms": max((f.held_ms or 0) for f in held) if held else None,
        "all_final_ms": max(finals),
        "final_p50_ms": statistics.median(finals),
        "claim_requests": sent["claim"],
        "claim_script_logins": await reached_claim_script(store.client, store.prefix, ROOM_EVENT),
        "script_calls": calls,
        "requests": dict(sent),
        "rho_arrival_vs_place": spearman([f.joined_ms for f in early], placed(early)),
        "rho_place_vs_seat": spearman(placed(held), [f.held_ms or 0 for f in held]),
        "sent_before_t0_placed_after": sum(
            f.joined_ms < 0 and f"f{f.n}" in place.keys() - drawn for f in fans
        ),
        "last_place_with_a_seat": place[f"f{held[-1].n}"] + 1 if held else None,
        "invariants_ok": audit_ok and avail.held + avail.sold + avail.blocked <= args.seats,
    }


@contextlib.asynccontextmanager
async def running(args: argparse.Namespace) -> AsyncIterator[tuple[LocalStack, Store]]:
    """The stack on a private Redis (no persistence): its script counts are this run's alone."""
    with private_server([]) as port:
        redis_url, prefix = f"redis://127.0.0.1:{port}/0", "onsale:bench"
        logs = Path(tempfile.mkdtemp(prefix="onsale-waiting-burst-"))
        stack = LocalStack(
            redis_url, prefix, logs, args.workers, sim_args=SIM_ARGS, extra_env=QUIET_WORKER
        )
        await asyncio.to_thread(stack.start)
        redis = redis_asyncio.from_url(redis_url, decode_responses=True)
        try:
            yield stack, Store(redis, prefix=prefix)
        finally:
            await asyncio.to_thread(stack.stop)
            await redis.aclose()


ROWS = (
    ("answers", "answers"),
    ("last seat held (ms after T0)", "last_seat_ms"),
    ("every client had its final answer (ms after T0)", "all_final_ms"),
    ("median final answer (ms after T0)", "final_p50_ms"),
    ("claim requests", "claim_requests"),
    ("logins whose claim ran the claim script", "claim_script_logins"),
    ("script calls in Redis (all scripts)", "script_calls"),
    ("requests by kind", "requests"),
    ("rho(arrival, seat order) among buyers", "rho_arrival_vs_seat"),
    ("seats won by the first tenth to send", "seats_to_first_tenth"),
    ("rho(arrival before T0, place)", "rho_arrival_vs_place"),
    ("rho(place, seat order) among buyers", "rho_place_vs_seat"),
    ("joins sent before T0, taken after it", "sent_before_t0_placed_after"),
    ("last place that got a seat", "last_place_with_a_seat"),
    ("invariants (audit, no oversell)", "invariants_ok"),
)


def show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 10 else f"{value:.3f}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v:,}" for k, v in sorted(value.items()))
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def print_report(console: Console, args: argparse.Namespace, result: dict[str, Any]) -> None:
    t = Table(
        title=f"T0 burst, {args.clients:,} clients on {args.seats} seats, {args.workers} API "
        f"worker(s): without and with a waiting room"
    )
    for column in ("measure", "no room", "waiting room"):
        t.add_column(column, overflow="fold")
    for label, name in ROWS:
        t.add_row(label, show(result["plain"].get(name)), show(result["room"].get(name)))
    console.print(t)


async def run(args: argparse.Namespace, console: Console) -> int:
    async with running(args) as (stack, store):
        plain = await plain_phase(args, stack, store)
        room = await room_phase(args, stack, store)
    result = {"clients": args.clients, "seats": args.seats, "workers": args.workers}
    result |= {"plain": plain, "room": room, "settings": vars(args)}
    print_report(console, args, result)
    if args.json:
        await asyncio.to_thread(
            Path(args.json).write_bytes, orjson.dumps(result, option=orjson.OPT_INDENT_2)
        )
    return 0 if plain["invariants_ok"] and room["invariants_ok"] else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m loadtest.bench.waiting_burst",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--clients", type=burst.positive, default=10_000)
    ap.add_argument("--seats", type=burst.positive, default=80)
    ap.add_argument("--workers", type=burst.positive, default=2)
    ap.add_argument("--spread-s", type=float, default=10.0, help="arrivals before T0 span this")
    ap.add_argument("--late-share", type=float, default=0.1, help="share arriving after T0")
    ap.add_argument("--release-share", type=float, default=0.1, help="buyers who release")
    ap.add_argument("--admit-per-s", type=int, default=0, help="0: the engine's default")
    ap.add_argument("--factor-pct", type=int, default=150)
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    burst.raise_open_files_limit(args.clients + 1024)
    return uvloop.run(run(args, Console()))


if __name__ == "__main__":
    raise SystemExit(main())
