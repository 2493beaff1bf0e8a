"""The local stack runs its API from another checkout when asked (loadtest/devstack/stack.py
`api_tree`): from that directory, with that tree first on the path and its own command module
(`onsale.cli`, or `engine.cli` in the checkouts before it), so an earlier commit is measured with
today's tools. Other processes stay this checkout's."""

import json
import os
from pathlib import Path

import pytest

from loadtest.devstack.stack import LocalStack

RECORDER = """import json, os, sys
with open(os.environ["PROBE_OUT"], "w") as f:
    json.dump({"module": __name__ if __name__ != "__main__" else %r, "argv": sys.argv[1:],
               "cwd": os.getcwd(), "path": os.environ.get("PYTHONPATH", "")}, f)
"""


def tree_with(tmp_path: Path, package: str) -> Path:
    tree = tmp_path / package
    (tree / package).mkdir(parents=True)
    (tree / package / "__init__.py").write_text("")
    (tree / package / "cli.py").write_text(RECORDER % f"{package}.cli")
    return tree


@pytest.mark.parametrize("package", ["onsale", "engine"])
def test_the_api_runs_from_the_named_tree_with_its_own_command(
    tmp_path: Path, package: str
) -> None:
    tree, out = tree_with(tmp_path, package), tmp_path / "probe.json"
    stack = LocalStack(redis_url="redis://127.0.0.1:1/0", key_prefix="x", log_dir=tmp_path,
                       api_tree=tree)  # fmt: skip
    proc = stack._start("api", "serve", "--port", "1", env={"PROBE_OUT": str(out)})
    assert proc.wait(30) == 0
    seen = json.loads(out.read_text())
    assert seen == {"module": f"{package}.cli", "argv": ["serve", "--port", "1"],
                    "cwd": str(tree), "path": str(tree)}  # fmt: skip
    stack.stop()


def test_other_processes_stay_this_checkouts(tmp_path: Path) -> None:
    tree, out = tree_with(tmp_path, "onsale"), tmp_path / "probe.json"
    stack = LocalStack(redis_url="redis://127.0.0.1:1/0", key_prefix="x", log_dir=tmp_path,
                       api_tree=tree)  # fmt: skip
    proc = stack._start("worker", "--version", env={**os.environ, "PROBE_OUT": str(out)})
    assert proc.wait(30) == 0  # this checkout's `onsale --version`, not the tree's recorder
    assert not out.exists()
    stack.stop()
