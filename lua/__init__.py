"""The Lua sources of every state transition; `source(name)` reads one via importlib.resources."""

from importlib import resources


def source(name: str) -> str:
    """Return the text of `lua/<name>.lua` (raises FileNotFoundError for an unknown name)."""
    return resources.files(__name__).joinpath(f"{name}.lua").read_text(encoding="utf-8")


def names() -> list[str]:
    """Every transition script (files not starting with `_`), sorted."""
    return sorted(
        entry.name.removesuffix(".lua")
        for entry in resources.files(__name__).iterdir()
        if entry.name.endswith(".lua") and not entry.name.startswith("_")
    )
