"""api/claim_front/uvicorn_seam.py names every internal of uvicorn the claim front and the HTTP
bounds rely on; this fails naming each one an upgrade removed or reshaped. And no other module
of the product imports uvicorn's internals."""

import ast
import inspect
import re
from pathlib import Path

import pytest

from api.claim_front.uvicorn_seam import INTERNALS, OWNERS

ROOT = Path(__file__).resolve().parents[2]
CASES = [
    (owner, name, params) for owner, names in INTERNALS.items() for name, params in names.items()
]


def assigned_in_init(cls: type, name: str) -> bool:
    source = inspect.getsource(cls.__init__)
    return re.search(rf"\bself\.{re.escape(name)}\s*(:[^=]+)?=", source) is not None


@pytest.mark.parametrize(("owner", "name", "params"), CASES, ids=[f"{o}.{n}" for o, n, _ in CASES])
def test_each_internal_we_rely_on_is_still_there(
    owner: str, name: str, params: tuple[str, ...] | None
) -> None:
    cls = OWNERS[owner]
    if params is None:
        assert hasattr(cls, name) or assigned_in_init(cls, name), f"{owner}.{name} is gone"
        return
    found = getattr(cls, name, None)
    assert callable(found), f"{owner}.{name} is no longer a method"
    assert tuple(inspect.signature(found).parameters) == params, f"{owner}.{name} changed shape"


def test_the_check_sees_a_missing_attribute() -> None:
    assert assigned_in_init(OWNERS["RequestResponseCycle"], "response_complete")
    assert not assigned_in_init(OWNERS["RequestResponseCycle"], "no_such_field")


INTERNAL = re.compile(r"^uvicorn\.(protocols|middleware|server|config|lifespan|loops)\b")


def test_no_other_module_imports_uvicorns_internals() -> None:
    seam = ROOT / "api" / "claim_front" / "uvicorn_seam.py"
    found = []
    for package in ("engine", "api", "persistence", "onsale"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == seam:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module and INTERNAL.match(node.module):
                    found.append(f"{path.relative_to(ROOT)}: {node.module}")
    assert found == []
