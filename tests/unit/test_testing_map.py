"""docs/testing.md names the tests of every product module, and only test files that exist."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAP = (ROOT / "docs" / "testing.md").read_text()
ROW = re.compile(r"^\| `?([^|`]+?)`? \| (.+) \|$", re.M)


def rows() -> dict[str, list[str]]:
    return {m[1]: re.findall(r"`(tests/[^`]+)`", m[2]) for m in ROW.finditer(MAP)}


def test_every_product_module_is_mapped() -> None:
    modules = {
        str(p.relative_to(ROOT))
        for pkg in ("engine", "api", "persistence", "onsale")
        for p in (ROOT / pkg).rglob("*.py")
        if p.name != "__init__.py"
    }
    assert sorted(modules - rows().keys()) == []


def test_every_named_test_exists() -> None:
    named = [t for tests in rows().values() for t in tests]
    assert named
    assert [t for t in named if not (ROOT / t).exists()] == []
