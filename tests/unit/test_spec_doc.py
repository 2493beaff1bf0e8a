"""docs/spec.md states both transition tables; they must be exactly engine/model/states.py's."""

import re
from pathlib import Path

from engine.model.states import CHARGE_TRANSITIONS, HOLD_TRANSITIONS

SPEC = (Path(__file__).resolve().parents[2] / "docs" / "spec.md").read_text()
ROW = re.compile(r"^\| ([A-Z_]+) \| `([a-z_]+)` \| ([A-Z_]+) \|$", re.M)


def documented() -> list[tuple[str, str, str]]:
    return [(m[1], m[2], m[3]) for m in ROW.finditer(SPEC)]


def test_the_spec_states_exactly_the_transition_tables() -> None:
    want = [(str(s), str(e), str(t)) for (s, e), t in HOLD_TRANSITIONS.items()]
    want += [(str(s), str(e), str(t)) for (s, e), t in CHARGE_TRANSITIONS.items()]
    assert sorted(documented()) == sorted(want)


def test_every_value_the_ledger_records_is_in_the_openapi_enums_and_the_spec() -> None:
    """A decision's `to` in the ledger is a hold state, a charge state or a marker: the OpenAPI
    document enumerates all three, and the spec names every marker."""
    from api.openapi import OPENAPI
    from engine.model.records import CHARGE_RECORDED, HOLD_RECORDED, Marker

    schemas = OPENAPI["components"]["schemas"]
    enums = {name: set(schemas[name]["enum"]) for name in ("HoldState", "ChargeState")}
    assert enums["HoldState"] >= HOLD_RECORDED and enums["ChargeState"] == CHARGE_RECORDED
    assert set(schemas["RecordMarker"]["enum"]) == {m.value for m in Marker}
    unnamed = [m.value for m in Marker if f"`{m.value}`" not in SPEC]
    assert unnamed == [], f"docs/spec.md does not name {unnamed}"
