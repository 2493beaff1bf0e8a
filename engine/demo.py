"""`onsale demo`: a scripted T0 burst against the engine, end to end on real Redis.

10,000 clients claim 80 seats at one instant (by the Redis clock); the winners then pay through
an in-process stand-in for the payment provider that behaves badly on purpose (duplicate,
reordered and late callbacks, declines, two tabs, a buyer who drops a seat and grabs another
while the first charge still captures). The sweeper runs throughout. At the end the engine's
own state is audited against SPEC's invariants and the run prints summary tables; any
violation makes the command exit non-zero."""

import asyncio
import random
import statistics
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from engine import errors
from engine.holds import ProviderOutcome, SeatSpec
from engine.settings import Settings
from engine.states import HoldState, LatePolicy
from engine.store import Store
from engine.sweeper import Sweeper


@dataclass(frozen=True)
class DemoConfig:
    clients: int = 10_000
    seats: int = 80
    hold_ttl_ms: int = 3_000
    quarantine_ms: int = 2_000
    seed: int = 2026
    concurrency_max: int = 64  # Redis connections shared by all simulated clients


@dataclass
class BurstResult:
    answers: Counter[str] = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)
    last_seat_ms: float = 0.0
    all_answered_ms: float = 0.0
    holds: list[tuple[str, str]] = field(default_factory=list)  # (hold_id, login)


def seat_map(n: int) -> list[SeatSpec]:
    """Rows of 20, best rank first: front rows of section A, then B."""
    out = []
    for i in range(n):
        row, col = divmod(i, 20)
        section = "A" if row < 2 else "B"
        out.append(SeatSpec(f"{section}-r{row + 1}-s{col + 1}", float(i), section))
    return out


class Provider:
    """In-process stand-in for the payment provider: it decides an outcome per charge and
    delivers the callback at least once, sometimes twice or three times, sometimes late.
    (The HTTP simulator with signed callbacks is a separate process; see the README.)"""

    def __init__(self, store: Store, event_id: str, rng: random.Random) -> None:
        self.store, self.event_id, self.rng = store, event_id, rng
        self.deliveries = 0
        self.tasks: set[asyncio.Task[None]] = set()
        self.captured: set[str] = set()

    def charge(self, charge_id: str, outcome: str, delay_s: float, copies: int = 1) -> None:
        if outcome == "CAPTURED":
            self.captured.add(charge_id)
        for n in range(copies):
            jitter = self.rng.uniform(0, 0.2) * n
            task = asyncio.create_task(self._deliver(charge_id, outcome, delay_s + jitter, n))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _deliver(self, charge_id: str, outcome: str, delay_s: float, n: int) -> None:
        await asyncio.sleep(delay_s)
        event = ProviderOutcome(
            f"evt-{charge_id}", charge_id, f"att-{charge_id}", f"pi-{charge_id}", outcome
        )
        for attempt in range(5):  # at-least-once: retried until we acknowledge
            try:
                await self.store.apply_outcome(self.event_id, event)
                self.deliveries += 1
                return
            except errors.StoreUnavailable:
                await asyncio.sleep(0.05 * 2**attempt)

    async def drain(self) -> None:
        while self.tasks:
            await asyncio.gather(*list(self.tasks))


