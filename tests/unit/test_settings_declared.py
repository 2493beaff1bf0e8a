"""Each ONSALE_* variable is declared once (engine/config/variables.py kinds, a declaration
beside its reader) and everything else is derived: the readers read through the declarations,
`--help` lists them (tests/unit/test_cli_help.py) and docs/configuration.md is printed from
them. These tests fail when the page is stale or a variable is spelled anywhere else."""

import ast
import re
from pathlib import Path

import pytest

from engine.config.variables import (
    Choice,
    Count,
    Flag,
    Int,
    MissingSetting,
    Secret,
    Text,
    every_problem,
)
from onsale.environment import every_setting
from onsale.help_text import page

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("engine", "api", "persistence", "onsale")
NAME = re.compile(r"ONSALE_[A-Z0-9_]*[A-Z0-9]")  # a name (a prefix ends with _)


def test_the_configuration_page_is_printed_from_the_declarations() -> None:
    written = (ROOT / "docs" / "configuration.md").read_text()
    assert written == page(), "run: python -m onsale.help_text > docs/configuration.md"


def test_each_variable_is_declared_once_with_words_for_both_readers() -> None:
    settings = every_setting()
    names = [s.name for s in settings]
    assert len(names) == len(set(names)) and len(names) > 90
    for s in settings:
        assert len(s.help) > 5 and len(s.words) >= len(s.help), s.name


def declaring_calls(tree: ast.AST) -> set[int]:
    """The ids of the name strings that are a declaration's first argument."""
    kinds = {"Int", "Count", "Flag", "Text", "Choice", "Secret"}
    found = set()
    for node in ast.walk(tree):
        call = isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        if call and node.func.id in kinds and node.args:  # type: ignore[attr-defined]
            found.add(id(node.args[0]))  # type: ignore[attr-defined]
    return found


def spelled_outside_a_declaration(path: Path) -> list[str]:
    """A variable's name as a whole string (what a reader would look up) that is not the name a
    declaration gives; mentions in prose (docstrings, messages, help) are not readers."""
    tree = ast.parse(path.read_text())
    declared = declaring_calls(tree)
    return [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.value}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and NAME.fullmatch(node.value)
        and id(node) not in declared
    ]


def test_no_variable_is_spelled_outside_its_declaration_in_the_product() -> None:
    found = [
        hit
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
        for hit in spelled_outside_a_declaration(path)
    ]
    assert found == []


def test_the_check_sees_a_variable_read_by_hand(tmp_path: Path) -> None:
    bad = ROOT / "onsale" / "_probe_settings.py"  # must sit in the product to be found
    bad.write_text('import os\nURL = os.environ.get("ONSALE_API_URL")\nX = Text("ONSALE_X", "h")\n')
    try:
        assert spelled_outside_a_declaration(bad) == ["onsale/_probe_settings.py:2 ONSALE_API_URL"]
    finally:
        bad.unlink()


@pytest.mark.parametrize(
    ("setting", "raw", "value"),
    [
        (Int("ONSALE_T", "h", 5), "7", 7),
        (Int("ONSALE_T", "h", 5), "", 5),
        (Count("ONSALE_T", "h", 5), "0", 0),
        (Flag("ONSALE_T", "h", True), "off", False),
        (Flag("ONSALE_T", "h", False), " Yes ", True),
        (Choice("ONSALE_T", "h", "a", choices=("a", "b")), "B", "b"),
        (Text("ONSALE_T", "h", "d"), "x y", "x y"),
    ],
)
def test_each_kind_reads_its_value(setting: Text, raw: str, value: object) -> None:
    assert setting.read({"ONSALE_T": raw}) == value


@pytest.mark.parametrize(
    ("setting", "raw", "why"),
    [
        (Int("ONSALE_T", "h", 5), "x", "must be an integer"),
        (Int("ONSALE_T", "h", 5), "0", "must be positive"),
        (Int("ONSALE_T", "h", 5, minimum=0), "-1", "at least 0"),
        (Count("ONSALE_T", "h", 5), "-1", "non-negative"),
        (Flag("ONSALE_T", "h", True), "maybe", "1 or 0"),
        (Choice("ONSALE_T", "h", "a", choices=("a", "b")), "c", "one of a, b"),
        (Secret("ONSALE_T", "h"), "short", "32 are required"),
        (Text("ONSALE_T", "h", required=True, eg="x://y"), "", r"not set \(e.g. x://y\)"),
    ],
)
def test_each_kind_refuses_a_bad_value_naming_the_variable(
    setting: Text, raw: str, why: str
) -> None:
    with pytest.raises(MissingSetting, match=f"ONSALE_T .*{why}"):
        setting.read({"ONSALE_T": raw})


def test_a_boot_names_every_bad_variable_at_once() -> None:
    from api.settings import ApiSettings

    with pytest.raises(MissingSetting) as refused, every_problem():
        ApiSettings.from_env({"ONSALE_REDIS_TIMEOUT_MS": "soon", "ONSALE_LOGIN_CAP": "-1"})
    said = str(refused.value)
    for name in ("ONSALE_REDIS_URL", "ONSALE_REDIS_TIMEOUT_MS", "ONSALE_LOGIN_CAP"):
        assert said.count(name + " ") == 1, said
