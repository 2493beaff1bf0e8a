"""Auto-pipelining (engine/store/pipeline.py): calls of one tick share one round trip, each caller
gets its own reply or its own error, lost scripts are reloaded, and a caller never waits
without bound."""

import asyncio

import fakeredis
import pytest
import redis.asyncio as aioredis

from engine.model import errors
from engine.store import Store
from engine.store.scripts import Scripts
from loadtest.devstack.stack import spare_port
from tests.conftest import EVERY_BACKEND, new_prefix, open_sale

T0 = 1_900_000_000_000


@pytest.mark.parametrize("store", EVERY_BACKEND, indirect=True)  # the cluster path too
async def test_one_tick_is_one_batch_and_replies_keep_their_order(store: Store) -> None:
    assert store.pipeline is not None
    sale = await open_sale(store, 5, now_ms=T0)
    before = store.pipeline.stats.batches
    results = await asyncio.gather(
        *(store.claim(sale.event_id, f"u{i}", f"h{i}") for i in range(8)),
        store.claim(sale.event_id, "u0", "h0"),  # the same key again: a replay
        store.claim(sale.event_id, "x", "h1"),  # someone else's key
        return_exceptions=True,
    )
    assert store.pipeline.stats.batches == before + 1
    seats = [r.listing for r in results[:5] if not isinstance(r, BaseException)]
    assert seats == [f"s0000{i}" for i in range(5)]  # queued order is execution order
    assert all(isinstance(r, errors.SoldOut) for r in results[5:8])
    replay = results[8]
    assert not isinstance(replay, BaseException) and replay.replay and replay.listing == "s00000"
    assert isinstance(results[9], errors.IdempotencyKeyReused)
    await sale.audit_ok()


async def test_batches_keep_their_own_connections(real_store: Store) -> None:
    """A batch does not take a connection from the client's pool and give it back (that cost
    more than the rest of its client work): one after another, every batch goes on the one
    connection the pipeline took first; many at once, on at most `max_inflight` (one server: a
    cluster's batches take their node's connection, engine/store/cluster.py)."""
    store = real_store
    assert store.pipeline is not None
    sale = await open_sale(store, 200, now_ms=T0)
    for i in range(30):
        await store.claim(sale.event_id, f"u{i}", f"h{i}")
    assert store.pipeline.stats.connections == 1
    for round_ in range(5):
        await asyncio.gather(
            *(store.claim(sale.event_id, f"v{round_}-{i}", f"k{round_}-{i}") for i in range(20)),
            *(store.read.availability(sale.event_id) for _ in range(5)),
        )
    assert store.pipeline.stats.connections <= store.pipeline.max_inflight
    await sale.audit_ok()


@pytest.mark.parametrize("store", EVERY_BACKEND, indirect=True)  # the cluster path too
async def test_reads_and_notes_go_with_the_script_calls_of_their_tick(store: Store) -> None:
    """A request's plain commands (a hold read, its charges, an event's fields, a callback's raw
    copy) are queued with the script calls of the same tick: one round trip for all, each its
    own reply."""
    assert store.pipeline is not None
    sale = await open_sale(store, 5, now_ms=T0)
    first = await store.claim(sale.event_id, "u0", "h0")
    before, calls = store.pipeline.stats.batches, store.pipeline.stats.calls
    claimed, hold, charges, fields, _kept = await asyncio.gather(
        store.claim(sale.event_id, "u1", "h1"),
        store.read.hold(sale.event_id, first.hold_id),
        store.read.charges(sale.event_id, ["nope"]),
        store.read.event_fields(sale.event_id, "status", "nothing"),
        store.notes.keep_raw_callback(sale.event_id, "evt_1", b'{"raw": 1}', 100),
    )
    assert store.pipeline.stats.batches == before + 1
    assert store.pipeline.stats.calls == calls + 5  # the claim and the four commands
    assert claimed.listing == "s00001" and hold.login == "u0" and hold.listing == "s00000"
    assert charges == [] and fields == ["open", None]
    assert [e["provider_event_id"] for e in await store.read.raw_callbacks(sale.event_id)] == [
        "evt_1"
    ]
    with pytest.raises(errors.HoldNotFound):
        await store.read.hold(sale.event_id, "no-such-hold")


