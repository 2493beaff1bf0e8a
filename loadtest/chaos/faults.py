"""The hands of `onsale chaos`: the injector kills processes at the schedule's instants and
restarts them after their seeded delay; the supervisor restarts whatever died without being
killed (as systemd's Restart=always would) and writes it down; the operator does what
docs/recovery.md asks of a person, as soon as it is due: an event that Redis lost or that was
fenced (a failover to a replica that had not received the last writes) is rebuilt from the
ledger with `onsale rebuild EVENT --force`.

Kills and restarts block (a server's start, a failover), so they run in threads while the
event loop goes on driving the load."""

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from engine.model import keys
from engine.store import Store
from loadtest.chaos.schedule import KINDS, Fault
from loadtest.chaos.servers import CrashablePostgres, DurableRedis
from loadtest.devstack.cluster import LocalCluster, Node
from loadtest.devstack.stack import LocalStack, wait_healthy

PROCESSES = ("api", "worker", "ledger")
OnFault = Callable[["Injected"], None]  # told of each fault once its process is back
API_BOOT_S = 60.0  # an API process healthy within this long (imports on a busy machine)
RESTART_TRIES_MAX = 20  # a restart that fails (a server still going down) is tried again
REBUILD_WINDOW_S = 120.0  # a rebuild refused (decisions still on their way) is tried again


@dataclass
class Injected:
    """One fault as it happened: instants in seconds since T0."""

    kind: str
    planned_s: float
    down_s: float
    at_s: float = -1.0  # the kill
    back_s: float = -1.0  # healthy again
    detail: str = ""


@dataclass
class Unplanned:
    """A process or server found dead that nobody killed."""

    name: str
    at_s: float
    exit_code: int | None


@dataclass
class Recovery:
    """One rebuild of an event from the ledger (docs/recovery.md)."""

    event_id: str
    at_s: float
    done_s: float = -1.0
    tries: int = 0
    ok: bool = False


@dataclass
class Servers:
    """What runs the sale: the stack's processes, one Redis or a cluster, PostgreSQL."""

    stack: LocalStack
    pg: CrashablePostgres
    redis: DurableRedis | None = None
    cluster: LocalCluster | None = None


