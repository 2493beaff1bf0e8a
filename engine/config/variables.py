"""What an ONSALE_* variable is, declared once: its name, kind, default and words. The readers
read a variable through its declaration (`SETTING.read(env)`), `onsale <command> --help` lists
a command's declarations, and docs/configuration.md is printed from them
(`python -m onsale.help_text`); tests/unit/test_settings_declared.py fails on a variable spelled
anywhere else in the product code, or a page that is not current.

A missing or weak value is refused (`refuse`): MissingSetting at once, or, inside
`every_problem`, noted so that a boot names every problem at once."""

import contextlib
import math
import sys
from collections import Counter
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

PREFIX = "ONSALE_"
SECRET_CHARS_MIN = 32
SECRET_BITS_MIN = 96  # estimated from the characters' spread; a mistake catcher, not a meter
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


class MissingSetting(RuntimeError):
    pass


_FOUND: ContextVar[list[str] | None] = ContextVar("onsale_setting_problems", default=None)


def refuse(message: str) -> None:
    """A missing or weak setting: MissingSetting at once, unless `every_problem` collects; then
    it is noted and the reader goes on with its default, so a boot names every problem at once."""
    found = _FOUND.get()
    if found is None:
        raise MissingSetting(message)
    found.append(message)


def say_missing(exc: MissingSetting) -> None:
    """Each problem of a refused boot on a line of its own, on stderr."""
    for line in str(exc).splitlines():
        print(f"onsale: {line}", file=sys.stderr)


@contextlib.contextmanager
def every_problem() -> Iterator[None]:
    """Read settings inside; at the end, one MissingSetting naming every refusal (one a line),
    if any. A reader that could not go on after a refusal ends the reading early: the problems
    noted so far are still the ones named."""
    found: list[str] = []
    token = _FOUND.set(found)
    try:
        yield
    except Exception:
        if not found:
            raise
    finally:
        _FOUND.reset(token)
    if found:
        raise MissingSetting("\n".join(found))


def secret_weakness(value: str) -> str | None:
    """Why `value` is too weak to be a secret, or None. Catches the usual mistakes (short,
    repeated, placeholder) — `openssl rand -base64 32` always passes."""
    if len(value) < SECRET_CHARS_MIN:
        return f"is {len(value)} characters; at least {SECRET_CHARS_MIN} are required"
    counts = Counter(value)
    bits = -sum(n * math.log2(n / len(value)) for n in counts.values())
    if bits < SECRET_BITS_MIN:
        return f"looks guessable (about {bits:.0f} bits; at least {SECRET_BITS_MIN} required)"
    for period in range(1, len(value) // 2 + 1):
        if value == (value[:period] * (len(value) // period + 1))[: len(value)]:
            return "is a repeated pattern"
    return None


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One variable. `help`: its line in `--help`; `doc`: its words on docs/configuration.md
    (the help when empty); `said`: how its default is said, when not by its value ("" when
    there is none to say)."""

    name: str
    help: str
    default: T
    doc: str = ""
    said: str | None = None
    required: bool = False  # refused when unset (a reader may still ask `read(required=...)`)

    def raw(self, env: Mapping[str, str]) -> str:
        return env.get(self.name) or ""

    def read(self, env: Mapping[str, str], *, required: bool | None = None) -> T:
        raw = self.raw(env)
        if raw == "":
            if self.required if required is None else required:
                refuse(f"{self.name} is not set{self.example()}")
            return self.default
        return self.parse(raw)

    def parse(self, raw: str) -> T:
        raise NotImplementedError

    def example(self) -> str:
        return ""

    def default_said(self) -> str:
        if self.said is not None:
            return self.said
        if isinstance(self.default, bool):
            return "1" if self.default else "0"
        return str(self.default)

    @property
    def words(self) -> str:
        return self.doc or self.help


@dataclass(frozen=True)
class Int(Setting[int]):
    minimum: int = 1

    def parse(self, raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            refuse(f"{self.name} must be an integer, got {raw!r}")
            return self.default
        if value < self.minimum:
            word = "positive" if self.minimum == 1 else f"at least {self.minimum}"
            refuse(f"{self.name} must be {word}, got {value}")
            return self.default
        return value


@dataclass(frozen=True)
class Count(Setting[int]):
    """A non-negative integer; 0 turns the limit off."""

    def parse(self, raw: str) -> int:
        if not raw.isdigit():
            refuse(f"{self.name} must be a non-negative integer (0: off), got {raw!r}")
            return self.default
        return int(raw)


@dataclass(frozen=True)
class Flag(Setting[bool]):
    def raw(self, env: Mapping[str, str]) -> str:
        return (env.get(self.name) or "").strip().lower()

    def parse(self, raw: str) -> bool:
        if raw in TRUE or raw in FALSE:
            return raw in TRUE
        refuse(f"{self.name} must be 1 or 0, got {raw!r}")
        return self.default


@dataclass(frozen=True)
class Text(Setting[str]):
    """A string taken as it is; `eg` is the example a refusal of a missing one gives."""

    default: str = ""
    eg: str = ""

    def parse(self, raw: str) -> str:
        return raw

    def example(self) -> str:
        return f" (e.g. {self.eg})" if self.eg else ""


@dataclass(frozen=True)
class Choice(Setting[str]):
    choices: tuple[str, ...] = ()

    def raw(self, env: Mapping[str, str]) -> str:
        return (env.get(self.name) or "").strip().lower()

    def parse(self, raw: str) -> str:
        if raw not in self.choices:
            refuse(f"{self.name} must be one of {', '.join(self.choices)}, got {raw!r}")
            return self.default
        return raw


@dataclass(frozen=True)
class Secret(Text):
    """A credential: refused when weak, never logged (engine/config/logs.py scrubs its value)."""

    said: str | None = ""
    eg: str = "`openssl rand -base64 32`"

    def parse(self, raw: str) -> str:
        weakness = secret_weakness(raw)
        if weakness is not None:
            refuse(f"{self.name} {weakness} (e.g. `openssl rand -base64 32`)")
        return raw


@dataclass(frozen=True)
class Group:
    """Variables read together, under a title in `--help` and on the configuration page."""

    title: str
    settings: tuple[Setting[Any], ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.settings)


def read_all(
    env: Mapping[str, str],
    group: Group,
    strip: str = PREFIX,
    required: Mapping[Setting[Any], bool] | None = None,
) -> dict[str, Any]:
    """Each of the group's variables read, by its field name: the variable's name without
    `strip` (or, when it does not start so, without ONSALE_), in lower case
    (ONSALE_REDIS_TIMEOUT_MS -> redis_timeout_ms); `required` says of some whether they are
    required this time (else their declaration does)."""
    asked = required or {}
    return {field_name(s, strip): s.read(env, required=asked.get(s)) for s in group.settings}


def field_name(setting: Setting[Any], strip: str = PREFIX) -> str:
    name = setting.name
    return (name[len(strip) :] if name.startswith(strip) else name.removeprefix(PREFIX)).lower()
