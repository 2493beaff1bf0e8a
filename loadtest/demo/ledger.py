"""The demo's view of the ledger (write-behind into PostgreSQL): its own database, the writer's
metrics sampled while the sale runs, and at the end the wait until the ledger holds every
decision of the outbox, with the counts the report checks."""

import asyncio
import time
from dataclasses import dataclass, field

import httpx

CATCH_UP_TIMEOUT_S = 20.0  # after the run, for the writer to drain the outbox


@dataclass
class LedgerSamples:
    """The ledger writer's own metrics, sampled every 100 ms during the run."""

    lag_seconds: list[float] = field(default_factory=list)
    lag_entries: list[float] = field(default_factory=list)
    written: list[tuple[float, float]] = field(default_factory=list)  # (time, entries total)


@dataclass(frozen=True)
class LedgerView:
    """What the ledger holds for the event once it caught up, and how the writer got there."""

    outbox: int  # decisions in the outbox
    decisions: int  # decisions in the ledger
    confirmed: int  # seats of the CONFIRMED holds in the ledger (a party's hold has several)
    samples: LedgerSamples


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
    """(decisions, seats of confirmed holds) the ledger holds for the event; a party's hold
    lists its seats in `seat_id`, comma-separated (ADR 0021)."""
    import asyncpg

    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        decisions = await conn.fetchval(
            "select count(*) from decisions where event_id = $1", event_id
        )
        confirmed = await conn.fetchval(
            "select coalesce(sum(cardinality(string_to_array(seat_id, ','))), 0) from holds"
            " where event_id = $1 and state = 'CONFIRMED'",
            event_id,
        )
        return int(decisions), int(confirmed)
    finally:
        await conn.close()


class LedgerWatch:
    """Samples the ledger writer's metrics from the moment it is made until `caught_up`."""

    def __init__(self, dsn: str, metrics_port: int, event_id: str) -> None:
        self.dsn, self.event_id = dsn, event_id
        self.samples, self.stop = LedgerSamples(), asyncio.Event()
        self.task = asyncio.create_task(
            sample_ledger(
                f"http://127.0.0.1:{metrics_port}/metrics", event_id, self.samples, self.stop
            )
        )

    async def caught_up(self, outbox: int) -> LedgerView:
        """Wait (a while) until the ledger holds the outbox's `outbox` decisions, stop sampling,
        and read what the ledger holds."""
        deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
        while time.monotonic() < deadline:
            if (await ledger_counts(self.dsn, self.event_id))[0] >= outbox:
                break
            await asyncio.sleep(0.2)
        self.stop.set()
        await self.task
        decisions, confirmed = await ledger_counts(self.dsn, self.event_id)
        return LedgerView(outbox, decisions, confirmed, self.samples)


@dataclass(frozen=True)
class StockLedger:
    """What the ledger holds for a stock event (ADR 0022): its confirmed holds, the units their
    line lists sold per SKU and location, and its corrections (initial counts included) with
    the on hand they add up to per SKU and location."""

    confirmed_holds: int
    sold: dict[str, int]  # "<sku>@<location>" -> units of the confirmed holds' lines
    corrections: int  # rows of stock_corrections
    on_hand: dict[str, int]  # "<sku>@<location>" -> what the corrections add up to


async def stock_ledger(dsn: str, event_id: str) -> StockLedger:
    """Read once the ledger caught up (LedgerWatch.caught_up)."""
    import asyncpg

    from engine.model.stock_lines import lines_of

    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        listed = await conn.fetch(
            "select seat_id from holds where event_id = $1 and state = 'CONFIRMED'", event_id
        )
        corrections = await conn.fetchval(
            "select count(*) from stock_corrections where event_id = $1", event_id
        )
        on_hand = await conn.fetch(
            "select sku, location, sum(on_hand_after - on_hand_before)::bigint as on_hand"
            " from stock_corrections where event_id = $1 group by sku, location",
            event_id,
        )
    finally:
        await conn.close()
    sold: dict[str, int] = {}
    for row in listed:
        for line in lines_of(row["seat_id"]):
            where = f"{line.sku}@{line.location}"
            sold[where] = sold.get(where, 0) + line.quantity
    return StockLedger(
        confirmed_holds=len(listed),
        sold=sold,
        corrections=int(corrections),
        on_hand={f"{r['sku']}@{r['location']}": int(r["on_hand"]) for r in on_hand},
    )
