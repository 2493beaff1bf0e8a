"""A local Redis Cluster from the installed `redis-server`: N primaries with R replicas each, on
spare ports, in a directory of its own. Used by the cluster tests (tests/cluster/), the cluster
benchmark and `onsale chaos --cluster`. Never touches a server it did not start.

    cluster = LocalCluster(Path("/tmp/c"), primaries=3, replicas=1)
    cluster.start()              # about a second: nodes up, slots assigned, replicas attached
    cluster.url                  # redis://127.0.0.1:<port>/0?cluster=true (the engine's form)
    cluster.kill_primary_of(slot)  # kill -9 the primary owning `slot`
    cluster.wait_failover(slot)  # until a replica owns it and the cluster says ok
    cluster.stop()
"""

import random
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from redis import Redis
from redis.crc import key_slot

SLOTS = 16384
BUS_OFFSET = 10_000  # a node's cluster bus listens on its port + 10000 (so the port <= 55535)


@dataclass
class Node:
    port: int
    workdir: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def client(self) -> Redis:
        return Redis(port=self.port, decode_responses=True, socket_timeout=5)


@dataclass
class LocalCluster:
    workdir: Path
    primaries: int = 3
    replicas: int = 1
    # Failover in about a second once a primary stops answering (production keeps 15 s).
    node_timeout_ms: int = 1000
    extra_flags: tuple[str, ...] = ("--appendonly", "no", "--save", "")
    nodes: list[Node] = field(default_factory=list)

    @property
    def url(self) -> str:
        """The engine's cluster URL form (engine/config/settings.py): any node is a seed."""
        seed = next(n for n in self.nodes if n.alive)
        return f"redis://127.0.0.1:{seed.port}/0?cluster=true"

    def start(self, timeout_s: float = 30.0) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed")
        for _ in range(self.primaries * (1 + self.replicas)):
            node = Node(_cluster_port(), self.workdir / f"node-{len(self.nodes)}")
            self.nodes.append(node)
            self._spawn(binary, node)
        for node in self.nodes:
            try:
                _wait_ping(node.port, timeout_s)
            except RuntimeError as exc:
                log = node.workdir / "redis.log"
                tail = log.read_text()[-2000:] if log.exists() else "(no log)"
                raise RuntimeError(f"{exc}; its log ends:\n{tail}") from exc
        self._create(timeout_s)

    def _spawn(self, binary: str, node: Node) -> None:
        node.workdir.mkdir(parents=True, exist_ok=True)
        node.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(node.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(node.workdir),
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                str(self.node_timeout_ms),
                "--cluster-replica-validity-factor",
                "0",  # any replica may take over, however long it was cut off
                # A replica's first copy starts at once (the default waits 5 s for more
                # replicas to share one transfer): a test does not wait seconds for it.
                "--repl-diskless-sync-delay",
                "0",
                "--logfile",
                "redis.log",
                *self.extra_flags,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def _create(self, timeout_s: float) -> None:
        cli = shutil.which("redis-cli")
        if cli is None:
            raise RuntimeError("redis-cli is not installed")
        hosts = [f"127.0.0.1:{n.port}" for n in self.nodes]
        replicas = ("--cluster-replicas", str(self.replicas), "--cluster-yes")
        subprocess.run(
            [cli, "--cluster", "create", *hosts, *replicas],
            check=True,
            capture_output=True,
            timeout=timeout_s,
        )
        self.wait_ok(timeout_s)

    def wait_ok(self, timeout_s: float = 30.0) -> None:
        """Until every live node says cluster_state:ok and sees every slot covered, and is
        settled in its role: a replica whose link to its primary is up (its first full copy
        done), or a primary that serves slots, every replica of it online. A node that is still
        a primary without slots (just created, or restarted, and not yet told it is a replica)
        is not settled: a cluster whose replicas had not begun their first copy was called ok,
        and a replica promoted with nothing in it lost every event of its slots."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            live = [n for n in self.nodes if n.alive]
            if all(_cluster_ok(n) for n in live) and all(_replica_synced(n) for n in live):
                return
            time.sleep(0.1)
        raise RuntimeError("the local cluster did not become ok")

    def owner(self, slot: int) -> Node:
        """The live node that serves `slot` as a primary."""
        for node in self.nodes:
            if not node.alive:
                continue
            with node.client() as c:
                for start, end, primary, *_ in c.execute_command("CLUSTER", "SLOTS"):
                    if start <= slot <= end and int(primary[1]) == node.port:
                        return node
        raise RuntimeError(f"no live primary serves slot {slot}")

    def owner_of_key(self, key: str) -> Node:
        return self.owner(key_slot(key.encode()))

    def primary_ports(self) -> list[int]:
        ports = set()
        for node in self.nodes:
            if node.alive:
                with node.client() as c:
                    ports |= {int(p[1]) for _s, _e, p, *_ in c.execute_command("CLUSTER", "SLOTS")}
                return sorted(ports)
        return []

    def migrate_slot(self, slot: int, to: Node, batch: int = 10, between_s: float = 0.0) -> None:
        """Move `slot` to the primary `to`, `batch` keys per MIGRATE (the steps of
        `redis-cli --cluster reshard`, for one chosen slot): clients see ASK and TRYAGAIN while
        it moves, then MOVED."""
        src = self.owner(slot)
        assert src is not to
        with src.client() as s, to.client() as d:
            src_id, dst_id = (
                s.execute_command("CLUSTER", "MYID"),
                d.execute_command("CLUSTER", "MYID"),
            )
            d.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
            s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
            while names := s.execute_command("CLUSTER", "GETKEYSINSLOT", slot, batch):
                s.execute_command("MIGRATE", "127.0.0.1", to.port, "", 0, 5000, "KEYS", *names)
                time.sleep(between_s)
            primaries = self.primary_ports()
            rest = [n for n in self.nodes if n is not to and n is not src]
            for node in (to, src, *rest):  # the new owner first (the documented order)
                if node.alive and node.port in primaries:
                    with node.client() as c:
                        c.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)

    def replica_of(self, primary: Node) -> Node:
        with primary.client() as c:
            info = c.info("replication")
        ports = {
            int(v["port"]) for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)
        }
        return next(n for n in self.nodes if n.port in ports and n.alive)

    def pause(self, node: Node) -> None:
        """SIGSTOP: the node stops reading (a replica falls behind its primary)."""
        assert node.proc is not None
        node.proc.send_signal(signal.SIGSTOP)

    def cut_replicas(self, primary: Node) -> None:
        """Close the primary's replication links: what it writes next reaches no replica until
        one reconnects (a paused one cannot)."""
        with primary.client() as c:
            c.client_kill_filter(_type="replica")

    def resume(self, node: Node) -> None:
        assert node.proc is not None
        node.proc.send_signal(signal.SIGCONT)

    def kill(self, node: Node) -> None:
        """kill -9: no shutdown, no save."""
        if node.proc is not None:
            node.proc.kill()
            node.proc.wait(10)
            node.proc = None

    def kill_primary_of(self, slot: int) -> Node:
        node = self.owner(slot)
        self.kill(node)
        return node

    def wait_failover(self, slot: int, old: Node, timeout_s: float = 30.0) -> Node:
        """Until a live node other than `old` serves `slot` and the cluster is ok again."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                node = self.owner(slot)
                if node is not old:
                    self.wait_ok(max(0.1, deadline - time.monotonic()))
                    return node
            except (RuntimeError, OSError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"no replica took over slot {slot}")

    def restart(self, node: Node) -> None:
        """Start a killed node again on its port and directory: it rejoins (as a replica of
        whoever took its slots, by its nodes.conf)."""
        binary = shutil.which("redis-server")
        assert binary is not None and node.proc is None
        self._spawn(binary, node)
        _wait_ping(node.port, 10)
        self.wait_ok()

    def stop(self) -> None:
        for node in self.nodes:
            self.kill(node)


def _cluster_port() -> int:
    """A port that is free, with its bus port (port + 10000) free too."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20_000, 45_000)
        if _bindable(port) and _bindable(port + BUS_OFFSET):
            return port
    raise RuntimeError("no spare port pair for a cluster node")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _wait_ping(port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"redis-server on {port} did not start")


def _replica_synced(node: Node) -> bool:
    """A replica whose link to its primary is up, or a primary that serves slots and whose
    replicas are all online (copied and streaming)."""
    try:
        with node.client() as c:
            info = c.info("replication")
            if info.get("role") != "master":
                return bool(info.get("master_link_status") == "up")
            nodes = str(c.execute_command("CLUSTER", "NODES"))
    except Exception:
        return False
    myself = next((line.split() for line in nodes.splitlines() if "myself" in line), [])
    replicas = [v for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)]
    return len(myself) > 8 and all(r.get("state") == "online" for r in replicas)


def _cluster_ok(node: Node) -> bool:
    try:
        with node.client() as c:
            info = c.execute_command("CLUSTER", "INFO")
    except OSError:
        return False
    except Exception:
        return False
    text = info if isinstance(info, str) else str(info)
    return "cluster_state:ok" in text and f"cluster_slots_ok:{SLOTS}" in text
