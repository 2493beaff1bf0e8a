"""Wait for replicas before answering (ADR 0030): with `ONSALE_REDIS_WAIT_REPLICAS=n`, a batch of
script calls is answered only once `n` replicas of every server that ran one of them hold its
writes, or else fails as an outage (StoreUnavailable: the outcome is unknown to the caller, and
a retry with the same idempotency key gets the recorded answer, waited for again).

Redis's WAIT counts the writes made on its own connection, and the calls of a batch ran on
connections the client chose. So after a batch, each server involved gets, on one connection,
an INCR of a fence key in a slot it serves, then WAIT: the replication stream is ordered, so
once a replica has the fence it has every write that server made before it, the batch's
included. One round trip per server per batch, not per call.

What this buys: a claim or a payment outcome told to a client survives the failover of its
primary to a replica that acknowledged it. What it does not: WAIT is not a consensus (a replica
that acknowledged can itself be lost, and a failover may still promote a replica that did not,
if none that did is reachable); see the ADR for the exact promise per configuration."""

import asyncio
from typing import Any

import redis.asyncio as aioredis
from redis.crc import key_slot
from redis.exceptions import AskError, MovedError

from engine.model import keys
from engine.store.cluster import is_cluster


class ReplicaWait:
    def __init__(
        self, client: "aioredis.Redis", *, prefix: str, replicas: int, timeout_ms: int
    ) -> None:
        assert replicas > 0 and timeout_ms > 0
        self.client, self.prefix = client, prefix
        self.replicas, self.timeout_ms = replicas, timeout_ms
        self.waits = 0  # fence + WAIT round trips
        self.short = 0  # of those, answered by fewer replicas than asked for
        self._nodes: dict[str, aioredis.Redis] = {}  # cluster: one plain client per primary

    async def acknowledged(self, event_keys: list[str]) -> bool:
        """True when every server that holds one of these keys has `replicas` replicas with
        all of its writes so far."""
        groups = self._groups(event_keys)
        done = await asyncio.gather(*(self._fence(c, key) for c, key in groups))
        return all(done)

    def _groups(self, event_keys: list[str]) -> list[tuple["aioredis.Redis", str]]:
        """(a client on one connection's worth of that server, a fence key it serves)."""
        if not is_cluster(self.client):
            return [(self.client, self._fence_key(event_keys[0]))]
        cluster: Any = self.client
        found: dict[str, tuple[aioredis.Redis, str]] = {}
        for key in event_keys:
            node = cluster.get_node_from_key(key)
            if node.name not in found:
                found[node.name] = (self._node_client(node), self._fence_key(key))
        return list(found.values())

    def _fence_key(self, event_key: str) -> str:
        slot = key_slot(event_key.encode())
        return f"{self.prefix}:fence:{{{keys.slot_tag(slot)}}}"

    def _node_client(self, node: Any) -> "aioredis.Redis":
        client = self._nodes.get(node.name)
        if client is None:
            kwargs = node.connection_kwargs
            client = aioredis.Redis(
                host=node.host,
                port=node.port,
                decode_responses=True,
                socket_timeout=kwargs.get("socket_timeout"),
                socket_connect_timeout=kwargs.get("socket_connect_timeout"),
            )
            self._nodes[node.name] = client
        return client

    async def _fence(self, client: "aioredis.Redis", fence_key: str) -> bool:
        try:
            async with client.pipeline(transaction=False) as pipe:  # one connection: INCR, WAIT
                pipe.incr(fence_key)
                pipe.wait(self.replicas, self.timeout_ms)
                _, acked = await pipe.execute()
        except (MovedError, AskError):
            # The slot moved (a failover, a resharding) since the client's map was read: not
            # known to be on replicas; the map is read again for the caller's retry.
            self.short += 1
            await self._refresh()
            return False
        self.waits += 1
        if int(acked) < self.replicas:
            self.short += 1
            return False
        return True

    async def _refresh(self) -> None:
        if is_cluster(self.client):
            cluster: Any = self.client
            await cluster.nodes_manager.initialize()

    async def aclose(self) -> None:
        for client in self._nodes.values():
            await client.aclose()
        self._nodes.clear()
