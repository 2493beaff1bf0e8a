"""docs/spec.md states both transition tables; they must be exactly engine/states.py's."""

import re
from pathlib import Path

from engine.states import CHARGE_TRANSITIONS, HOLD_TRANSITIONS

SPEC = (Path(__file__).resolve().parents[2] / "docs" / "spec.md").read_text()
ROW = re.compile(r"^\| ([A-Z_]+) \| `([a-z_]+)` \| ([A-Z_]+) \|$", re.M)


def documented() -> list[tuple[str, str, str]]:
    return [(m[1], m[2], m[3]) for m in ROW.finditer(SPEC)]


def test_the_spec_states_exactly_the_transition_tables() -> None:
    want = [(str(s), str(e), str(t)) for (s, e), t in HOLD_TRANSITIONS.items()]
    want += [(str(s), str(e), str(t)) for (s, e), t in CHARGE_TRANSITIONS.items()]
    assert sorted(documented()) == sorted(want)
