"""`python -m loadtest.demo` (`make demo`): the whole stack on this machine and a T0 burst
through it, over HTTP.

It starts the provider simulator, the API (two uvicorn workers) and the worker as separate
processes, creates an event of 80 seats and opens it at T0 (by the Redis clock). 10,000
clients, already logged in, press "buy" at T0. The 80 winners then pay through the simulator,
which declines some, fails some, answers some with a timeout and captures them late, loses some
callbacks (reconciliation finds them) and delivers the rest once, twice or three times. Some
buyers walk away, pay from two tabs, release, or drop their seat and grab another while the
first charge still captures. Fans told "sold out" retry while seats may come back.

At the end it checks the engine's state (audit of docs/invariants.md), the money against the
simulator's ledger, and prints tables. Any violation makes the command exit non-zero."""

import asyncio
import os
import random
import statistics
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import orjson
from itsdangerous import URLSafeTimedSerializer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from engine.audit import Invariant
from engine.settings import Settings
from engine.store import Store
from loadtest import buyer
from loadtest.buyer import Answer, AsyncSend, BuyerApi, Call, Journey, Patience, Trip, drive_async
from loadtest.stack import QUICK_SETTLE_ENV, LocalStack

PRICE = 4500


@dataclass(frozen=True)
class DemoConfig:
    clients: int = 10_000
    seats: int = 80
    hold_ttl_ms: int = 10_000  # long enough for the whole burst to be answered first
    quarantine_ms: int = 4_000
    seed: int = 2026
    connections_max: int = 200  # HTTP connections shared by the simulated clients
    api_workers: int = 2


@dataclass
class Burst:
    statuses: Counter[str] = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)
    last_seat_ms: float = 0.0
    all_answered_ms: float = 0.0
    winners: list[tuple[str, str]] = field(default_factory=list)  # (login, hold_id)


def seat_map(n: int) -> list[dict[str, Any]]:
    """Rows of 20, best rank first: front rows are section A, the rest B."""
    return [
        {
            "seat_id": f"{'A' if i < 40 else 'B'}-r{i // 20 + 1}-s{i % 20 + 1}",
            "rank": i,
            "section": "A" if i < 40 else "B",
        }
        for i in range(n)
    ]


def aiohttp_send(http: aiohttp.ClientSession) -> AsyncSend:
    """The buyers' transport (aiohttp: httpx's pool cannot feed 10k clients)."""

    async def send(call: Call) -> Answer:
        async with http.request(call.method, call.path, json=call.json, headers=call.headers) as r:
            return Answer.of(r.status, await r.read())

    return send


async def burst(
    send: AsyncSend,
    fans: dict[str, BuyerApi],
    t0_ms: int,
    server_now_ms: int,
    seats: list[str],
    progress: Progress,
) -> Burst:
    res = Burst()
    rng = random.Random(1)
    task_id = progress.add_task("T0 burst: clients answered", total=len(fans))
    start_at = time.monotonic() + (t0_ms - server_now_ms) / 1000

    async def one(n: int, login: str, api: BuyerApi) -> None:
        want = rng.choice(seats) if rng.random() < 0.2 else None
        await asyncio.sleep(max(0.0, start_at - time.monotonic()))
        began = time.monotonic()
        try:
            r = await send(api.claim(f"t0-{n}", want))
            if r.status == 201:
                res.winners.append((login, r.body["hold_id"]))
                res.last_seat_ms = max(res.last_seat_ms, (time.monotonic() - start_at) * 1000)
        except (aiohttp.ClientError, TimeoutError) as exc:
            r = Answer.transport_error(exc)
        ended = time.monotonic()
        res.statuses[r.code] += 1
        res.latencies_ms.append((ended - began) * 1000)
        res.all_answered_ms = max(res.all_answered_ms, (ended - start_at) * 1000)
        progress.advance(task_id)

    await asyncio.gather(*(one(n, login, api) for n, (login, api) in enumerate(fans.items())))
    return res