async def burst(
    store: Store, event_id: str, cfg: DemoConfig, t0_ms: int, progress: Progress
) -> BurstResult:
    res = BurstResult()
    rng = random.Random(cfg.seed)
    seats = [s.seat_id for s in seat_map(cfg.seats)]
    task_id = progress.add_task("T0 burst: clients answered", total=cfg.clients)
    gate = asyncio.Semaphore(cfg.concurrency_max)
    start_at = time.monotonic() + (t0_ms - await store.server_time_ms()) / 1000

    async def client(i: int) -> None:
        login = f"fan{i}"
        want = rng.choice(seats) if rng.random() < 0.2 else None
        await asyncio.sleep(max(0.0, start_at - time.monotonic()))
        async with gate:
            began = time.monotonic()
            try:
                claimed = await store.claim(event_id, login, f"hold-{i}", want)
                res.answers["claimed"] += 1
                res.holds.append((claimed.hold_id, login))
                res.last_seat_ms = max(res.last_seat_ms, (time.monotonic() - start_at) * 1000)
            except (errors.SoldOut, errors.SeatTaken) as exc:
                res.answers[exc.code] += 1
            except errors.EngineError as exc:
                res.answers[f"error:{exc.code}"] += 1
            ended = time.monotonic()
        res.latencies_ms.append((ended - began) * 1000)
        res.all_answered_ms = max(res.all_answered_ms, (ended - start_at) * 1000)
        progress.advance(task_id)

    await asyncio.gather(*(client(i) for i in range(cfg.clients)))
    return res


async def buyers(
    store: Store, event_id: str, holds: list[tuple[str, str]], cfg: DemoConfig, provider: Provider
) -> Counter[str]:
    """Each winner follows one script; together they walk every late-payment path."""
    rng = random.Random(cfg.seed + 1)
    ttl_s, q_s = cfg.hold_ttl_ms / 1000, cfg.quarantine_ms / 1000
    kinds: Counter[str] = Counter()

    async def buyer(n: int, hold_id: str, login: str) -> None:
        roll = rng.random()
        c1, c2 = f"{hold_id}-c1", f"{hold_id}-c2"
        try:
            if roll < 0.45:  # pays; the callback arrives 1-3 times
                kinds["pays (duplicate callbacks)"] += 1
                await store.start_charge(event_id, hold_id, login, c1, 4500)
                provider.charge(c1, "CAPTURED", rng.uniform(0.05, 0.5), copies=rng.randint(1, 3))
            elif roll < 0.55:  # declined, pays again
                kinds["declined, then pays"] += 1
                await store.start_charge(event_id, hold_id, login, c1, 4500)
                provider.charge(c1, "DECLINED", 0.05)
                await asyncio.sleep(0.3)
                await store.start_charge(event_id, hold_id, login, c2, 4500)
                provider.charge(c2, "CAPTURED", 0.1, copies=2)
            elif roll < 0.65:  # walks away: the sweeper expires the hold
                kinds["walks away"] += 1
            elif roll < 0.72:  # capture lands after the deadline, inside the quarantine
                kinds["late capture (quarantine)"] += 1
                await store.start_charge(event_id, hold_id, login, c1, 4500)
                provider.charge(c1, "CAPTURED", ttl_s + q_s * 0.4)
            elif roll < 0.77:  # capture lands after the quarantine hard timeout
                kinds["very late capture (refund)"] += 1
                await store.start_charge(event_id, hold_id, login, c1, 4500)
                provider.charge(c1, "CAPTURED", ttl_s + q_s + 1.0)
            elif roll < 0.85:  # two tabs: tab 1 times out, tab 2 pays; both capture
                kinds["two tabs"] += 1
                await store.start_charge(event_id, hold_id, login, c1, 4500)
                await store.abandon_charge(event_id, hold_id, login, c1)
                await store.start_charge(event_id, hold_id, login, c2, 4500)
                provider.charge(c2, "CAPTURED", 0.2, copies=2)
                provider.charge(c1, "CAPTURED", 0.3, copies=2)
            elif roll < 0.92:  # drop A (charge in flight), grab B, A still captures
                kinds["drop A, grab B"] += 1
                await store.start_charge(event_id, hold_id, login, c1, 4500)
                await store.release(event_id, hold_id, login)
                try:
                    b = await store.claim(event_id, login, f"{hold_id}-B")
                except errors.SoldOut:
                    provider.charge(c1, "CAPTURED", 0.2)
                    return
                provider.charge(c1, "CAPTURED", 0.2)
                await store.start_charge(event_id, b.hold_id, login, f"{b.hold_id}-c1", 4500)
                provider.charge(f"{b.hold_id}-c1", "CAPTURED", 0.3)
            else:  # changes their mind
                kinds["releases"] += 1
                await store.release(event_id, hold_id, login)
        except errors.EngineError as exc:
            kinds[f"refused: {exc.code}"] += 1

    await asyncio.gather(*(buyer(n, h, login) for n, (h, login) in enumerate(holds)))
    return kinds