@dataclass
class Chaos:
    servers: Servers
    events: list[str]
    t0: float  # monotonic instant of T0
    lose_redis: bool = False  # Redis restarts empty: the ledger process rebuilds (ADR 0037)
    injected: list[Injected] = field(default_factory=list)
    unplanned: list[Unplanned] = field(default_factory=list)
    recoveries: list[Recovery] = field(default_factory=list)
    down: set[str] = field(default_factory=set)
    locks: dict[str, asyncio.Lock] = field(
        default_factory=lambda: {kind: asyncio.Lock() for kind in KINDS}
    )

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    # -- the injector --------------------------------------------------------------------

    async def run_schedule(self, schedule: list[Fault], on_fault: OnFault) -> None:
        """Each fault at its instant; a fault whose kind is still down from the previous one
        waits for it (the schedule never plans that, a slow restart may cause it)."""
        running = []
        for fault in schedule:
            await asyncio.sleep(max(0.0, self.t0 + fault.at_s - time.monotonic()))
            running.append(asyncio.create_task(self.inject(fault, on_fault)))
        await asyncio.gather(*running)

    async def inject(self, fault: Fault, on_fault: OnFault) -> None:
        record = Injected(fault.kind, fault.at_s, fault.down_s)
        self.injected.append(record)
        async with self.locks[fault.kind]:
            self.down.add(fault.kind)
            try:
                record.at_s = self.now()
                victim = await asyncio.to_thread(self._kill, fault, record)
                await asyncio.sleep(fault.down_s)
                await asyncio.to_thread(self._restart, fault.kind, victim, record)
                record.back_s = self.now()
            finally:
                self.down.discard(fault.kind)
        on_fault(record)

    def _kill(self, fault: Fault, record: Injected) -> Node | None:
        s = self.servers
        if fault.kind in PROCESSES:
            s.stack.kill(fault.kind)
        elif fault.kind == "postgres":
            s.pg.kill()
        elif s.cluster is None:
            assert s.redis is not None
            s.redis.kill()
        else:
            event_id = self.events[fault.target % len(self.events)]
            victim = s.cluster.kill_primary_of(keys.slot_of(event_id))
            s.stack.redis_url = s.cluster.url  # a seed that is up, for restarts meanwhile
            record.detail = f"primary :{victim.port} (event {event_id})"
            return victim
        return None

    def _restart(self, kind: str, victim: Node | None, record: Injected) -> None:
        s = self.servers
        if victim is not None:
            assert s.cluster is not None
            event_id = record.detail.rsplit(" ", 1)[1].rstrip(")")
            heir = s.cluster.wait_failover(keys.slot_of(event_id), victim)
            s.cluster.restart(victim)  # it rejoins as a replica of its heir
            s.stack.redis_url = s.cluster.url  # a seed that is up, for the next restarts
            record.detail += f" -> :{heir.port} took over; :{victim.port} back as a replica"
            return
        _retried(self._starter(kind))

    def _start(self, kind: str) -> None:
        s = self.servers
        if kind == "api" and s.stack.running("api"):
            # A previous try's API is still booting (a loaded machine): wait for it, rather
            # than start a second one on its port.
            api = [proc for name, proc, _out in s.stack.procs if name == "api"][-1]
            wait_healthy(s.stack.api_url, api, API_BOOT_S)
        elif kind in PROCESSES:
            s.stack.restart(kind, API_BOOT_S)
        elif kind == "postgres":
            s.pg.start()
        else:
            assert s.redis is not None
            if self.lose_redis:
                s.redis.wipe()
            s.redis.start()

    # -- the supervisor ------------------------------------------------------------------

    async def supervise(self, stop: asyncio.Event) -> None:
        """Every half second: whatever is not down on purpose and is not running is written
        down and started again."""
        while not stop.is_set():
            for kind in KINDS:
                if kind in self.down or self.locks[kind].locked():
                    continue
                dead, exit_code = self._dead(kind)
                if not dead:
                    continue
                async with self.locks[kind]:
                    self.unplanned.append(Unplanned(kind, self.now(), exit_code))
                    await asyncio.to_thread(_retried, self._starter(kind))
            await asyncio.sleep(0.5)

    def _starter(self, kind: str) -> Callable[[], None]:
        return lambda: self._start(kind)

    def _dead(self, kind: str) -> tuple[bool, int | None]:
        """(whether `kind` is not running, its exit code when known)."""
        s = self.servers
        if kind in PROCESSES:
            latest = [proc for name, proc, _out in s.stack.procs if name == kind][-1]
            return latest.poll() is not None, latest.returncode
        if kind == "postgres":
            return not s.pg.alive, None
        if s.cluster is not None:
            return False, None  # a dead node is the failover's business (the schedule's)
        assert s.redis is not None
        return not s.redis.alive, None

    # -- the operator --------------------------------------------------------------------

    async def operate(self, store: Store, stop: asyncio.Event) -> None:
        """Every second: an event this Redis cannot answer for (lost, fenced, or a rebuild cut
        short) is rebuilt from the ledger."""
        while not stop.is_set():
            for event_id in self.events:
                try:
                    due = await store.read.recovering(event_id)
                except Exception:  # Redis down or failing over: asked again next round
                    continue
                if due:
                    await self.rebuild(event_id)
            await asyncio.sleep(1.0)

    async def watch_rebuilds(self, store: Store, stop: asyncio.Event) -> None:
        """With nobody at the keyboard (--lose-redis): every 50 ms, each event that cannot be
        sold from this Redis (lost, fenced, being rebuilt) is written down when first seen so,
        and again when it sells again: the rebuilds the ledger process made by itself."""
        open_: dict[str, Recovery] = {}
        while not stop.is_set():
            for event_id in self.events:
                try:
                    down = await unanswerable(store, event_id)
                except Exception:  # Redis down: asked again next round
                    continue
                if down and event_id not in open_:
                    open_[event_id] = Recovery(event_id, self.now())
                    self.recoveries.append(open_[event_id])
                elif not down and event_id in open_:
                    record = open_.pop(event_id)
                    record.done_s, record.ok = self.now(), True
            await asyncio.sleep(0.05)

    async def rebuild(self, event_id: str) -> None:
        record = Recovery(event_id, self.now())
        self.recoveries.append(record)
        deadline = time.monotonic() + REBUILD_WINDOW_S
        log = self.servers.stack.log_dir / "rebuild.log"
        while not record.ok and time.monotonic() < deadline:
            record.tries += 1
            record.ok = await run_onsale(self.servers.stack, log, "rebuild", event_id, "--force")
            if not record.ok:
                await asyncio.sleep(1.0)
        record.done_s = self.now()


async def unanswerable(store: Store, event_id: str) -> bool:
    """The event cannot be sold from this Redis now: gone, fenced or being rebuilt."""
    (status,) = await store.read.event_fields(event_id, "status")
    return not status or await store.read.recovering(event_id)


def _retried(start: Callable[[], None]) -> None:
    """Call `start` until it does not raise (a server still shutting down, a port not free
    yet), at most RESTART_TRIES_MAX times."""
    for attempt in range(RESTART_TRIES_MAX):
        try:
            start()
            return
        except (RuntimeError, OSError):
            if attempt == RESTART_TRIES_MAX - 1:
                raise
            time.sleep(0.5)


async def run_onsale(stack: LocalStack, log: Path, *args: str) -> bool:
    """`onsale <args>` as its own process against the stack; True on exit 0. Its output is
    appended to `log`."""
    with log.open("ab") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "onsale.cli",
            *args,
            env=stack.env(),
            stdout=out,
            stderr=out,
        )
        try:
            async with asyncio.timeout(120):
                return await proc.wait() == 0
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return False
