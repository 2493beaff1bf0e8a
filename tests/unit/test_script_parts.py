"""The claim script's attribution (loadtest/bench/script_parts.py) removes one part at a time by
replacing its text in a copy of lua/: each part must name text the script has exactly once, so
a change to the script fails here by the part's name instead of measuring a script that lost
nothing."""

from pathlib import Path

import pytest

import lua
from loadtest.bench.persistence_cost import CLAIM_LIMITS
from loadtest.bench.script_parts import PARTS, variant_tree

LUA = Path(lua.__file__).parent


@pytest.mark.parametrize("part", PARTS, ids=lambda p: p.name)
def test_each_part_names_text_found_once(part) -> None:  # type: ignore[no-untyped-def]
    assert (LUA / part.file).read_text(encoding="utf-8").count(part.old) == 1, part.name


def test_the_claims_run_the_rate_limit_and_the_cap() -> None:
    """Otherwise removing the rate token or the cap would remove no work (the script skips
    both when they are 0)."""
    per_s, burst, cap, _window = (int(x) for x in CLAIM_LIMITS)
    assert per_s > 0 and burst > 0 and cap > 0


def test_a_variant_tree_differs_from_lua_only_by_its_part(tmp_path: Path) -> None:
    part = PARTS[0]
    tree = variant_tree(part, tmp_path)
    for path in LUA.glob("*.lua"):
        ours, theirs = path.read_text(), (tree / path.name).read_text()
        assert (ours == theirs) == (path.name != part.file), path.name
    assert part.new in (tree / part.file).read_text()
