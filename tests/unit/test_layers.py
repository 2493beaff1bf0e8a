"""The layers of the product, enforced: a module may import only the packages below it (lazy
imports inside functions count too). The composition root (`onsale/`) wires the layers together;
the tools (`loadtest/`) may use everything, and nothing in the product uses them (ADR 0015)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = {"engine", "lua", "api", "persistence", "onsale", "loadtest"}
ALLOWED: dict[str, set[str]] = {
    "lua": {"lua"},
    "engine": {"engine", "lua"},
    "api": {"api", "engine"},
    "persistence": {"persistence", "engine"},
    "onsale": {"onsale", "engine", "api", "persistence"},
    "loadtest": OURS,
}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & OURS


def modules() -> list[tuple[str, Path]]:
    return [(pkg, p) for pkg in ALLOWED for p in sorted((ROOT / pkg).rglob("*.py"))]


@pytest.mark.parametrize(
    ("package", "path"), modules(), ids=[str(p.relative_to(ROOT)) for _k, p in modules()]
)
def test_no_import_runs_up_the_layers(package: str, path: Path) -> None:
    upward = imported_packages(path) - ALLOWED[package]
    assert not upward, f"{path.relative_to(ROOT)} imports {sorted(upward)}"


def test_the_check_sees_a_lazy_upward_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from persistence.writer import LedgerWriter\n")
    assert imported_packages(bad) == {"persistence"}
