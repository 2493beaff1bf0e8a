"""The outbox record is written once in Lua and read once in Python: the field list of
lua/_lib.lua `emit` is engine/model/records.py's, and every literal decision a script emits is a
state of the automata or a Marker."""

import re

import lua
from engine.model.records import OUTBOX_FIELDS, Marker, OutboxRecord, RecordKind
from engine.model.states import ChargeState, HoldState


def emitted_fields() -> tuple[str, ...]:
    lib = lua.source("_lib")
    body = lib[lib.index("local function emit(") :]
    body = body[: body.index("\nend")]
    fields = body[body.index("local fields = {") : body.index("}\n")]
    return tuple(re.findall(r"'([a-z_]+)',\s*[^,)]", fields.split("{", 1)[1]))


def test_emit_writes_exactly_the_record_fields() -> None:
    assert emitted_fields() == OUTBOX_FIELDS


def test_every_literal_decision_is_a_state_or_a_marker() -> None:
    known = {s.value for s in HoldState} | {s.value for s in ChargeState} | set(Marker)
    pattern = re.compile(r"emit\(ctx, '([a-z]+)', [^,]+, [^,]+, '([A-Z_]+)'")
    # A waiting room's records (lua/_queue.lua queue_record: kind queue).
    queue = re.compile(r"queue_record\(ctx, [^,]+, '([A-Z_]+)'")
    assert "emit(ctx, 'queue', " in lua.source("_queue")
    seen = set()
    for name in [*lua.names(), "_lib", "_money"]:
        for kind, to in pattern.findall(lua.source(name)):
            assert kind in set(RecordKind), (name, kind)
            assert to in known, (name, to)
            seen.add(to)
        for to in queue.findall(lua.source(name)):
            assert to in known, (name, to)
            seen.add(to)
    assert set(Marker) <= seen  # the check reads the scripts, and every marker is in use


def test_a_record_reads_back_typed() -> None:
    fields = dict.fromkeys(OUTBOX_FIELDS, "")
    fields.update(
        decision_id="hold:h1:CONFIRMED", event="ev", kind="hold", id="h1", to="CONFIRMED",
        terminal="1", amount="4500", now_ms="17", captured="4500",
    )  # fmt: skip
    r = OutboxRecord.from_fields(fields)
    assert (r.kind, r.terminal, r.amount, r.decided_ms, r.moves_hold) == (
        RecordKind.HOLD,
        True,
        4500,
        17,
        True,
    )


def test_named_queries_parse_once_each() -> None:
    from persistence.queries import Q, parse

    assert {"insert_decision", "upsert_hold", "event_charges"} <= set(Q)
    assert all(sql and not sql.startswith("-- name") for sql in Q.values())
    assert parse("-- name: a\nselect 1\n\n-- name: b\n-- why\nselect 2\n") == {
        "a": "select 1",
        "b": "-- why\nselect 2",
    }
