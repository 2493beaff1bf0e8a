"""lua/_states.lua is generated from engine/model/states.py and current; every state change in
the scripts goes through hold_move / charge_move (no `.state =` elsewhere), and those refuse a
move the tables lack. The scripts' moves are run on fakeredis, Redis and a cluster by
tests/lua/test_parity.py."""

import re

import pytest
import redis

import lua
from engine.model.states import CHARGE_TRANSITIONS, HOLD_TRANSITIONS, lua_source
from tests.conftest import REDIS_URL


def test_the_generated_states_are_current() -> None:
    assert lua.source("_states") == lua_source(), (
        "lua/_states.lua is stale: python -m engine.model.states > lua/_states.lua"
    )


def test_no_script_sets_a_state_but_the_move_functions() -> None:
    setting = re.compile(r"\b\w+\.state\s*=[^=]")
    found = []
    for name in [*lua.names(), *lua.PRELUDES]:
        if name == "_clock":
            continue
        found += [(name, line.strip()) for line in lua.source(name).splitlines()
                  if setting.search(line)]  # fmt: skip
    assert found == [("_lib", "h.state = to"), ("_lib", "c.state = to")]  # in the move functions


def moves_allowed(table: str) -> set[tuple[str, str]]:
    text = lua_source()
    body = text[text.index(f"local {table} = {{") :].split("\n}", 1)[0]
    return {
        (state, to)
        for state, tos in re.findall(r"^  (\w+) = \{ (.*) \},$", body, re.M)
        for to in re.findall(r"(\w+) = true", tos)
    }


def test_the_generated_moves_are_exactly_the_tables_pairs() -> None:
    assert moves_allowed("HOLD_MOVES") == {
        (s.value, t.value) for (s, _e), t in HOLD_TRANSITIONS.items()
    }
    assert moves_allowed("CHARGE_MOVES") == {
        (s.value, t.value) for (s, _e), t in CHARGE_TRANSITIONS.items()
    }


@pytest.mark.redis
@pytest.mark.parametrize(
    ("mover", "state", "to", "allowed"),
    [
        ("hold_move", "RESERVED", "CONFIRMED", True),
        ("hold_move", "EXPIRED", "CONFIRMED", False),  # a dead hold never comes back
        ("hold_move", "REVOKED", "CONFIRMED", False),
        ("charge_move", "CHARGING", "CAPTURED", True),
        ("charge_move", "REFUNDED", "CAPTURED", False),  # money given back never sells again
        ("charge_move", "CHARGED_BACK", "REFUNDING", False),
    ],
)
def test_a_move_the_tables_lack_fails_the_call(
    mover: str, state: str, to: str, allowed: bool
) -> None:
    """The move functions themselves, on real Redis (an EVAL of no keys, nothing written): a
    refused move is an INVARIANT error (the store raises InvariantViolation), an allowed one
    sets the state."""
    lib = lua.source("_lib")
    start = lib.index("local function hold_move")
    end = lib.index("c.state = to\nend") + len("c.state = to\nend")
    x = f"local x = {{ id = 'x1', state = '{state}' }}"
    script = "\n".join(
        [lua.source("_states"), lib[start:end], x, f"{mover}(x, '{to}')", "return x.state"]
    )
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        if allowed:
            assert client.eval(script, 0) == to
        else:
            with pytest.raises(
                redis.ResponseError, match=f"INVARIANT .* may not move from {state} to {to}"
            ):
                client.eval(script, 0)
    finally:
        client.close()
