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


def test_no_import_runs_up_the_layers() -> None:
    """Every module of every package imports only the packages below its own (one test for the
    rule, naming every module that breaks it)."""
    upward = {
        str(path.relative_to(ROOT)): sorted(imported_packages(path) - ALLOWED[package])
        for package, path in modules()
    }
    assert {m: up for m, up in upward.items() if up} == {}
    assert len(upward) > 100  # the walk found the tree


def test_the_check_sees_a_lazy_upward_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from persistence.writer import LedgerWriter\n")
    assert imported_packages(bad) == {"persistence"}


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """The modules of `known` that `path` imports, by dotted name, wherever the import stands
    (type-only ones under TYPE_CHECKING and lazy ones in functions count too: each is a reason
    a newcomer must read the other module first). `from package import module` is that module,
    not the package."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in known else node.module)
    return found & known


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles of `graph` (Tarjan's strongly connected components of more than one module,
    or one that imports itself), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            part = []
            while (top := stack.pop()) != node:
                part.append(top)
            part.append(node)
            if len(part) > 1 or node in graph.get(node, ()):
                cycles.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def module_graph() -> dict[str, set[str]]:
    names = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
        for pkg in ALLOWED
        for p in sorted((ROOT / pkg).rglob("*.py"))
    }
    known = set(names)
    return {name: imported_modules(path, known) - {name} for name, path in names.items()}


def test_no_module_imports_itself_back_through_others() -> None:
    assert import_cycles(module_graph()) == []


def test_the_check_sees_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


# The engine's rooms, from the ground up: a module may import its own room and those before it
# (the vocabulary first, the store on it, the workers last).
ENGINE_FLOORS = ("model", "store", "config", "providers", "gate", "views", "waiting", "workers")


def engine_floor(module: str) -> int:
    parts = module.split(".")
    assert parts[0] == "engine" and len(parts) > 1 and parts[1] in ENGINE_FLOORS, module
    return ENGINE_FLOORS.index(parts[1])


def test_the_engine_is_in_rooms_by_concept_and_no_import_runs_up_them() -> None:
    graph = module_graph()
    engine = [name for name in graph if name.startswith("engine.")]
    assert all(name.split(".")[1] in ENGINE_FLOORS for name in engine), sorted(engine)
    upward = [
        (name, other)
        for name in engine
        for other in graph[name]
        if other.startswith("engine.") and engine_floor(other) > engine_floor(name)
    ]
    assert upward == []


# The tools' families: a module of loadtest/ lives in one of them.
LOADTEST_FAMILIES = (
    "devstack", "demo", "chaos", "burst", "bench", "locust", "pg_baseline", "provider_sim",
)  # fmt: skip


def test_the_tools_are_in_families() -> None:
    loose = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "loadtest").rglob("*.py")
        if (p.parent == ROOT / "loadtest" and p.name != "__init__.py")
        or (p.parent != ROOT / "loadtest" and p.parent.name not in LOADTEST_FAMILIES)
    ]
    assert loose == []


def test_the_floor_check_sees_a_room_outside_the_plan() -> None:
    with pytest.raises(AssertionError):
        engine_floor("engine.misc")
    assert engine_floor("engine.model.keys") < engine_floor("engine.workers.sweeper")


PRODUCT = ("engine", "api", "persistence", "onsale")
MODULE_LINES_MAX, FUNCTION_LINES_MAX = 400, 60


def oversized(path: Path, *, functions: bool = True) -> list[str]:
    """What in one module passes the size caps (a newcomer reads a module in one sitting); the
    module's length only when `functions` is False."""
    source = path.read_text()
    found = []
    if len(source.splitlines()) > MODULE_LINES_MAX:
        found.append(f"{path.name}: {len(source.splitlines())} lines")
    for node in ast.walk(ast.parse(source)):
        if functions and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > FUNCTION_LINES_MAX:
                found.append(f"{path.name}:{node.lineno} {node.name}: {length} lines")
    return found


def test_product_modules_and_functions_stay_small() -> None:
    found = [f for pkg in PRODUCT for p in sorted((ROOT / pkg).rglob("*.py")) for f in oversized(p)]
    assert found == []


REPORT_MODULE_SUFFIX = "_report.py"  # a load tool's report printing (exempt: see below)


def test_tool_modules_and_functions_stay_small() -> None:
    """The same caps on the tools (loadtest/), with one exemption written here: the functions of
    a module whose name ends with `_report.py` (report printing: a table reads best built in one
    piece). Every tool module, a report module included, stays within MODULE_LINES_MAX."""
    found = [
        f
        for p in sorted((ROOT / "loadtest").rglob("*.py"))
        for f in oversized(p, functions=not p.name.endswith(REPORT_MODULE_SUFFIX))
    ]
    assert found == []


def test_the_size_check_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(FUNCTION_LINES_MAX))
    (tmp_path / "long.py").write_text(f"def long():\n{body}\n")
    assert oversized(tmp_path / "long.py") == [f"long.py:1 long: {FUNCTION_LINES_MAX + 1} lines"]


def test_the_size_check_can_leave_the_functions_out(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MODULE_LINES_MAX))
    (tmp_path / "long_report.py").write_text(f"def long():\n{body}\n")
    assert oversized(tmp_path / "long_report.py", functions=False) == [
        f"long_report.py: {MODULE_LINES_MAX + 1} lines"
    ]
