"""What differs between one Redis server and a Redis Cluster, in one place (ADR 0030). The
engine's code paths are the same for both: every key of an event carries the event's hash tag,
every script call names only such keys, and the client routes each call to the slot's primary.
The differences are the client's own: how a batch of calls is sent (one connection, or one per
node) and which servers a whole-deployment command (FUNCTION LOAD, SCAN) must reach.

`NodeBatches` sends a batch of packed calls per node, each group on one of that node's pooled
connections, exactly as engine/store/pipeline.py does on one server: the calls' slots are read from
the client's own slot map. A call answered MOVED, ASK, TRYAGAIN or CLUSTERDOWN (a slot moving,
a failover under way), and every call of a node that cannot be reached, is handed back to be
sent through the cluster client itself, which follows the redirections and refreshes its map.
Every script is idempotent by the ids it is given, so a call sent again decides nothing twice."""

import asyncio
import contextlib
import math
from collections.abc import Sequence
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ClusterError,
    MaxConnectionsError,
    RedisClusterException,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

SLOTS_MAX = 100_000  # cached key -> slot entries; cleared when full
REFRESH_S = 0.5  # the slot map is read again at most this often after a node was unreachable
# Replies that mean "not here, not now": the call is sent again through the cluster client.
REDIRECTED = (AskError, TryAgainError, ClusterDownError)  # MovedError is an AskError


# What an outage looks like from the client, on one server or a cluster: no connection, no
# answer in time, the cluster down or mid-failover (CLUSTERDOWN, TRYAGAIN, a redirection still
# there after the client's retries), or no node reachable to read the slot map from.
OUTAGES: tuple[type[BaseException], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    TimeoutError,
    ClusterError,
    ClusterDownError,
    TryAgainError,
    AskError,
    RedisClusterException,
)
# Modules whose own AttributeError or RuntimeError means a connection torn down under a call
# (a cluster connection reset by one coroutine while another writes on it, a closed transport).
CLIENT_MODULES = ("/redis/", "/uvloop/", "/asyncio/")


def is_cluster(client: Any) -> bool:
    return isinstance(client, RedisCluster)


def is_outage(exc: BaseException) -> bool:
    """An outage of the store (answered 503, retried), not a bug of ours (a 500)."""
    if isinstance(exc, OUTAGES):
        return True
    if not isinstance(exc, (AttributeError, RuntimeError)) or exc.__traceback__ is None:
        return False
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    return any(m in tb.tb_frame.f_code.co_filename for m in CLIENT_MODULES)


class NodeBatches:
    def __init__(self, client: Any) -> None:
        self.client = client
        self._slots: dict[str, int] = {}
        self.redirected = 0  # calls handed back to the cluster client
        self.refreshed = 0  # slot maps read again after a node could not be reached
        self._refreshed_at = -math.inf

    def _slot(self, key: str) -> int:
        slot = self._slots.get(key)
        if slot is None:
            if len(self._slots) >= SLOTS_MAX:
                self._slots.clear()
            slot = self._slots[key] = key_slot(key.encode())
        return slot

    async def send(self, first_keys: Sequence[str], packed: Sequence[bytes]) -> list[Any]:
        """Replies in call order; `None` where a call must be sent again through the cluster
        client (redirected, or its node unreachable)."""
        groups: dict[str, tuple[Any, list[int]]] = {}
        manager = self.client.nodes_manager
        for i, key in enumerate(first_keys):
            node = manager.get_node_from_slot(self._slot(key))
            groups.setdefault(node.name, (node, []))[1].append(i)
        replies: list[Any] = [None] * len(packed)
        results = await asyncio.gather(
            *(self._node(node, [packed[i] for i in idx]) for node, idx in groups.values()),
            return_exceptions=True,
        )
        unreachable = False
        for (_node, idx), result in zip(groups.values(), results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, (RedisConnectionError, RedisTimeoutError, OSError)):
                    raise result  # a bug of ours, or a cancellation
                self.redirected += len(idx)
                unreachable = True
                continue  # the node is gone: the cluster client finds the new owner
            for i, reply in zip(idx, result, strict=True):
                if isinstance(reply, REDIRECTED):
                    self.redirected += 1
                else:
                    replies[i] = reply
        if unreachable:
            await self._refresh()
        return replies

    async def _refresh(self) -> None:
        """A node could not be reached: read the slot map again (at most every REFRESH_S), so
        that the next batches go to whoever took its slots over rather than to it."""
        now = asyncio.get_running_loop().time()
        if now - self._refreshed_at < REFRESH_S:
            return
        self._refreshed_at = now
        self.refreshed += 1
        with contextlib.suppress(Exception):  # no node answers yet: the next failure retries
            await self.client.nodes_manager.initialize()

    async def _node(self, node: Any, packed: list[bytes]) -> list[Any]:
        try:
            conn = node.acquire_connection()
        except MaxConnectionsError:
            raise RedisConnectionError(f"no free connection to {node.name}") from None
        try:
            await conn.send_packed_command(packed)
            replies: list[Any] = []
            for _ in packed:
                try:  # the caller's deadline covers the batch: no timer per reply
                    replies.append(await conn.read_response(timeout=math.inf))
                except ResponseError as exc:
                    replies.append(exc)
        except Exception as exc:  # the node's connection failed mid-batch: hand the calls back
            await conn.disconnect()
            if is_outage(exc):
                raise RedisConnectionError(f"{node.name}: {exc!r}") from exc
            raise
        except BaseException:
            await conn.disconnect()
            raise
        finally:
            node.release(conn)
        return replies
