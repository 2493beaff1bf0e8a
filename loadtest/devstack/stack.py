"""Start the whole stack locally as separate processes: provider simulator, API, worker.

Used by the demo (`python -m loadtest.demo.main`), the load tools and the end-to-end tests. Every
process gets the same ONSALE_* environment; ports are spare ones unless given; stopping
terminates them all."""

import contextlib
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any

import httpx

# Worker loops tuned so that a short run settles within seconds (demo, purchase-flow load tests):
# holds swept, refunds retried and lost callbacks reconciled quickly.
QUICK_SETTLE_ENV: Mapping[str, str] = MappingProxyType(
    {
        "ONSALE_SWEEP_INTERVAL_MS": "50",
        "ONSALE_REFUND_INTERVAL_MS": "200",
        "ONSALE_RECONCILE_INTERVAL_MS": "500",
        "ONSALE_RECONCILE_STALE_MS": "2000",
        "ONSALE_RECONCILE_WATCH_MS": "60000",
        "ONSALE_PROVIDER_TIMEOUT_MS": "1000",
    }
)


# Below the kernel's ephemeral range (32768-60999 on Linux by default), so no outgoing
# connection takes a port between the moment it is chosen and the moment a server binds it, and
# below the cluster nodes' range (loadtest/devstack/cluster.py).
SPARE_PORTS = range(15_000, 20_000)
_handed: set[int] = set()  # never the same port twice from one process


def signal_group(proc: "subprocess.Popen[bytes]", sig: int) -> None:
    """Signal a process started in its own session and every process of its group (a server's
    workers); nothing when the group is gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def wait_group_gone(proc: "subprocess.Popen[bytes]", timeout_s: float) -> None:
    """Until no process of its group is left (killed workers take a moment to be reaped)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.02)
    raise RuntimeError(f"processes of group {proc.pid} still run {timeout_s}s after a kill")


