"""Auto-pipelining: script calls made in the same event-loop tick leave in one round trip.

Under a burst the cost of a claim is mostly the Redis client's per-call work (a pool checkout,
a retry wrapper, a timer, one socket write and one read each). `AutoPipeline.call` queues the
FCALL and returns a future; the first call of a tick schedules a flush, which sends every
queued call as one non-transactional pipeline on one of its own connections (kept for its
life, at most one per batch in flight) and hands each caller its own reply. Nothing changes
for Redis: each script still runs alone and atomically, in the order the calls were queued;
only the client's bookkeeping is shared (ADR 0011).

Bounds: at most `max_inflight` pipelines are on the wire per process, at most `max_batch`
calls each; while all are busy, calls wait in the queue and the next flush takes them
together, so batches grow with load instead of connections. A call's whole wait (the queue,
the pool, the round trip) is bounded by one `timeout_s` counted from the moment it was queued:
a call that waited in the queue that long is failed (StoreUnavailable) without being sent, and
a batch must answer before the deadline of its oldest call, or all its calls fail the same way
(never a fresh `timeout_s` on top of the queue wait: that stacked to twice the setting when
Redis froze). Like a timed-out single call, their outcome is unknown to the caller and a retry
with the same idempotency key is the way to learn it."""

import asyncio
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from engine.model import errors
from engine.store.cluster import NodeBatches, is_cluster, is_outage
from engine.store.replicas import ReplicaWait
from engine.store.scripts import Scripts, missing_function

HEADS_MAX = 10_000  # cached command heads (script x event); cleared when full


@dataclass(slots=True)
class _Call:
    name: str
    keys: list[str]
    args: list[Any]
    future: "asyncio.Future[Any]"
    queued: float  # loop.time() when queued; the call's deadline is queued + timeout_s
    command: bool = False  # a plain command (`args` is all of it), not a script call


@dataclass
class PipelineStats:
    calls: int = 0
    batches: int = 0
    largest: int = 0
    expired: int = 0
    resent: int = 0  # batches sent again on a fresh connection after a connection error
    connections: int = 0  # taken from the client's pool and kept (at most max_inflight)


