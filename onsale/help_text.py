"""What `onsale <command> --help` says about the environment: every variable a command reads
(onsale/environment.py), in its groups, each with its words and default as declared; and the
configuration page, docs/configuration.md, printed from the same declarations by
`python -m onsale.help_text` (tests/unit/test_settings_declared.py fails when it is not current)."""

import argparse
import os
import textwrap
from typing import Any

from engine.config.variables import Group, Setting
from onsale.environment import COMMANDS, every_group

ENVIRONMENT = "environment:"
NAME_WIDTH, LINE_WIDTH = 36, 100


def described(setting: Setting[Any]) -> str:
    """A variable's help line: its words, and its default when it has one to say."""
    if setting.required:
        return f"{setting.help} (required)"
    said = setting.default_said()
    return f"{setting.help} (default {said})" if said else setting.help


def environment(groups: tuple[Group, ...]) -> str:
    """The epilog of a command: its variables, by group, each described beside its name."""
    lines = [ENVIRONMENT]
    indent = " " * (4 + NAME_WIDTH + 1)
    for group in groups:
        lines.append(f"  {group.title}:")
        for setting in group.settings:
            first = f"    {setting.name:<{NAME_WIDTH}} "
            text = described(setting)
            lines += textwrap.wrap(text, LINE_WIDTH, initial_indent=first, subsequent_indent=indent)
    return "\n".join(lines)


class Formatter(argparse.HelpFormatter):
    """argparse's own layout, except the environment block, kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        fill = super()._fill_text
        parts = text.split("\n\n")
        return "\n\n".join(
            p if p.startswith(ENVIRONMENT) else fill(p, width, indent) for p in parts
        )


def env_option(
    parser: argparse.ArgumentParser, setting: Setting[Any], flag: str, help: str, **kw: Any
) -> argparse.Action:
    """An option whose default is read from its variable, named in its help."""
    value = os.environ.get(setting.name) or setting.default
    return parser.add_argument(
        flag, default=value, help=f"{help} (env {setting.name}; default {setting.default})", **kw
    )


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser's subcommands by name (none for a leaf)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def document(parser: argparse.ArgumentParser) -> None:
    """Give every command, and each of its subcommands, the list of its variables (after any
    epilog it has), with the layout kept."""
    for name, command in subparsers(parser).items():
        groups = COMMANDS.get(name, ())  # a command missing here fails tests/unit/test_cli_help
        for each in (command, *subparsers(command).values()):
            each.formatter_class = Formatter
            each.epilog = "\n\n".join(x for x in (each.epilog, environment(groups)) if x)


PAGE_HEAD = """# Configuration

Every variable `onsale` reads, by group, printed from their declarations (`python -m
onsale.help_text > docs/configuration.md`; a test fails when this page is not current). Each is
read once at boot; a command that cannot start names every missing or weak variable at once (one
`onsale: ...` line each, exit 2). `onsale <command> --help` lists the variables that command
reads. Every secret must be at least 32 characters and not guessable: `openssl rand -base64 32`.
"""


def page() -> str:
    """docs/configuration.md: each group a table, each variable once (under its first group)."""
    lines, seen = [PAGE_HEAD], set()
    for group in every_group():
        fresh = [s for s in group.settings if s.name not in seen]
        if not fresh:
            continue
        lines += [f"## {group.title[0].upper()}{group.title[1:]}", ""]
        lines += ["| variable | default | meaning |", "|---|---|---|"]
        for setting in fresh:
            seen.add(setting.name)
            said = "required" if setting.required else (setting.default_said() or "none")
            words = setting.words.replace("|", "\\|")
            lines.append(f"| `{setting.name}` | {said} | {words} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(page(), end="")