async def second_wave(store: Store, event_id: str, provider: Provider, fans_max: int) -> int:
    """Fans who were told "sold out" keep trying while seats may still come back (held or
    blocked ones), and pay when they get one."""
    sold = 0
    for i in range(fans_max):
        while True:
            a = await store.availability(event_id)
            if a.free or not (a.held or a.blocked):
                break
            await asyncio.sleep(0.05)
        if not a.free:
            break  # nothing left that could come back
        login = f"late-fan{i}"
        try:
            c = await store.claim(event_id, login, f"late-{i}")
        except (errors.SoldOut, errors.SeatTaken):
            continue
        await store.start_charge(event_id, c.hold_id, login, f"late-{i}-c1", 4500)
        provider.charge(f"late-{i}-c1", "CAPTURED", 0.05)
        sold += 1
    return sold


async def refund_worker(store: Store, event_id: str, stop: asyncio.Event) -> int:
    """Stand-in for the refund queue: the provider confirms every refund."""
    refunded = 0
    while not stop.is_set():
        now = await store.server_time_ms()
        for charge_id in await store.due_refunds(event_id, now):
            if await store.refund_result(event_id, charge_id, refunded=True) == "REFUNDED":
                refunded += 1
        try:
            async with asyncio.timeout(0.1):
                await stop.wait()
        except TimeoutError:
            pass
    return refunded


async def settled(store: Store, event_id: str) -> bool:
    a = await store.availability(event_id)
    return a.held == 0 and a.blocked == 0 and not await store.due_refunds(event_id, 2**62)


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


