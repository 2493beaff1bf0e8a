"""The ledger's SQL, named once in persistence/queries.sql (named blocks, as procrastinate
keeps its queries): `Q["insert_decision"]`. tests/integration/test_ledger.py prepares every one
against a migrated database."""

import re
from collections.abc import Mapping
from importlib.resources import files
from types import MappingProxyType

_NAME = re.compile(r"^-- name: ([a-z_]+)\s*$", re.M)


def parse(text: str) -> dict[str, str]:
    """`-- name: x` blocks -> {x: sql}; comments inside a block are kept, blank edges dropped."""
    parts = _NAME.split(text)
    out: dict[str, str] = {}
    for name, sql in zip(parts[1::2], parts[2::2], strict=True):
        assert name not in out, f"query {name} is named twice"
        out[name] = sql.strip()
    return out


Q: Mapping[str, str] = MappingProxyType(
    parse(files("persistence").joinpath("queries.sql").read_text(encoding="utf-8"))
)