def wait_port_free(port: int, timeout_s: float) -> None:
    """Until nothing accepts connections on 127.0.0.1:port (a killed server's workers gone)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) != 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"port {port} still answers {timeout_s}s after its server was killed")


def spare_port() -> int:
    """A port free on 127.0.0.1 now, for a server started next. Not bind(0): the kernel hands
    such a port out again to the next caller, or to an outgoing connection, before the server
    binds it (a ledger's metrics port was taken so under a loaded test run)."""
    rng = random.Random()
    for _ in range(1_000):
        port = rng.choice(SPARE_PORTS)
        if port in _handed:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed.add(port)
        return port
    raise RuntimeError(f"no spare port in {SPARE_PORTS.start}-{SPARE_PORTS.stop - 1}")


@dataclass
class LocalStack:
    redis_url: str
    key_prefix: str
    log_dir: Path
    api_workers: int = 1
    sim_args: tuple[str, ...] = ()
    extra_env: dict[str, str] = field(default_factory=dict)
    admin_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    token_secret: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    webhook_secret: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    api_port: int = field(default_factory=spare_port)
    sim_port: int = field(default_factory=spare_port)
    ledger_dsn: str = ""  # when set: migrate, then run the ledger writer too
    # simulator: its own protocol; stripe: the API and worker use the Stripe adapter (the
    # official library) against the simulator speaking Stripe's API (ADR 0023).
    provider: str = "simulator"
    stripe_api_key: str = field(default_factory=lambda: f"sk_test_{secrets.token_hex(16)}")
    stripe_webhook_secret: str = field(default_factory=lambda: f"whsec_{secrets.token_hex(16)}")
    stripe_publishable_key: str = field(default_factory=lambda: f"pk_test_{secrets.token_hex(16)}")
    ledger_metrics_port: int = field(default_factory=spare_port)
    worker_metrics_port: int = field(default_factory=spare_port)
    procs: list[tuple[str, subprocess.Popen[bytes], IO[bytes]]] = field(default_factory=list)
    # The API from another checkout (an earlier commit's tree, measured with today's tools):
    # run from that directory, its own command module (`onsale.cli`, or `engine.cli` before it).
    api_tree: Path | None = None

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def sim_url(self) -> str:
        return f"http://127.0.0.1:{self.sim_port}"

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "ONSALE_REDIS_URL": self.redis_url,
            "ONSALE_KEY_PREFIX": self.key_prefix,
            # The load tools and the demo log buyers in by name, all from this one address.
            "ONSALE_DEMO_LOGIN": "1",
            "ONSALE_ADDRESS_PER_S": "0",
            "ONSALE_TOKEN_SECRET": self.token_secret,
            "ONSALE_ADMIN_TOKEN": self.admin_token,
            "ONSALE_WEBHOOK_SECRET": self.webhook_secret,
            "ONSALE_PROVIDER_URL": self.sim_url,
            "ONSALE_PG_DSN": self.ledger_dsn,
            "ONSALE_LEDGER_METRICS_PORT": str(self.ledger_metrics_port),
            "ONSALE_WORKER_METRICS_PORT": str(self.worker_metrics_port),
            # Without a ledger nothing could ever be durable in it: decisions are told at once.
            "ONSALE_CONFIRM_AFTER": "ledger" if self.ledger_dsn else "redis",
            **self.provider_env(),
            **self.extra_env,
        }

    def provider_env(self) -> dict[str, str]:
        if self.provider != "stripe":
            return {"ONSALE_PROVIDER": "simulator"}
        return {
            "ONSALE_PROVIDER": "stripe",
            "ONSALE_STRIPE_API_KEY": self.stripe_api_key,
            "ONSALE_STRIPE_WEBHOOK_SECRET": self.stripe_webhook_secret,
            "ONSALE_STRIPE_API_BASE": self.sim_url,
            # The buyer's page pays through the simulator's Stripe.js stand-in (ADR 0039).
            "ONSALE_STRIPE_PUBLISHABLE_KEY": self.stripe_publishable_key,
            "ONSALE_STRIPE_JS_URL": f"{self.sim_url}/v3/",
        }

    def _start(
        self,
        name: str,
        *args: str,
        env: dict[str, str],
        module: str = "onsale.cli",
        append: bool = False,
    ) -> subprocess.Popen[bytes]:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        mode = "ab" if append else "wb"  # a restart keeps the log of the process it replaces
        out = open(self.log_dir / f"{name}.log", mode)  # noqa: SIM115 - closed in stop()
        # Its own process group: a stop or a kill reaches the processes it started too (the
        # API's workers), which would otherwise keep its port and answer the next phase.
        tree = self.api_tree if name == "api" else None
        if tree is not None:
            module = "onsale.cli" if (tree / "onsale" / "cli.py").exists() else "engine.cli"
            env = {**env, "PYTHONPATH": str(tree)}
        proc = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            env=env,
            cwd=tree,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs.append((name, proc, out))
        return proc

    def start(self, timeout_s: float = 30.0) -> None:
        env = self.env()
        sim = self._start(
            "provider-sim",
            "--port",
            str(self.sim_port),
            "--webhook-url",
            f"{self.api_url}/v1/provider/callbacks",
            *(("--wire", "stripe") if self.provider == "stripe" else ()),
            *self.sim_args,
            env=env,
            module="loadtest.provider_sim.server",
        )
        api = self._start_api(env)
        self._start("worker", "worker", env=env)
        if self.ledger_dsn:
            done = subprocess.run(
                [sys.executable, "-m", "onsale.cli", "migrate"],
                env=env,
                capture_output=True,
                timeout=60,
            )
            if done.returncode != 0:
                raise RuntimeError(f"onsale migrate failed: {done.stderr.decode()[-2000:]}")
            self._start("ledger", "ledger", env=env)
        try:
            for url, proc in ((self.sim_url, sim), (self.api_url, api)):
                wait_healthy(url, proc, timeout_s)
        except BaseException:
            self.stop()
            raise

    def admin_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_token}"}

    def create_event(
        self,
        event_id: str,
        seats: int | list[dict[str, Any]],
        *,
        opens_at_ms: int | None = 0,
        **options: Any,
    ) -> None:
        """Create an event through the admin API, open at `opens_at_ms` (None: a DRAFT);
        `seats` is a seat map, or a number of seats s0..s{n-1} ranked in order."""
        seat_map = (
            seats
            if isinstance(seats, list)
            else [{"seat_id": f"s{i}", "rank": i} for i in range(seats)]
        )
        body: dict[str, Any] = {"event_id": event_id, "seats": seat_map, **options}
        if opens_at_ms is not None:
            body["opens_at_ms"] = opens_at_ms
        r = httpx.post(
            f"{self.api_url}/v1/admin/events", json=body, headers=self.admin_headers(), timeout=120
        )
        if r.status_code != 201:
            raise RuntimeError(f"create event {event_id}: {r.status_code} {r.text[:300]}")

    def kill_api(self) -> None:
        """kill -9 the API, its workers included (a crash: no shutdown, requests in flight are
        cut), and wait until its port is free, so the next start is the only one answering."""
        self.kill("api")
        wait_port_free(self.api_port, 10.0)

    def _start_api(self, env: dict[str, str], append: bool = False) -> subprocess.Popen[bytes]:
        port, workers = str(self.api_port), str(self.api_workers)
        args = ("serve", "--port", port, "--workers", workers)
        return self._start("api", *args, env=env, append=append)

    def start_api(self, timeout_s: float = 30.0) -> None:
        """Start the API again (after kill_api), on the same port."""
        wait_healthy(self.api_url, self._start_api(self.env(), append=True), timeout_s)

    def kill(self, name: str) -> None:
        """kill -9 the named process: "api", "worker" or "ledger" (a crash: no shutdown)."""
        for each, proc, _out in self.procs:
            if each == name:
                signal_group(proc, signal.SIGKILL)
                proc.wait(10)
                wait_group_gone(proc, 10.0)

    def restart(self, name: str, timeout_s: float = 30.0) -> None:
        """Start the named process again (after `kill`, or after it exited), with the stack's
        environment as it is now; its log goes on in the same file."""
        if name == "api":
            self.start_api(timeout_s)
        elif name in ("worker", "ledger"):
            self._start(name, name, env=self.env(), append=True)
        else:
            raise ValueError(f"cannot restart {name!r}")

    def pid(self, name: str) -> int:
        """The pid of the latest process started under `name` (0: none)."""
        latest = [proc.pid for each, proc, _out in self.procs if each == name]
        return latest[-1] if latest else 0

    def running(self, name: str) -> bool:
        """The latest process started under `name` is still running."""
        latest = [proc for each, proc, _out in self.procs if each == name]
        return bool(latest) and latest[-1].poll() is None

    def stop(self) -> None:
        for _name, proc, _out in self.procs:
            signal_group(proc, signal.SIGTERM)
        for _name, proc, out in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
            signal_group(proc, signal.SIGKILL)  # whatever of its group is left, and it
            proc.wait(5)
            out.close()
        self.procs.clear()

    def alive(self) -> bool:
        """Every process still running (killed ones that were replaced do not count)."""
        latest = {name: proc for name, proc, _ in self.procs}
        return all(proc.poll() is None for proc in latest.values())


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by the process `pid` and every process under it
    (an API's uvicorn workers), read from /proc; 0.0 where there is no /proc or no such
    process. Read before and after a phase, it is what the phase cost the server, whatever
    else shares the machine."""
    total, todo, tick = 0.0, [pid], os.sysconf("SC_CLK_TCK")
    while todo:
        each = todo.pop()
        try:
            stat = Path(f"/proc/{each}/stat").read_text()
            tasks = list(Path(f"/proc/{each}/task").iterdir())
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        for task in tasks:
            with contextlib.suppress(OSError):
                todo.extend(int(c) for c in (task / "children").read_text().split())
    return total


def wait_healthy(
    url: str, proc: subprocess.Popen[bytes], timeout_s: float, path: str = "/healthz"
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: process exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}{path}", timeout=0.5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not become healthy within {timeout_s}s")