def winner_journey(
    api: BuyerApi, hold_id: str, roll: float, deadline: float
) -> tuple[str, Journey[Trip]]:
    """(what the report calls it, the journey) for a winner who rolled `roll`."""
    wait = Patience(tries_max=3, poll_s=0.2, deadline=deadline, keep_waiting=True)
    if roll < 0.62:
        return "pays (pays again after a decline)", buyer.pays(api, hold_id, wait)
    if roll < 0.72:
        return "walks away", buyer.walks_away(hold_id)
    if roll < 0.82:
        return "two tabs: tab 1 gives up, tab 2 pays", buyer.abandons_and_pays_again(
            api, hold_id, wait
        )
    if roll < 0.92:
        return "drops the seat while paying, grabs another", buyer.drops_and_grabs(
            api, hold_id, wait, lambda: buyer.ask(api.claim(f"regrab-{hold_id}"))
        )
    return "releases", buyer.releases(api, hold_id)


async def buyers(
    send: AsyncSend,
    fans: dict[str, BuyerApi],
    winners: list[tuple[str, str]],
    cfg: DemoConfig,
    progress: Progress,
) -> Counter[str]:
    rng = random.Random(cfg.seed)
    deadline = time.monotonic() + (cfg.hold_ttl_ms + cfg.quarantine_ms) / 1000 + 15
    kinds: Counter[str] = Counter()
    task_id = progress.add_task("winners paying", total=len(winners))

    async def one(login: str, hold_id: str) -> None:
        kind, journey = winner_journey(fans[login], hold_id, rng.random(), deadline)
        await drive_async(journey, send)
        kinds[kind] += 1
        progress.advance(task_id)

    await asyncio.gather(*(one(login, hold_id) for login, hold_id in winners))
    return kinds


async def second_wave(send: AsyncSend, fans: list[BuyerApi], deadline: float) -> int:
    """Fans told "sold out" keep trying while seats may still come back, and pay."""
    wait = Patience(tries_max=3, poll_s=0.2, deadline=deadline, keep_waiting=True)
    sold, n = 0, 0
    while time.monotonic() < deadline and n < len(fans):
        fan = fans[n]
        a = (await send(fan.availability())).body
        if not a["free"]:
            if not buyer.could_come_back(a):
                break  # nothing left that could come back
            await asyncio.sleep(0.1)
            continue
        n += 1
        r = await send(fan.claim(f"wave-{n}"))
        if r.status == 201:
            end = await drive_async(wait.decide(fan, r.body["hold_id"]), send)
            if end.state == "CONFIRMED":
                sold += 1
    return sold


@dataclass
class LedgerSamples:
    """The ledger writer's own metrics, sampled every 100 ms during the run."""

    lag_seconds: list[float] = field(default_factory=list)
    lag_entries: list[float] = field(default_factory=list)
    written: list[tuple[float, float]] = field(default_factory=list)  # (time, entries total)


def _metric(text: str, name: str, event_id: str | None = None) -> float:
    for line in text.splitlines():
        if line.startswith(name) and (event_id is None or f'event="{event_id}"' in line):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def sample_ledger(
    url: str, event_id: str, samples: LedgerSamples, stop: asyncio.Event
) -> None:
    async with httpx.AsyncClient(timeout=1.0) as client:
        while not stop.is_set():
            try:
                text = (await client.get(url)).text
                samples.lag_seconds.append(_metric(text, "onsale_ledger_lag_seconds", event_id))
                samples.lag_entries.append(_metric(text, "onsale_ledger_lag_entries", event_id))
                samples.written.append(
                    (time.monotonic(), _metric(text, "onsale_ledger_entries_total"))
                )
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)


async def demo_database(dsn: str, name: str) -> str:
    """A database of its own for the demo's ledger, on the server of `dsn` (kept between runs)."""
    from persistence.database import create_database

    return await create_database(dsn, name, exist_ok=True)


async def ledger_counts(dsn: str, event_id: str) -> tuple[int, int]:
    """(decisions, confirmed holds) the ledger holds for the event."""
    import asyncpg

    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        decisions = await conn.fetchval(
            "select count(*) from decisions where event_id = $1", event_id
        )
        confirmed = await conn.fetchval(
            "select count(*) from holds where event_id = $1 and state = 'CONFIRMED'", event_id
        )
        return int(decisions), int(confirmed)
    finally:
        await conn.close()


def pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def table(title: str, rows: list[tuple[str, object]], head: tuple[str, str]) -> Table:
    t = Table(title=title)
    t.add_column(head[0])
    t.add_column(head[1], justify="right")
    for label, value in rows:
        t.add_row(label, str(value))
    return t


async def run_demo(
    settings: Settings,
    cfg: DemoConfig,
    console: Console,
    pg_dsn: str = "",
    pg_database: str = "onsale_demo",
) -> int:
    ledger_dsn = await demo_database(pg_dsn, pg_database) if pg_dsn else ""
    stack = LocalStack(
        ledger_dsn=ledger_dsn,
        redis_url=settings.redis_url,
        key_prefix=settings.key_prefix,
        log_dir=Path(".services") / "demo-logs",
        api_workers=cfg.api_workers,
        sim_args=(
            *("--decline-rate", "0.1", "--fail-rate", "0.03", "--late-rate", "0.1"),
            *("--late-delay-ms", str(cfg.hold_ttl_ms + cfg.quarantine_ms // 2)),
            *("--duplicate-rate", "0.3", "--loss-rate", "0.05"),
            *("--contradict-rate", "1.0"),  # every decline is captured anyway, later: given back
            *("--seed", str(cfg.seed)),
        ),
        extra_env=dict(QUICK_SETTLE_ENV),
    )
    console.print(
        f"[bold]demo[/]: starting provider simulator, API "
        f"({cfg.api_workers} workers), worker"
        f"{' and ledger writer' if ledger_dsn else ' (no ONSALE_PG_DSN: no ledger)'}; "
        f"logs in {stack.log_dir}/"
    )
    stack.start()
    redis_client = settings.redis_client()
    store = Store(redis_client, prefix=settings.key_prefix)
    try:
        return await _run(stack, store, cfg, console)
    finally:
        stack.stop()
        await redis_client.aclose()


async def _run(stack: LocalStack, store: Store, cfg: DemoConfig, console: Console) -> int:
    event_id = f"demo-{time.strftime('%H%M%S')}-{uuid.uuid4().hex[:4]}"
    admin = {"Authorization": f"Bearer {stack.admin_token}"}
    signer = URLSafeTimedSerializer(stack.token_secret, salt="onsale-login")
    connector = aiohttp.TCPConnector(limit=cfg.connections_max)
    async with (
        httpx.AsyncClient(base_url=stack.api_url, timeout=httpx.Timeout(30.0)) as http,
        aiohttp.ClientSession(
            base_url=stack.api_url, connector=connector, timeout=aiohttp.ClientTimeout(total=30)
        ) as fan_http,
    ):
        seats = seat_map(cfg.seats)
        now = await store.read.server_time_ms()
        t0_ms = now + 2_000
        await asyncio.to_thread(
            stack.create_event,
            event_id,
            seats,
            opens_at_ms=t0_ms,
            hold_ttl_ms=cfg.hold_ttl_ms,
            quarantine_ms=cfg.quarantine_ms,
            policy="quarantine",
            price_minor=PRICE,
        )
        console.print(
            f"event {event_id}: {cfg.seats} seats, {cfg.clients:,} clients at T0, "
            f"hold {cfg.hold_ttl_ms} ms, quarantine {cfg.quarantine_ms} ms"
        )
        # Clients logged in before T0 (tokens signed as POST /v1/login would sign them).
        fans = {
            f"fan{i}": BuyerApi(event_id, str(signer.dumps({"l": f"fan{i}"})))
            for i in range(cfg.clients)
        }
        send = aiohttp_send(fan_http)
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )
        samples, stop_sampling = LedgerSamples(), asyncio.Event()
        sampler = None
        if stack.ledger_dsn:
            sampler = asyncio.create_task(
                sample_ledger(
                    f"http://127.0.0.1:{stack.ledger_metrics_port}/metrics",
                    event_id,
                    samples,
                    stop_sampling,
                )
            )
        with Progress(*columns, console=console) as progress:
            result = await burst(
                send,
                fans,
                t0_ms,
                await store.read.server_time_ms(),
                [s["seat_id"] for s in seats],
                progress,
            )
            wave_deadline = time.monotonic() + (cfg.hold_ttl_ms + cfg.quarantine_ms) / 1000 + 15
            won = {login for login, _ in result.winners}
            losers = [api for login, api in fans.items() if login not in won]
            wave = asyncio.create_task(second_wave(send, losers[:200], wave_deadline))
            kinds = await buyers(send, fans, result.winners, cfg, progress)
            late_sold = await wave
            settle = progress.add_task("refunds and callbacks settling", total=None)
            settled = await _wait_settled(http, stack, event_id, admin, timeout_s=30)
            progress.update(settle, total=1, completed=1)
            nightly: dict[str, Any] | None = None
            if stack.ledger_dsn:
                # What the provider did that no callback told us (a lost webhook of a capture
                # after a decline, say) is found by the nightly run, as in production.
                night = progress.add_task("nightly reconciliation", total=None)
                nightly = await nightly_report(stack, event_id)
                settled = await _wait_settled(http, stack, event_id, admin, timeout_s=30)
                progress.update(night, total=1, completed=1)
        avail = (await http.get(f"/v1/events/{event_id}")).json()
        ledger = (await httpx.AsyncClient(base_url=stack.sim_url).get("/v1/ledger")).json()
        metrics = (await http.get("/metrics")).text
    ledger_view = None
    if sampler is not None:
        outbox_n = len(await store.read.outbox(event_id))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if (await ledger_counts(stack.ledger_dsn, event_id))[0] >= outbox_n:
                break
            await asyncio.sleep(0.2)
        stop_sampling.set()
        await sampler
        decisions, confirmed = await ledger_counts(stack.ledger_dsn, event_id)
        ledger_view = {
            "outbox": outbox_n,
            "decisions": decisions,
            "confirmed": confirmed,
            "samples": samples,
        }
    report = await store.read.audit(event_id)
    should_hold = sum(c.holds_money for c in await store.read.scan_charges(event_id))
    alive = stack.alive()
    return _report(
        console, cfg, event_id, result, kinds, late_sold, avail, ledger, report, settled, alive,
        metrics, ledger_view, should_hold, nightly,
    )  # fmt: skip


async def nightly_report(stack: LocalStack, event_id: str) -> dict[str, Any]:
    """`onsale reconcile` on the event, as its own process against the stack; its JSON report."""
    out = stack.log_dir / f"reconcile-{event_id}.json"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "onsale.cli",
        "reconcile",
        "--event",
        event_id,
        "--json",
        str(out),
        "--grace-ms",
        "0",
        env={**os.environ, **stack.env()},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    async with asyncio.timeout(120):
        await proc.wait()
    report: dict[str, Any] = orjson.loads(await asyncio.to_thread(out.read_bytes))
    return report


def refund_delays_ms(entries: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
    """From the provider's ledger: for every capture we gave back, the time from the capture to
    our refund request; (all of them, those contradicting the provider's own decline)."""
    refunds = {
        e["attempt_id"]: e["at_s"]
        for e in entries
        if e["kind"] == "refund" and e.get("requested_by") == "merchant"
    }
    every, contradicted = [], []
    for e in entries:
        if e["kind"] == "capture" and e["attempt_id"] in refunds:
            delay = (refunds[e["attempt_id"]] - e["at_s"]) * 1000
            every.append(delay)
            if e.get("contradicted"):
                contradicted.append(delay)
    return every, contradicted


def refund_bound_table(entries: list[dict[str, Any]]) -> Table:
    every, contradicted = refund_delays_ms(entries)
    return table(
        "Captures given back: capture at the provider -> our refund request",
        [
            bound_row("every capture refunded (n: p50 / p99 / max ms)", every),
            bound_row("captures after the provider's own decline", contradicted),
        ],
        ("", "value"),
    )


def bound_row(label: str, delays: list[float]) -> tuple[str, str]:
    if not delays:
        return (label, "none this run")
    return (
        label,
        f"{len(delays)}: {pct(delays, 50):.0f} / {pct(delays, 99):.0f} / {max(delays):.0f}",
    )


async def _wait_settled(
    http: httpx.AsyncClient,
    stack: LocalStack,
    event_id: str,
    admin: dict[str, str],
    timeout_s: float,
) -> bool:
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(base_url=stack.sim_url) as sim:
        while time.monotonic() < deadline:
            a = (await http.get(f"/v1/events/{event_id}")).json()
            ex = (
                await http.get(
                    f"/v1/admin/events/{event_id}/exceptions",
                    headers=admin,
                    params={"charging_older_than_ms": 0},
                )
            ).json()
            pending = (await sim.get("/v1/ledger")).json()["pending_deliveries"]
            if (
                not a["held"]
                and not a["blocked"]
                and not ex["refunds_pending"]
                and not ex["refunds_retrying"]
                and not ex["charging_too_long"]
                and not pending
            ):
                return True
            await asyncio.sleep(0.3)
    return False


def _report(
    console: Console,
    cfg: DemoConfig,
    event_id: str,
    result: Burst,
    kinds: Counter[str],
    late_sold: int,
    avail: dict[str, Any],
    ledger: dict[str, Any],
    report: Any,
    settled: bool,
    alive: bool,
    metrics: str,
    ledger_view: dict[str, Any] | None = None,
    should_hold: int = 0,
    nightly: dict[str, Any] | None = None,
) -> int:
    server_errors = sum(
        v
        for k, v in result.statuses.items()
        if k.startswith("5") or k.startswith("transport") or k == "internal"
    )
    console.print(
        table(
            "T0 burst over HTTP (one client process, 200 connections)",
            [
                ("clients", f"{cfg.clients:,}"),
                *((f"answer: {k}", f"{v:,}") for k, v in sorted(result.statuses.items())),
                (
                    "client-observed latency p50 / p99 / max (ms, incl. client queue)",
                    f"{pct(result.latencies_ms, 50):.0f} / "
                    f"{pct(result.latencies_ms, 99):.0f} / {max(result.latencies_ms):.0f}",
                ),
                ("last seat held at (ms after T0)", f"{result.last_seat_ms:.0f}"),
                ("every client answered at (ms after T0)", f"{result.all_answered_ms:.0f}"),
            ],
            ("measure", "value"),
        )
    )
    console.print(
        table(
            "What the winners did",
            [
                *sorted(kinds.items()),
                ("second wave: sold-out fans who got a returned seat", late_sold),
            ],
            ("behaviour", "buyers"),
        )
    )
    c = report.counts
    captures = [e for e in ledger["entries"] if e["kind"] == "capture"]
    refunds = [e for e in ledger["entries"] if e["kind"] == "refund"]
    console.print(
        table(
            "Where seats and money ended",
            [
                (
                    "seats sold / free / held / blocked",
                    f"{avail['sold']} / {avail['free']} / {avail['held']} / {avail['blocked']}",
                ),
                ("provider: captures / refunds", f"{len(captures)} / {len(refunds)}"),
                (
                    "engine: winning charges / refunded / refund pending",
                    f"{c['captured_winners']} / {c['refunded']} / {c['refunding']}",
                ),
                (
                    "money kept (provider captured - refunded)",
                    f"{(ledger['captured'] - ledger['refunded']) / 100:.2f}",
                ),
                ("callback deliveries (duplicates included)", ledger["deliveries"]),
            ],
            ("", "count"),
        )
    )
    if nightly is not None:
        found = [(cls, len(rows)) for cls, rows in nightly["by_class"].items() if rows]
        console.print(
            table(
                "Nightly reconciliation at the end (what no callback told us)",
                [
                    *((f"found: {cls}", n) for cls, n in found),
                    ("left unrepaired", nightly["unrepaired"]),
                ],
                ("", "count"),
            )
        )
    console.print(refund_bound_table(ledger["entries"]))
    checks = [
        (
            "no seat sold twice; counters agree with the seat map",
            not report.of(Invariant.NEVER_OVERSELL, Invariant.COUNTERS_AGREE, Invariant.SEAT_MAP),
        ),
        ("seats sold = winning charges", avail["sold"] == c["captured_winners"]),
        (
            "every provider capture is a winner or refunded",
            len(captures) == c["captured_winners"] + c["refunded"] + c["refunding"],
        ),
        ("every refund we recorded, the provider made", len(refunds) == c["refunded"]),
        (
            "money kept = seats sold x price",
            ledger["captured"] - ledger["refunded"] == avail["sold"] * PRICE,
        ),
        ("provider holds what our charges say (money invariant)", ledger["net"] == should_hold),
        (
            "nightly reconciliation left nothing unrepaired",
            nightly is None or nightly["unrepaired"] == 0,
        ),
        (
            "one terminal outbox record per hold and charge",
            not report.of(Invariant.ONE_TERMINAL_RECORD),
        ),
        ("full audit (docs/invariants.md)", report.ok),
        (
            "every client answered, no 5xx, no transport error",
            server_errors == 0 and sum(result.statuses.values()) == cfg.clients,
        ),
        ("everything settled (no live holds, refunds or callbacks pending)", settled),
        ("API, worker and simulator still running", alive),
    ]
    if ledger_view is not None:
        samples: LedgerSamples = ledger_view["samples"]
        rates = [
            (b[1] - a[1]) / (b[0] - a[0])
            for a, b in zip(samples.written, samples.written[10:], strict=False)
            if b[0] > a[0]
        ]
        console.print(
            table(
                "Ledger (write-behind into PostgreSQL, sampled every 100 ms)",
                [
                    (
                        "decisions in the outbox / in the ledger",
                        f"{ledger_view['outbox']} / {ledger_view['decisions']}",
                    ),
                    ("peak rows/s (1 s window)", f"{max(rates, default=0.0):,.0f}"),
                    (
                        "lag p99 / max (s)",
                        f"{pct(samples.lag_seconds or [0.0], 99):.2f} / "
                        f"{max(samples.lag_seconds, default=0.0):.2f}",
                    ),
                    ("lag max (entries)", f"{max(samples.lag_entries, default=0.0):.0f}"),
                ],
                ("measure", "value"),
            )
        )
        checks += [
            (
                "ledger holds every decision of the outbox",
                ledger_view["decisions"] == ledger_view["outbox"],
            ),
            ("ledger's confirmed holds = seats sold", ledger_view["confirmed"] == avail["sold"]),
        ]
    t = Table(title="Invariants")
    t.add_column("check")
    t.add_column("result")
    for label, ok in checks:
        t.add_row(label, "[green]ok[/]" if ok else "[red]VIOLATED[/]")
    console.print(t)
    for v in report.violations[:20]:
        console.print(f"[red]violation:[/] {v}")
    console.print(
        f"event {event_id}; API metrics at the end: "
        f"{sum(1 for line in metrics.splitlines() if line.startswith('onsale_'))} series"
    )
    return 0 if all(ok for _l, ok in checks) else 1


def main(argv: list[str] | None = None) -> int:
    """`python -m loadtest.demo` (`make demo`)."""
    import argparse

    from engine.settings import MissingSetting

    parser = argparse.ArgumentParser(prog="python -m loadtest.demo", description=__doc__)
    parser.add_argument("--clients", type=int, default=DemoConfig.clients)
    parser.add_argument("--seats", type=int, default=DemoConfig.seats)
    parser.add_argument("--hold-ttl-ms", type=int, default=DemoConfig.hold_ttl_ms)
    parser.add_argument("--quarantine-ms", type=int, default=DemoConfig.quarantine_ms)
    parser.add_argument("--seed", type=int, default=DemoConfig.seed)
    parser.add_argument("--api-workers", type=int, default=DemoConfig.api_workers)
    args = parser.parse_args(argv)
    try:
        settings = Settings.from_env(os.environ)
    except MissingSetting as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    cfg = DemoConfig(
        clients=args.clients,
        seats=args.seats,
        hold_ttl_ms=args.hold_ttl_ms,
        quarantine_ms=args.quarantine_ms,
        seed=args.seed,
        api_workers=args.api_workers,
    )
    pg_dsn = os.environ.get("ONSALE_PG_DSN", "")
    database = os.environ.get("ONSALE_DEMO_DATABASE", "onsale_demo")
    try:
        return asyncio.run(run_demo(settings, cfg, Console(), pg_dsn, database))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
