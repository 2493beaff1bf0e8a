"""Every script on a Redis Cluster, once: what a cluster adds to a script's facts is where it
runs. Each call must reach the script on the primary that owns its event's slot, with all of
its keys in that slot (no CROSSSLOT refusal, no missing function), both ways the engine calls
it: one call through the cluster client, and a batch through the auto-pipeline's per-node
batches (engine/store/cluster.py). What each script decides is proven on fakeredis and on one
server by tests/lua/ (the `store` fixture); it does not depend on where the script runs."""

from typing import Any

import pytest
from redis.crc import key_slot
from redis.exceptions import ResponseError

import lua
from engine.model import keys
from engine.store import Store
from tests.conftest import open_sale

pytestmark = [pytest.mark.redis, pytest.mark.cluster]

T0 = 1_900_000_000_000
ROUTING_ERRORS = ("CROSSSLOT", "MOVED", "ASK ", "not found", "NOSCRIPT", "CLUSTERDOWN")


def script_keys(store: Store, name: str, event_id: str) -> list[str]:
    """The KEYS the engine gives the script (the queue scripts: the room's; the rest: the
    event's, then its slot's due index)."""
    if name.startswith("queue_"):
        return keys.queue_keys(event_id, store.prefix)
    return store.keys(event_id)


def outcome(result: Any) -> str:
    """What a call came to: the script's reply code, or the error it raised."""
    if isinstance(result, ResponseError):
        text = str(result)
        assert not any(e in text for e in ROUTING_ERRORS), text  # refused before it ran
        return f"error {text.split()[0] if text else ''}"
    assert isinstance(result, list) and result, result
    return f"reply {result[0]}"


@pytest.mark.parametrize("name", lua.names())
async def test_the_script_runs_on_its_events_primary(cstore: Store, name: str) -> None:
    """The same call on two like events (a script may decide, and then say so again): once
    alone, once in a batch; both reach the script and come to the same."""
    args: list[Any] = ["", "", "", 0, 0, 0, 0, ""]  # refused by the script itself, or decided
    outcomes = []
    for batched in (False, True):
        sale = await open_sale(cstore, 2, now_ms=T0)
        ks = script_keys(cstore, name, sale.event_id)
        assert {key_slot(k.encode()) for k in ks} == {keys.slot_of(sale.event_id)}
        assert cstore.pipeline is not None
        call = cstore.pipeline.call if batched else cstore.scripts.call
        try:
            result: Any = await call(name, ks, args)
        except ResponseError as exc:
            result = exc
        outcomes.append(outcome(result))
    assert outcomes[0] == outcomes[1], outcomes
