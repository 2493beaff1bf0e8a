"""Every script carries the mandatory header, and its reply codes match the Python enums."""

import re

import lua
from engine.model.replies import REPLY_CODES

HEADER_RE = re.compile(r"\A--\[\[ (?P<name>[a-z_0-9]+): (?P<summary>.+?)\n(?P<body>.*?)\]\]", re.S)


def header(name: str) -> dict[str, str]:
    m = HEADER_RE.match(lua.source(name))
    assert m, f"{name}.lua does not start with a --[[ name: summary ... ]] header"
    return {"name": m["name"], "summary": m["summary"], "body": m["body"]}


def test_header_names_keys_argv_returns_invariants() -> None:
    assert len(lua.names()) > 20  # the walk found the scripts
    lacking = {}
    for name in lua.names():
        h = header(name)
        assert h["name"] == name
        required = ("KEYS[", "ARGV[", "Returns {code, ...}:", "Invariants:")
        lacking[name] = [part for part in required if part not in h["body"]]
    assert {name: parts for name, parts in lacking.items() if parts} == {}


def reply_code_faults(name: str) -> list[str]:
    """How `name`'s header, its enum (engine/model/replies.py) and its returns disagree."""
    body = header(name)["body"]
    returns = body.split("Returns {code, ...}:", 1)[1].split("Invariants:", 1)[0]
    declared = set(re.findall(r"\b[A-Z][A-Z_]{1,}\b", returns))
    faults = [] if declared == set(REPLY_CODES[name]) else ["header codes differ from the enum"]
    src = lua.source(name)
    returned = set(re.findall(r"return \{ '([A-Z_]+)'", src))
    returned |= set(re.findall(r"\bcode = '([A-Z_]+)'", src))
    undeclared = returned - set(REPLY_CODES[name])
    return faults + ([f"returns undeclared {sorted(undeclared)}"] if undeclared else [])


def test_reply_codes_match_enum_and_body() -> None:
    faults = {name: reply_code_faults(name) for name in lua.names()}
    assert {name: f for name, f in faults.items() if f} == {}


def test_every_script_has_reply_codes() -> None:
    assert set(lua.names()) == set(REPLY_CODES)


def names_not_from_keys(src: str) -> list[str]:
    """The first arguments of redis.call that are not a K_* local or KEYS[...] as passed, or
    that build a name by concatenation (`K_EVENT .. ':x'`)."""
    bad = []
    for command, first in re.findall(r"redis\.call\('([A-Z]+)',\s*([^,)]+)", src):
        if command == "TIME":
            continue
        if not first.strip().startswith(("K_", "KEYS[")) or ".." in first:
            bad.append(f"{command} on {first.strip()}")
    return bad


def test_keys_only_via_KEYS() -> None:
    """Cluster safety: no script builds a key or channel name; it uses the K_* locals bound to
    KEYS, exactly as passed."""
    built = {name: names_not_from_keys(lua.source(name)) for name in lua.names()}
    assert {name: b for name, b in built.items() if b} == {}


def test_the_key_check_sees_a_name_built_in_lua() -> None:
    src = "redis.call('PUBLISH', K_EVENT .. ':restocked', n)\nredis.call('GET', 'x')"
    assert names_not_from_keys(src) == ["PUBLISH on K_EVENT .. ':restocked'", "GET on 'x'"]


def test_test_clock_is_a_different_library() -> None:
    """The tests' clock makes another library, whose functions have other names: a production
    process can never call them."""
    name, text = lua.library()
    test_name, test_text = lua.library(test_clock=True)
    assert name != test_name and "test_now_ms" not in text and "test_now_ms" in test_text
    for script in lua.names():
        assert f"'{script}_{name.removeprefix('onsale_')}'" in text
        assert f"'{script}_{test_name.removeprefix('onsale_')}'" in test_text


def test_no_prelude_keeps_state_between_calls() -> None:
    """A library's top-level locals outlive a call: those bound from KEYS, and the identity
    maps, are declared without a value and set by bind_keys at every call (lua/_keys.lua); no
    prelude reads KEYS or ARGV outside a function."""
    for prelude in ("_keys", "_clock_server", "_clock_test", "_lib", "_stock", "_queue"):
        top_level = [ln for ln in lua.source(prelude).split("\n") if ln.startswith("local ")]
        assert not [ln for ln in top_level if "KEYS" in ln or "ARGV" in ln], prelude
        assert not [ln for ln in top_level if re.match(r"local (HOLDS|CHARGES)\b.*=", ln)]