class AutoPipeline:
    def __init__(
        self,
        client: "aioredis.Redis",
        scripts: Scripts,
        *,
        timeout_s: float,
        max_batch: int = 512,
        max_inflight: int = 4,  # 4 against 2: +4% sustained claims at AOF always (journal 55)
        wait: ReplicaWait | None = None,
    ) -> None:
        self.client = client
        self.scripts = scripts
        self.timeout_s = timeout_s
        self.max_batch = max_batch
        self.max_inflight = max_inflight
        self.stats = PipelineStats()
        self._queue: deque[_Call] = deque()
        self._scheduled = False
        self._inflight = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._heads: dict[tuple[str, str], bytes] = {}
        self._held: list[Any] = []  # the pipeline's own connections, idle (`_checkout`)
        self._encoder = client.get_encoder()  # type: ignore[no-untyped-call]
        self._utf8 = (self._encoder.encoding, self._encoder.encoding_errors) == ("utf-8", "strict")
        self._cluster = is_cluster(client)
        self._nodes = NodeBatches(client) if self._cluster else None
        self.wait = wait  # answer only what replicas acknowledged (engine/store/replicas.py)

    def call(self, name: str, keys: list[str], args: Sequence[Any]) -> "asyncio.Future[list[Any]]":
        """The script `name` (FCALL), queued: its reply, or its error raised."""
        return self._queued(name, keys, list(args), command=False)

    def command(self, *args: Any) -> "asyncio.Future[Any]":
        """Any single command that is not a script call (a read, an XADD), sent with the calls
        of its tick: its first argument after the name is its key (it routes the command on a
        cluster). The reply as Redis gave it (no redis-py response callback): use it for the
        commands whose raw reply is their value (HGET, HMGET, XADD). A plain redis-py call
        costs about 100-150 us of CPU of its own (the pool's checkout, a task and two timers);
        a queued one shares its batch's."""
        return self._queued(args[0], [args[1]], list(args), command=True)

    def _queued(
        self, name: str, keys: list[str], args: list[Any], *, command: bool
    ) -> "asyncio.Future[Any]":
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._queue.append(_Call(name, keys, args, future, loop.time(), command))
        if not self._scheduled and self._inflight < self.max_inflight:
            self._scheduled = True
            loop.call_soon(self._flush)
        return future

    def _flush(self) -> None:
        self._scheduled = False
        while self._queue and self._inflight < self.max_inflight:
            batch = self._take()
            if not batch:
                continue
            self._inflight += 1
            task = asyncio.get_running_loop().create_task(self._send(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _take(self) -> list[_Call]:
        """Up to max_batch live calls; calls that waited too long fail without being sent."""
        batch: list[_Call] = []
        oldest_allowed = asyncio.get_running_loop().time() - self.timeout_s
        while self._queue and len(batch) < self.max_batch:
            c = self._queue.popleft()
            if c.future.done():  # the caller went away (cancelled): nothing to send
                continue
            if c.queued < oldest_allowed:
                self.stats.expired += 1
                c.future.set_exception(errors.StoreUnavailable(f"{c.name}: queued too long"))
                continue
            batch.append(c)
        return batch

    async def _send(self, batch: list[_Call]) -> None:
        self.stats.calls += len(batch)
        self.stats.batches += 1
        self.stats.largest = max(self.stats.largest, len(batch))
        deadline = batch[0].queued + self.timeout_s  # FIFO: batch[0] is the oldest call
        try:
            replies = await self._execute(batch, deadline)
            if self.wait is not None and not await self._replicated(batch, deadline):
                replies = [errors.StoreUnavailable(f"{c.name}: not on replicas") for c in batch]
        except Exception as exc:
            if not is_outage(exc):
                _answer(batch, [exc] * len(batch))  # a bug: no caller may wait forever
                raise
            _answer(batch, [errors.StoreUnavailable(f"{c.name}: {exc!r}") for c in batch])
        except BaseException as exc:  # cancellation: no caller may wait forever
            _answer(batch, [exc] * len(batch))
            raise
        else:
            _answer(batch, replies)
        finally:
            self._inflight -= 1
            if self._queue and not self._scheduled:
                self._scheduled = True
                asyncio.get_running_loop().call_soon(self._flush)

    async def _replicated(self, batch: list[_Call], deadline: float) -> bool:
        assert self.wait is not None
        async with asyncio.timeout_at(deadline):
            return await self.wait.acknowledged([c.keys[0] for c in batch])

    def _packed(self, c: _Call) -> bytes:
        """RESP bytes of `FCALL function numkeys keys... args...`; the part before the args is
        the same for every call of one script on one event, so it is built once. A plain
        command: its arguments as they are."""
        encode = self._encoder.encode
        if c.command:
            return b"".join([b"*%d\r\n" % len(c.args), *bulk_args(c.args, encode, self._utf8)])
        head_key = (c.name, c.keys[0])
        head = self._heads.get(head_key)
        if head is None:
            if len(self._heads) >= HEADS_MAX:
                self._heads.clear()
            fn = self.scripts.function(c.name)
            head = b"".join(_bulk(p.encode()) for p in ("FCALL", fn, str(len(c.keys)), *c.keys))
            self._heads[head_key] = head
        parts = [b"*%d\r\n" % (3 + len(c.keys) + len(c.args)), head]
        parts += bulk_args(c.args, encode, self._utf8)
        return b"".join(parts)

    async def _execute(self, batch: list[_Call], deadline: float) -> list[Any]:
        """The batch on one connection, sent once more on a fresh one if the first fails with
        a connection error: a kept connection to a server that restarted fails on its first
        use, and every script is idempotent by the ids it is given (a replay answers
        the first outcome), so the second send cannot decide anything twice. One deadline
        covers both, and the time the calls spent queued."""
        try:
            return await self._execute_once(batch, deadline)
        except RedisConnectionError:
            self.stats.resent += 1
            return await self._execute_once(batch, deadline)

    async def _execute_once(self, batch: list[_Call], deadline: float) -> list[Any]:
        """One write of every packed call, then one read per call, on one of the pipeline's own
        connections. Error replies belong to their own call; a transport failure fails the
        batch (and disconnects the connection: it connects anew on its next use). One timeout
        covers taking the connection and the I/O."""
        if self._cluster:
            return await self._execute_cluster(batch, deadline)
        replies: list[Any] = []
        conn = None
        try:
            async with asyncio.timeout_at(deadline):
                conn = self._held.pop() if self._held else await self._checkout()
                await conn.send_packed_command([self._packed(c) for c in batch])
                for _ in batch:
                    try:  # math.inf: no timer per reply, the batch's own deadline covers it
                        replies.append(await conn.read_response(timeout=math.inf))
                    except ResponseError as exc:
                        replies.append(exc)
        except BaseException:
            if conn is not None:
                await conn.disconnect(nowait=True)
            raise
        finally:
            if conn is not None:
                self._held.append(conn)
        if any(missing_function(r) for r in replies):
            return await self._after_missing(batch, replies, deadline)
        return replies

    async def _checkout(self) -> Any:
        """A connection of the client's pool that the pipeline keeps for its life (at most
        `max_inflight`: one per batch in flight; closed with the client's pool). Taking one
        from the pool and giving it back per batch cost more than the rest of a batch's client
        work (redis-py's pool locks, timer and checks, and a task to shield the release), and
        its socket timeout wrapped every write in a task of its own: the batch's deadline
        bounds both here, so the kept connection has none."""
        conn = await self.client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
        conn.socket_timeout = None
        self.stats.connections += 1
        return conn

    async def _execute_cluster(self, batch: list[_Call], deadline: float) -> list[Any]:
        """Redis Cluster: one packed batch per node, as on one server (engine/store/cluster.py); the
        calls redirected or cut off (a slot moving, a failover) go again through the cluster
        pipeline, which follows MOVED and ASK and refreshes the slot map. Each script still runs
        alone and atomically on its slot's primary; order holds within a slot."""
        assert self._nodes is not None
        async with asyncio.timeout_at(deadline):
            packed = [self._packed(c) for c in batch]
            replies = await self._nodes.send([c.keys[0] for c in batch], packed)
            again = [i for i, r in enumerate(replies) if r is None]
            if again:
                pipe: Any = self.client.pipeline(transaction=False)
                for i in again:
                    c = batch[i]
                    if c.command:
                        pipe.execute_command(*c.args)
                        continue
                    fn = self.scripts.function(c.name)
                    pipe.execute_command("FCALL", fn, len(c.keys), *c.keys, *c.args)
                for i, reply in zip(again, await pipe.execute(raise_on_error=False), strict=True):
                    replies[i] = reply
        return await self._after_missing(batch, replies, deadline)

    async def _after_missing(
        self, batch: list[_Call], replies: list[Any], deadline: float
    ) -> list[Any]:
        """A server that lost the library (restart, FUNCTION FLUSH, a promoted replica): run
        those calls one by one through Scripts.call, which loads it and calls again."""
        async with asyncio.timeout_at(deadline):
            for i, reply in enumerate(replies):
                if missing_function(reply) and not batch[i].command:
                    c = batch[i]
                    try:
                        replies[i] = await self.scripts.call(c.name, c.keys, c.args)
                    except (RedisConnectionError, RedisTimeoutError):
                        raise
                    except ResponseError as exc:  # the script's own error belongs to its caller
                        replies[i] = exc
        return replies


def _bulk(b: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(b), b)


def bulk_args(args: Sequence[Any], encode: Callable[[Any], bytes], utf8: bool) -> list[bytes]:
    """RESP bulk strings of `args`, as redis-py's encoder `encode` makes them. With a client
    that encodes UTF-8 strictly (`utf8`, the engine's), a str, nearly every argument of a call,
    is encoded here at once (about 0.4 µs an argument less than through its isinstance
    chain); anything else goes to `encode` (its bytes, int and float rules, its refusal of a
    bool or of another type)."""
    out = []
    for a in args:
        b = a.encode() if utf8 and a.__class__ is str else encode(a)
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return out


def _answer(batch: list[_Call], replies: list[Any]) -> None:
    """Each caller gets its own reply (an error reply is raised to that caller only)."""
    for c, reply in zip(batch, replies, strict=True):
        if c.future.done():
            continue
        if isinstance(reply, BaseException):
            c.future.set_exception(reply)
        else:
            c.future.set_result(reply)