async def run_demo(settings: Settings, cfg: DemoConfig, console: Console) -> int:
    client = settings.redis_client()
    store = Store(client, prefix=settings.key_prefix, timeout_s=settings.redis_timeout_ms / 1000)
    await store.scripts.load_all()
    event_id = f"demo-{time.strftime('%H%M%S')}-{uuid.uuid4().hex[:6]}"
    await store.create_event(
        event_id,
        seat_map(cfg.seats),
        hold_ttl_ms=cfg.hold_ttl_ms,
        quarantine_ms=cfg.quarantine_ms,
        policy=LatePolicy.QUARANTINE,
    )
    t0_ms = await store.server_time_ms() + 1_000
    await store.open_sale(event_id, t0_ms)
    console.print(
        f"[bold]onsale demo[/]: event {event_id}, {cfg.seats} seats, {cfg.clients:,} "
        f"clients at T0, hold {cfg.hold_ttl_ms} ms, quarantine {cfg.quarantine_ms} ms"
    )

    stop = asyncio.Event()
    sweeper = Sweeper(store, interval_ms=50)
    sweep_task = asyncio.create_task(sweeper.run(stop))
    refund_task = asyncio.create_task(refund_worker(store, event_id, stop))
    provider = Provider(store, event_id, random.Random(cfg.seed + 2))
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        result = await burst(store, event_id, cfg, t0_ms, progress)
        kinds = await buyers(store, event_id, result.holds, cfg, provider)
        wave = asyncio.create_task(second_wave(store, event_id, provider, cfg.seats))
        settle_id = progress.add_task("payments and expiries settling", total=None)
        deadline = time.monotonic() + (cfg.hold_ttl_ms + cfg.quarantine_ms) / 1000 + 20
        while time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            if wave.done() and not provider.tasks and await settled(store, event_id):
                break
        progress.update(settle_id, total=1, completed=1)
        late_sold = await wave
        await provider.drain()
    stop.set()
    await sweep_task
    refunded = await refund_task
    report = await store.audit(event_id)
    avail = await store.availability(event_id)
    holds = [await store.hold(event_id, h) for h, _ in result.holds]
    await client.aclose()

    errors_n = sum(v for k, v in result.answers.items() if k.startswith("error"))
    burst_t = Table(title="T0 burst (client-side, one process)")
    burst_t.add_column("measure")
    burst_t.add_column("value", justify="right")
    for label, value in (
        ("clients", f"{cfg.clients:,}"),
        ("holds won", str(result.answers["claimed"])),
        (
            "told sold out / seat taken",
            f"{result.answers['sold_out']:,} / {result.answers['seat_taken']:,}",
        ),
        ("errors", str(errors_n)),
        (
            "claim latency p50 / p99 / max (ms)",
            f"{pct(result.latencies_ms, 50):.1f} / "
            f"{pct(result.latencies_ms, 99):.1f} / {max(result.latencies_ms):.1f}",
        ),
        ("last seat held at (ms after T0)", f"{result.last_seat_ms:.0f}"),
        ("every client answered at (ms after T0)", f"{result.all_answered_ms:.0f}"),
    ):
        burst_t.add_row(label, value)
    buyers_t = Table(title="What the 80 winners did")
    buyers_t.add_column("behaviour")
    buyers_t.add_column("buyers", justify="right")
    for kind, n in sorted(kinds.items()):
        buyers_t.add_row(kind, str(n))
    buyers_t.add_row("second wave (sold-out fans retrying)", str(late_sold))
    c = report.counts
    money_t = Table(title="Where seats and money ended")
    money_t.add_column("")
    money_t.add_column("count", justify="right")
    money_rows: tuple[tuple[str, object], ...] = (
        ("seats sold", avail.sold),
        ("seats free", avail.free),
        ("seats held / blocked", f"{avail.held} / {avail.blocked}"),
        ("captured charges kept (winners)", c["captured_winners"]),
        ("captured charges refunded", c["refunded"]),
        ("refunds still pending", c["refunding"]),
        ("burst holds confirmed", sum(h.state == HoldState.CONFIRMED for h in holds)),
        ("burst holds expired", sum(h.state == HoldState.EXPIRED for h in holds)),
        ("burst holds released", sum(h.state == HoldState.RELEASED for h in holds)),
        ("callbacks delivered (with duplicates)", provider.deliveries),
        ("refunds confirmed by the refund worker", refunded),
    )
    for name, count in money_rows:
        money_t.add_row(name, str(count))
    checks = [
        (
            "no seat sold twice, counters agree",
            not any("sold to" in v or "counter" in v for v in report.violations),
        ),
        ("seats sold = captured winners", avail.sold == c["captured_winners"]),
        (
            "every other capture refunded",
            len(provider.captured) == c["captured_winners"] + c["refunded"] + c["refunding"],
        ),
        (
            "one terminal outbox record per decision",
            not any("terminal record" in v for v in report.violations),
        ),
        ("full audit (SPEC invariants 1-6)", report.ok),
        (
            "every client answered, no errors",
            errors_n == 0 and sum(result.answers.values()) == cfg.clients,
        ),
    ]
    checks_t = Table(title="Invariants")
    checks_t.add_column("check")
    checks_t.add_column("result")
    for label, ok in checks:
        checks_t.add_row(label, "[green]ok[/]" if ok else "[red]VIOLATED[/]")
    for t in (burst_t, buyers_t, money_t, checks_t):
        console.print(t)
    for v in report.violations[:20]:
        console.print(f"[red]violation:[/] {v}")
    unsettled = [h.hold_id for h in holds if h.state in (HoldState.RESERVED, HoldState.QUARANTINED)]
    if unsettled:
        console.print(f"[yellow]{len(unsettled)} holds still live at the end[/]")
    return 0 if all(ok for _l, ok in checks) else 1
