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


PRODUCT = ("engine", "api", "persistence", "onsale")
MODULE_LINES_MAX, FUNCTION_LINES_MAX = 400, 60


def oversized(path: Path) -> list[str]:
    """What in one module passes the size caps (a newcomer reads a module in one sitting)."""
    source = path.read_text()
    found = []
    if len(source.splitlines()) > MODULE_LINES_MAX:
        found.append(f"{path.name}: {len(source.splitlines())} lines")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > FUNCTION_LINES_MAX:
                found.append(f"{path.name}:{node.lineno} {node.name}: {length} lines")
    return found


def test_product_modules_and_functions_stay_small() -> None:
    found = [f for pkg in PRODUCT for p in sorted((ROOT / pkg).rglob("*.py")) for f in oversized(p)]
    assert found == []


def test_the_size_check_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(FUNCTION_LINES_MAX))
    (tmp_path / "long.py").write_text(f"def long():\n{body}\n")
    assert oversized(tmp_path / "long.py") == [f"long.py:1 long: {FUNCTION_LINES_MAX + 1} lines"]
