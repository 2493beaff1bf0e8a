"""Spare ports for the servers the tools and tests start (loadtest/devstack/stack.py): free when
handed out, never the same one twice from a process, never in the kernel's ephemeral range (where an
outgoing connection could take it before the server binds it)."""

import socket

from loadtest.devstack.stack import SPARE_PORTS, spare_port


def ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except OSError:
        return 32_768


def test_spare_ports_are_distinct_free_and_below_the_ephemeral_range() -> None:
    ports = [spare_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    assert all(p in SPARE_PORTS and p < ephemeral_low() for p in ports)
    for port in ports[:20]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # still free: nothing took it
