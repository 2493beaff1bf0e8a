"""The servers `onsale chaos` starts for itself and kills: one Redis with the persistence the
engine requires (docs/decisions/0009: AOF, fsync on every write) or a local Redis Cluster
(loadtest/devstack/cluster.py), and a PostgreSQL of its own (initdb, pg_ctl) for the ledger. Each
listens on a spare loopback port in a directory of the run's; the shared servers are never
touched. A kill is kill -9 (no shutdown, no save, no checkpoint); a restart starts the same
server from the same directory."""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from loadtest.devstack.stack import spare_port

# ADR 0009: a decision told is on disk before the reply (a kill -9 then loses nothing).
DURABLE_REDIS_FLAGS = ("--appendonly", "yes", "--appendfsync", "always", "--save", "")


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class DurableRedis:
    """One redis-server with AOF and `appendfsync always`, killed with -9 and started again from
    its directory (it replays its AOF)."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (make up installs it)")
        self.binary, self.workdir, self.port = binary, workdir, spare_port()
        self.proc: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout_s: float = 30.0) -> None:
        self.proc = subprocess.Popen(
            [
                self.binary,
                *("--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.workdir)),
                *("--logfile", "redis.log"),
                *DURABLE_REDIS_FLAGS,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout_s  # loading a long AOF takes a while
        while time.monotonic() < deadline:
            if _ping(self.port):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on {self.port} did not start; see {self.workdir}")

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None

    def stop(self) -> None:
        self.kill()

    def wipe(self) -> None:
        """Delete what it would start from (its AOF and any snapshot): the next start is an
        empty Redis, as a lost disk or a replaced machine would be."""
        shutil.rmtree(self.workdir / "appendonlydir", ignore_errors=True)
        (self.workdir / "dump.rdb").unlink(missing_ok=True)


def _pg_bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    if not candidates:
        raise RuntimeError(f"{name} is not installed (make up installs PostgreSQL)")
    return str(candidates[-1])


class CrashablePostgres:
    """A throwaway PostgreSQL cluster (initdb) on a spare port, run as the `postgres` user when
    this runs as root (PostgreSQL refuses root). `kill` is kill -9 of the postmaster: no
    checkpoint, crash recovery at the next start."""

    def __init__(self, workdir: Path) -> None:
        self.port = spare_port()
        self.workdir = workdir
        self.data, self.sock, self.log = workdir / "pgdata", workdir / "pgsock", workdir / "pg.log"
        self.as_postgres: list[str] = []
        if os.geteuid() == 0:
            self.as_postgres = ["runuser", "-u", "postgres", "--"]
        for path in (workdir, self.data, self.sock):
            path.mkdir(parents=True, exist_ok=True)
            if self.as_postgres:
                shutil.chown(path, "postgres")
        os.chmod(workdir, 0o755)
        os.chmod(self.data, 0o700)
        initdb = [_pg_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"]
        subprocess.run([*self.as_postgres, *initdb], check=True, capture_output=True, timeout=120)

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def alive(self) -> bool:
        return self._postmaster() is not None

    def _ctl(self, *args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [*self.as_postgres, _pg_bin("pg_ctl"), "-D", str(self.data), *args],
            capture_output=True,
            timeout=timeout_s,
        )

    def start(self, timeout_s: float = 60.0) -> None:
        """Start (after a kill -9 its last children may still hold shared memory for a moment:
        the start is tried again until they are gone)."""
        options = f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c fsync=on"
        deadline = time.monotonic() + timeout_s
        while True:
            done = self._ctl("-l", str(self.log), "-w", "-t", "30", "-o", options, "start")
            if done.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not start: {done.stderr.decode()[-500:]}")
            time.sleep(0.2)

    def _postmaster(self) -> int | None:
        try:
            pid = int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, ValueError, IndexError):
            return None
        return None if state in ("Z", "X") else pid  # a zombie is dead, unreaped

    def kill(self) -> None:
        pid = self._postmaster()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while self._postmaster() == pid and time.monotonic() < deadline:
                time.sleep(0.02)

    def stop(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError):
            if self._ctl("-m", "immediate", "stop", timeout_s=30).returncode != 0:
                self.kill()