@pytest.mark.parametrize("store", EVERY_BACKEND, indirect=True)  # the cluster path too
async def test_a_script_error_belongs_to_its_own_caller(store: Store) -> None:
    sale = await open_sale(store, 2, now_ms=T0)
    assert store.pipeline is not None
    bad = store.pipeline.call(
        "hold_claim", store.keys(sale.event_id), ["", "nobody", "", 0, 0, 0, 0]
    )
    good = store.pipeline.call(
        "hold_claim", store.keys(sale.event_id), ["h1", "u1", "", 0, 0, 0, 0]
    )
    with pytest.raises(Exception, match="BAD_ARGS"):
        await bad
    assert (await good)[0] == "OK"


async def test_a_flushed_library_is_loaded_again() -> None:
    client = fakeredis.aioredis.FakeRedis(server=fakeredis.FakeServer(), decode_responses=True)
    store = Store(client, scripts=Scripts(client, test_clock=True), prefix=new_prefix())
    sale = await open_sale(store, 3, now_ms=T0)
    await client.function_flush()
    got = await asyncio.gather(*(store.claim(sale.event_id, f"u{i}", f"h{i}") for i in range(3)))
    assert sorted(c.listing for c in got) == ["s00000", "s00001", "s00002"]
    await client.aclose()


@pytest.mark.parametrize("store", EVERY_BACKEND, indirect=True)  # the cluster path too
async def test_calls_queued_too_long_fail_without_being_sent(store: Store) -> None:
    sale = await open_sale(store, 3, now_ms=T0)
    assert store.pipeline is not None
    stale = store.pipeline.call(
        "hold_claim", store.keys(sale.event_id), ["h1", "u1", "", 0, 0, 0, 0]
    )
    store.pipeline._queue[0].queued -= store.pipeline.timeout_s + 1  # it waited too long
    fresh = store.pipeline.call(
        "hold_claim", store.keys(sale.event_id), ["h2", "u2", "", 0, 0, 0, 0]
    )
    with pytest.raises(errors.StoreUnavailable, match="queued too long"):
        await stale
    assert (await fresh)[2] == "s00000"  # the stale call never ran: its seat is still first
    assert store.pipeline.stats.expired == 1


async def test_no_server_fails_every_caller_quickly() -> None:
    client = aioredis.from_url(
        f"redis://127.0.0.1:{spare_port()}/0", decode_responses=True, socket_connect_timeout=0.5
    )
    store = Store(client, scripts=Scripts(client, test_clock=True), timeout_s=1.0)
    results = await asyncio.gather(
        *(store.claim("e1", f"u{i}", f"h{i}") for i in range(20)), return_exceptions=True
    )
    assert all(isinstance(r, errors.StoreUnavailable) for r in results)
    await client.aclose()


@pytest.mark.redis
async def test_many_concurrent_claims_batch_up_on_real_redis(real_store: Store) -> None:
    store = real_store
    assert store.pipeline is not None
    sale = await open_sale(store, 300, now_ms=T0)
    got = await asyncio.gather(
        *(store.claim(sale.event_id, f"u{i}", f"h{i}") for i in range(2000)),
        return_exceptions=True,
    )
    won = [g for g in got if not isinstance(g, BaseException)]
    assert len(won) == 300 and len({g.listing for g in won}) == 300
    assert all(isinstance(g, errors.SoldOut) for g in got if isinstance(g, BaseException))
    assert store.pipeline.stats.largest > 100  # they really went out together
    await sale.audit_ok()


def test_arguments_are_packed_as_redis_py_packs_them() -> None:
    """The pipeline's own packing of a call's arguments is redis-py's, byte for byte, for every
    type a caller may pass (a str encoded at once, the rest by redis-py's encoder), and refuses
    what redis-py refuses."""
    from redis._parsers.encoders import Encoder
    from redis.connection import PythonRespSerializer
    from redis.exceptions import DataError

    from engine.store.pipeline import bulk_args

    args = ["h_0f3a", "", "séance", "票", 0, -7, 2**60, 1.5, b"raw\r\nbytes", bytearray(b"x")]
    for encoder, utf8 in ((Encoder("utf-8", "strict", True), True),
                          (Encoder("latin-1", "replace", True), False)):  # fmt: skip
        packed = b"".join(PythonRespSerializer(10**9, encoder.encode).pack("X", *args))
        want = packed.split(b"\r\n", 3)[3]  # the array header and the command's name off
        assert b"".join(bulk_args(args, encoder.encode, utf8)) == want
    utf8 = Encoder("utf-8", "strict", True)
    for refused in (True, None, object()):
        with pytest.raises(DataError):
            bulk_args(["ok", refused], utf8.encode, True)
