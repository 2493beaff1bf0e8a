"""The admin API as the command line calls it (`onsale event`, `onsale webhooks`, `onsale
logins`): each command a thin client, with the API's own checks, answers and error codes. The
admin token is read from ONSALE_ADMIN_TOKEN, never from the command line (it would show in the
process list). Exit 0 on success, 1 when the API refuses (its code and message printed), 2 when
it cannot be reached or no token is set."""

import os
from collections.abc import Callable
from typing import Any

import httpx
from rich.console import Console

from api.settings import ADMIN_TOKEN
from onsale.environment import API_URL


class Refused(Exception):
    def __init__(self, answer: httpx.Response) -> None:
        try:
            error = answer.json()["error"]
            text = f"{error['code']}: {error['message']}"
        except (ValueError, KeyError, TypeError):
            text = f"HTTP {answer.status_code}"
        super().__init__(text)


def admin_group(sub: Any, name: str, help: str, description: str) -> Any:
    """`onsale <name> <op>`: a command group that calls the admin API (its `--api` option);
    its subcommands are added to what this returns, and `<name>_command` names the one run."""
    group = sub.add_parser(name, help=help, description=description)
    group.add_argument("--api", default=None, help=f"the API's base URL (default ${API_URL.name})")
    return group.add_subparsers(dest=f"{name}_command", required=True)


class Admin:
    """The admin API, as the command line calls it."""

    def __init__(self, api: str, token: str) -> None:
        self.api = api
        self.http = httpx.Client(base_url=api, timeout=60,
                                 headers={"Authorization": f"Bearer {token}"})  # fmt: skip

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        ok: tuple[int, ...] = (200,),
        headers: dict[str, str] | None = None,
    ) -> Any:
        answer = self.http.request(method, path, json=body, headers=headers)
        if answer.status_code not in ok:
            raise Refused(answer)
        return answer.json() if answer.content else None


def run_admin(api_option: str | None, step: Callable[[Admin, Console], Any]) -> int:
    """Run one command's `step` against the admin API; its exit status."""
    console = Console()
    api = (api_option or API_URL.read(os.environ)).rstrip("/")
    token = ADMIN_TOKEN.raw(os.environ)
    if not token:
        console.print(f"onsale: {ADMIN_TOKEN.name} is not set (the admin API's token)")
        return 2
    try:
        step(Admin(api, token), console)
    except Refused as exc:
        console.print(f"[red]refused: {exc}")
        return 1
    except ValueError as exc:
        console.print(f"[red]{exc}")
        return 1
    except httpx.HTTPError as exc:
        console.print(f"[red]cannot reach the API at {api}: {exc}")
        return 2
    return 0
