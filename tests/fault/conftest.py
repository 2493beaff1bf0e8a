"""Private Redis servers on spare ports, for tests that kill or restart them. The shared
servers are never touched. Also `onsale serve` as a child process with its own limits."""

import contextlib
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import asyncpg
import pytest

from engine.store import Store
from loadtest.devstack.stack import LocalStack, spare_port, wait_healthy
from tests.conftest import REDIS_URL
from tests.pg import migrated_pool


class PrivateRedis:
    def __init__(self, workdir: Path, *flags: str) -> None:
        self.flags = list(flags) or ["--appendonly", "no"]
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.fail("redis-server is not installed; run `make test` (it installs it)")
        self.binary = binary
        self.port = spare_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--dir",
                str(self.workdir),
                *self.flags,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"private redis on {self.port} did not start")

    def kill(self) -> None:
        """kill -9: no shutdown, no save."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.kill()


@pytest.fixture
def durable_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    """The persistence the engine requires (docs/decisions/0009): AOF, fsync on every write."""
    server = PrivateRedis(tmp_path, "--appendonly", "yes", "--appendfsync", "always")
    server.start()
    yield server
    server.kill()


def _pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    if not candidates:
        pytest.fail(f"{name} is not installed; run `make test` (it installs PostgreSQL)")
    return str(candidates[-1])


class PrivatePostgres:
    """A throwaway cluster (initdb) on a spare port; `crash()` is an immediate shutdown (the
    server stops without a checkpoint, like a kill -9 of the postmaster)."""

    def __init__(self, workdir: Path) -> None:
        self.port = spare_port()
        self.data = workdir / "pgdata"
        self.sock = workdir / "pgsock"
        self.log = workdir / "pg.log"
        self.as_postgres: list[str] = []
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            self.as_postgres = ["runuser", "-u", "postgres", "--"]
        self.sock.mkdir(parents=True)
        self.data.mkdir(parents=True)
        if self.as_postgres:
            shutil.chown(workdir, "postgres")
            for p in (self.data, self.sock):
                shutil.chown(p, "postgres")
        subprocess.run(
            [
                *self.as_postgres,
                _pg_bin("initdb"),
                "-D",
                str(self.data),
                "-A",
                "trust",
                "-U",
                "postgres",
            ],
            check=True,
            capture_output=True,
        )

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _ctl(self, *args: str) -> None:
        subprocess.run(
            [*self.as_postgres, _pg_bin("pg_ctl"), "-D", str(self.data), *args],
            check=True,
            capture_output=True,
            timeout=60,
        )

    def start(self) -> None:
        self._ctl(
            "-l",
            str(self.log),
            "-w",
            "-o",
            f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c fsync=on",
            "start",
        )

    def crash(self) -> None:
        self._ctl("-m", "immediate", "stop")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._ctl("-m", "fast", "stop")


PG = TypeVar("PG", bound=PrivatePostgres)


@contextlib.contextmanager
def started(kind: type[PG]) -> Iterator[PG]:
    """A private cluster of `kind`, started; stopped and removed on leaving."""
    # Not under pytest's tmp dir: that one is private to root, and the server runs as postgres.
    workdir = Path(tempfile.mkdtemp(prefix="onsale-pg-"))
    os.chmod(workdir, 0o755)
    server = kind(workdir)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    with started(PrivatePostgres) as server:
        yield server


@pytest.fixture
async def pool() -> AsyncIterator[asyncpg.Pool]:
    """A private ledger database, migrated (the shared server is only a host for it)."""
    async with migrated_pool() as p:
        yield p


@pytest.fixture
async def opened() -> AsyncIterator[list[Store]]:
    """Stores to close at the end of the test (a killed server leaves their sockets open)."""
    stores: list[Store] = []
    yield stores
    for store in stores:
        await store.client.aclose()


class ServedApi:
    """`onsale serve` (one worker: the child is the server) on a spare port, with the stack's
    environment plus `env`, and an open-files limit (soft, hard) set before it starts."""

    def __init__(self, log_dir: Path, env: dict[str, str], open_files: tuple[int, int]) -> None:
        self.stack = LocalStack(
            redis_url=REDIS_URL, key_prefix=f"onsale:test:{uuid.uuid4().hex[:12]}", log_dir=log_dir
        )
        self.log_path = log_dir / "api.log"
        log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "onsale.cli", "serve", "--port", str(self.stack.api_port)],
                env={**self.stack.env(), **env},
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, open_files),
            )
        try:
            wait_healthy(self.stack.api_url, self.proc, 30.0)
        except BaseException:
            self.stop()
            raise

    @property
    def port(self) -> int:
        return self.stack.api_port

    def open_files_limit(self) -> tuple[int, int]:
        """The child's own (soft, hard) limit, as the kernel reports it."""
        for line in Path(f"/proc/{self.proc.pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
        raise AssertionError("no open-files line in /proc/<pid>/limits")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture
def served_api(tmp_path: Path) -> Iterator[Callable[..., ServedApi]]:
    """Start `onsale serve` children: `served_api(open_files=(soft, hard), **env)`; each is
    stopped at the end of the test."""
    started: list[ServedApi] = []

    def start(open_files: tuple[int, int] = (1024, 1024), **env: str) -> ServedApi:
        api = ServedApi(tmp_path / f"api{len(started)}", env, open_files)
        started.append(api)
        return api

    yield start
    for api in started:
        api.stop()
