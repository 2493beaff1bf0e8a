"""The only module that touches uvicorn's internals: the claim front's connection
(api/claim_front/connection.py) and the HTTP bounds (api/transport.py) are uvicorn's httptools
protocol with some of its hooks overridden, written against uvicorn 0.54. Everything they rely
on beyond uvicorn's documented interface is imported here and named in INTERNALS;
tests/unit/test_uvicorn_seam.py fails naming each one an upgrade removed or reshaped, before a
held claim could hang or a bound stop holding.

The protocol hands uvicorn the transport its answers are written to (api/transport.py
OneWritePerTick, ADR 0055); tests/unit/test_one_write.py fails if uvicorn stops writing
through it.

`onsale serve` runs uvicorn through its public interface (`uvicorn.run`, `Config`), and
`ONSALE_EARLY_LANE=0` serves with the bounds alone."""

from uvicorn.config import Config
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)
from uvicorn.server import ServerState

__all__ = [
    "INTERNALS",
    "OWNERS",
    "STATUS_LINE",
    "Config",
    "FlowControl",
    "HttpToolsProtocol",
    "ProxyHeadersMiddleware",
    "RequestResponseCycle",
    "ServerState",
]

UVICORN_WRITTEN_FOR = "0.54"

# What we override, call or read, by owner: (name, its parameters for a method, or None for
# an attribute an instance has once built). The parameters are checked by name and order.
INTERNALS: dict[str, dict[str, tuple[str, ...] | None]] = {
    "HttpToolsProtocol": {
        # overridden: a held claim starts no task; the bounds arm and disarm their timers
        "_start_asgi_task": ("self", "cycle", "app"),
        "connection_made": ("self", "transport"),
        "connection_lost": ("self", "exc"),
        "data_received": ("self", "data"),
        "on_message_begin": ("self",),
        "on_headers_complete": ("self",),
        "on_message_complete": ("self",),
        # called: after an answer written by the connection itself
        "on_response_complete": ("self",),
        "_unset_keepalive_if_required": ("self",),
        "timeout_keep_alive_handler": ("self",),
        # read or set on a built protocol
        "timeout_keep_alive_task": None,
        "timeout_keep_alive": None,
        "expect_100_continue": None,
        "flow": None,
        "cycle": None,
        "server_state": None,
        "app": None,
        "loop": None,
    },
    "RequestResponseCycle": {"scope": None, "response_complete": None, "keep_alive": None},
    "FlowControl": {"write_paused": None},
    "ServerState": {"default_headers": None},
    "ProxyHeadersMiddleware": {"app": None},
}
OWNERS: dict[str, type] = {
    "HttpToolsProtocol": HttpToolsProtocol,
    "RequestResponseCycle": RequestResponseCycle,
    "FlowControl": FlowControl,
    "ServerState": ServerState,
    "ProxyHeadersMiddleware": ProxyHeadersMiddleware,
}
