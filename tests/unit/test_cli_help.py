"""`onsale <command> --help` describes every option and every environment variable the command
reads: the options are walked in the argparse tree, and the variables are read off the settings
loaders themselves (a recording environment), so a new setting without a line of help fails."""

import argparse
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from api.settings import API, JWT, LIMITS, ApiSettings
from api.transport import HTTP, HttpBounds
from api.webhooks_db import WEBHOOK_DB, WebhookDbSettings
from engine.config.logs import LOGS, uvicorn_config
from engine.config.settings import ENGINE, LEDGER_DB, STRIPE, Settings
from engine.config.variables import Group, Setting
from engine.workers.metrics import EXPORTER, ExporterSettings
from onsale import help_text as h
from onsale.cli import build_parser
from onsale.environment import COMMANDS as COMMANDS_READ
from onsale.environment import HOST, PORT, WORKERS
from persistence.settings import LEDGER, SENDER, LedgerDb, LedgerSettings, SenderSettings
from tests.conftest import API_TEST_ENV

BASE = {
    "ONSALE_REDIS_URL": "redis://127.0.0.1:6379/0",
    "ONSALE_PROVIDER_URL": "http://sim",
    "ONSALE_PG_DSN": "postgresql://u@h/db",
    **API_TEST_ENV,
    "ONSALE_WEBHOOK_SECRET": "whs-Lr5tY8cV2nQ7mX1zK4bD9fH3jP6wS0a",
}
STRIPE_ENV = {
    "ONSALE_PROVIDER": "stripe",
    "ONSALE_STRIPE_API_KEY": "sk_test_" + "k7Qm2Xv9" * 3,
    "ONSALE_STRIPE_WEBHOOK_SECRET": "whsec_" + "Zr4tP8wL" * 4,
}
JWT_ENV = {
    "ONSALE_DEMO_LOGIN": "0",
    "ONSALE_JWT_JWKS_URL": "https://idp/jwks",
    "ONSALE_JWT_ISSUER": "https://idp",
    "ONSALE_JWT_AUDIENCE": "onsale",
}


class Recording(dict[str, str]):
    """An environment that remembers every name asked for, set or not."""

    def __init__(self, env: Mapping[str, str]) -> None:
        super().__init__(env)
        self.asked: set[str] = set()

    def get(self, key: str, default: Any = None) -> Any:
        self.asked.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> str:
        self.asked.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.asked.add(str(key))
        return super().__contains__(key)


def read_by(load: Callable[[Mapping[str, str]], object], *envs: Mapping[str, str]) -> set[str]:
    names: set[str] = set()
    for env in envs:
        recording = Recording({**BASE, **env})
        load(recording)
        names |= recording.asked
    return names


ENGINE_READS = read_by(Settings.from_env, {}, STRIPE_ENV)
LOADERS: dict[str, Callable[[], set[str]]] = {
    "logs": lambda: read_by(uvicorn_config, {}),
    "engine and stripe": lambda: ENGINE_READS,
    "api and jwt": lambda: read_by(ApiSettings.from_env, {}, JWT_ENV) - ENGINE_READS,
    "http": lambda: read_by(HttpBounds.from_env, {}),
    "webhook database": lambda: read_by(WebhookDbSettings.from_env, {}),
    "ledger database": lambda: read_by(LedgerDb.from_env, {}),
    "ledger": lambda: read_by(LedgerSettings.from_env, {}) - ENGINE_READS,
    "sender": lambda: read_by(SenderSettings.from_env, {}),
    "exporter": lambda: read_by(ExporterSettings.from_env, {}),
}
DOCUMENTED: dict[str, tuple[Group, ...]] = {
    "logs": (LOGS,),
    "engine and stripe": (ENGINE, STRIPE),
    "api and jwt": (API, LIMITS, JWT),
    "http": (HTTP,),
    "webhook database": (WEBHOOK_DB,),
    "ledger database": (LEDGER_DB,),
    "ledger": (LEDGER_DB, LEDGER),
    "sender": (SENDER,),
    "exporter": (EXPORTER,),
}


@pytest.mark.parametrize("loader", sorted(LOADERS))
def test_each_group_declares_exactly_what_its_settings_read(loader: str) -> None:
    declared = {name for group in DOCUMENTED[loader] for name in group.names}
    read = LOADERS[loader]()
    assert sorted(read - declared) == [], "read but not declared in the reader's group"
    assert sorted(declared - read) == [], "declared but no longer read"


def parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for name, child in h.subparsers(parser).items():
        yield from parsers(child, (*path, name))


OPTIONS: dict[str, Setting[Any]] = {"--host": HOST, "--port": PORT, "--workers": WORKERS}
ALL = list(parsers(build_parser()))
COMMANDS = [(path, p) for path, p in ALL if path]


def test_the_tree_has_every_command_and_subcommand() -> None:
    names = {path for path, _p in COMMANDS}
    assert {("serve",), ("worker",), ("ledger",), ("stock", "correct"), ("policy", "report")} <= (
        names
    )
    assert {path[0] for path in names} == set(COMMANDS_READ)


def test_every_option_is_described() -> None:
    """Every option of every command has a help line its --help shows (all commands at once,
    naming each option that has none)."""
    undescribed = []
    for path, parser in ALL:
        text = parser.format_help()
        for action in parser._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            if not (action.help and len(action.help) > 5 and action.option_strings[0] in text):
                undescribed.append(f"onsale {' '.join(path)} {action.option_strings[0]}")
    assert undescribed == []
    assert len(ALL) > 40  # the walk found the tree


def test_every_command_names_every_variable_it_reads() -> None:
    """Each command's --help names every variable its process reads, with its help (all commands
    at once, naming each variable a help leaves out)."""
    unnamed = []
    for path, parser in COMMANDS:
        text = parser.format_help()
        for group in COMMANDS_READ[path[0]]:
            for setting in group.settings:
                if setting.name not in text or setting.help.split()[0] not in text:
                    unnamed.append(f"onsale {' '.join(path)}: {setting.name}")
    assert unnamed == []


def test_options_read_from_the_environment_name_their_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    commands = dict(COMMANDS)
    for flag, setting in OPTIONS.items():
        action = next(a for a in commands[("serve",)]._actions if flag in a.option_strings)
        assert action.help is not None and f"env {setting.name}" in action.help
    monkeypatch.setenv("ONSALE_HOST", "0.0.0.0")
    monkeypatch.setenv("ONSALE_PORT", "8123")
    monkeypatch.setenv("ONSALE_WORKERS", "3")
    args = build_parser().parse_args(["serve"])
    assert (args.host, args.port, args.workers) == ("0.0.0.0", 8123, 3)
    assert build_parser().parse_args(["serve", "--port", "9000"]).port == 9000


def test_an_option_that_names_a_variable_reads_it() -> None:
    """No help text promises a variable the option does not read."""
    for path, parser in COMMANDS:
        for action in parser._actions:
            if action.help and "env ONSALE_" in action.help:
                flag = action.option_strings[0]
                assert path == ("serve",) and flag in OPTIONS, f"{path} {flag}"


def test_version_names_the_installed_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"onsale {version('onsale')}"
