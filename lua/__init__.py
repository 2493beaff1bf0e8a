"""The Lua sources of every state transition, and the library they make.

`source(name)` reads one file via importlib.resources. `library()` is the text
engine/store/scripts.py loads with FUNCTION LOAD (ADR 0032): the shared definitions
(lua/_keys.lua, the clock, _states.lua generated from engine/model/states.py, _lib.lua,
_money.lua, _stock.lua, _queue.lua) once, then each transition script as the body of a
registered function, `<name>_<tag>`, that binds the call's keys first. The library is named
`onsale_<tag>`, its tag a hash of its text: two versions of the code (a rolling deploy, the
tests' clock) live side by side on one server and never call each other's functions."""

import hashlib
from importlib import resources

# _clock: _clock_server or _clock_test
PRELUDES = ("_keys", "_clock", "_states", "_lib", "_money", "_stock", "_queue")


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


def preludes(*, test_clock: bool = False) -> list[str]:
    """The shared definitions' texts, in library order, with the chosen clock."""
    clock = "_clock_test" if test_clock else "_clock_server"
    return [source(clock if p == "_clock" else p) for p in PRELUDES]


def library(
    *, test_clock: bool = False, bodies: dict[str, str] | None = None, prefix: str = "onsale"
) -> tuple[str, str]:
    """(name, text) of the library: the preludes, then one registered function per script
    (or per entry of `bodies`, name -> Lua text: the benchmarks' cut-down variants)."""
    parts = preludes(test_clock=test_clock)
    for name, body in (bodies if bodies is not None else {n: source(n) for n in names()}).items():
        bind = "bind_keys(KEYS)" + (" bind_queue_keys(KEYS)" if name.startswith("queue_") else "")
        parts.append(
            f"redis.register_function('{name}_@TAG@', function(KEYS, ARGV) {bind}\n{body}\nend)"
        )
    text = "\n".join(parts)
    tag = hashlib.sha1(text.encode()).hexdigest()[:12]
    return f"{prefix}_{tag}", f"#!lua name={prefix}_{tag}\n" + text.replace("@TAG@", tag)
