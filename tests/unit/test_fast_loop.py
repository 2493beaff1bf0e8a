"""`make test-fast` collects only the folders that hold tests needing no server (collecting the
integration modules alone took about a fifth of the loop's time, for no test it runs). So a
module outside those folders must be left out by its own marks, or the loop would silently
miss it: each one declares `pytestmark` with a mark the loop deselects."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def fast_loop() -> tuple[set[str], list[Path]]:
    """(the marks the loop deselects, the folders it collects), read from the Makefile."""
    make = (ROOT / "Makefile").read_text(encoding="utf-8")
    line = re.search(r"^FAST := (.*)$", make, re.M)
    assert line, "the Makefile names the fast loop's options in FAST"
    deselected = set(re.findall(r"not (\w+)", line.group(1)))
    folders = [ROOT / word for word in line.group(1).split() if word.startswith("tests/")]
    return deselected, folders


def module_marks(path: Path) -> set[str]:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            return {
                n.attr
                for n in ast.walk(node.value)
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute)
                and n.value.attr == "mark"
            }  # fmt: skip
    return set()


def test_the_fast_loop_collects_named_folders_that_exist() -> None:
    deselected, folders = fast_loop()
    assert {"redis", "postgres", "slow"} <= deselected
    assert folders and all(folder.is_dir() for folder in folders)


def test_every_module_outside_the_fast_folders_is_left_out_by_its_marks() -> None:
    deselected, folders = fast_loop()
    outside = [
        path
        for path in sorted((ROOT / "tests").rglob("test_*.py"))
        if not any(folder in path.parents for folder in folders)
    ]
    assert outside, "the loop leaves some folders out"
    missed = [str(p.relative_to(ROOT)) for p in outside if not module_marks(p) & deselected]
    assert not missed, f"tests the fast loop would never run: {missed}"


def test_the_mark_reader_sees_a_module_without_marks(tmp_path: Path) -> None:
    bare = tmp_path / "test_probe.py"
    bare.write_text("import pytest\n\ndef test_x() -> None:\n    pass\n", encoding="utf-8")
    marked = tmp_path / "test_marked.py"
    marked.write_text("import pytest\npytestmark = [pytest.mark.redis]\n", encoding="utf-8")
    assert module_marks(bare) == set()
    assert module_marks(marked) == {"redis"}
