"""Logs: one JSON object per line on stderr, with the request id of the request being served on
every line written while serving it, and nothing secret (ADR 0027).

- `configure(env)` sets up a process (every command does it first): ONSALE_LOG_LEVEL (debug,
  info, warning, error; default info) and ONSALE_LOG_FORMAT (json, or text for a terminal).
  `uvicorn_config(env)` is the same setup as uvicorn applies it in each of its workers.
- A line: `ts` (UTC, ISO 8601, milliseconds), `level`, `logger`, `msg`, `request_id` while a
  request is served (REQUEST_ID, set by api/logs.py), any `extra={"fields": {...}}` given, and
  `exc` with the traceback of an exception.
- Secrets: nothing logs a header or a body. As a second line of defence every line is scrubbed
  before it is written: the values of the secret settings (`remember_secrets`: every ONSALE_*
  token, secret, password or key, and the password of every ONSALE_* URL or DSN), bearer
  credentials, passwords in URLs, provider keys (sk_/rk_/whsec_), JWTs and signatures."""

import logging
import re
import sys
import time
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

import orjson

from engine.config.variables import Choice, Group

REQUEST_ID: ContextVar[str] = ContextVar("onsale_request_id", default="")

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("json", "text")
REDACTED = "[redacted]"
SECRET_NAME = re.compile(r"^ONSALE_\w*(TOKEN|SECRET|PASSWORD|API_KEY)\w*$")
SECRET_CHARS_MIN = 8  # shorter values are not secrets worth a search (and would scrub noise)
PATTERNS = (
    # Authorization values and bearer tokens, wherever they appear
    (re.compile(r"(?i)\b(bearer|basic)\s+[\w.~+/=-]{8,}"), r"\1 " + REDACTED),
    # user:password@ in a URL or DSN
    (re.compile(r'(\b[a-z][a-z0-9+.-]*://[^\s:/@"]*:)[^\s@/"]+@'), r"\1" + REDACTED + "@"),
    # provider keys and signing secrets
    (re.compile(r"\b(sk|rk)_(live|test)_\w+|\bwhsec_[\w+/=]+"), REDACTED),
    # JWTs
    (re.compile(r"\beyJ[\w-]+\.[\w-]+\.[\w-]+"), REDACTED),
    # signatures: t=...,v1=<hex> (provider callbacks), v1,<base64> (Standard Webhooks)
    (re.compile(r"\bv1[=,][\w+/=]{16,}"), "v1=" + REDACTED),
    # key=value or "key": "value" for secret-looking keys
    (
        re.compile(
            r"(?i)\b(password|passwd|secret|token|api_key|signature|authorization)"
            r"(\"?\s*[:=]\s*\"?)[^\s\"',;&}]+"
        ),
        r"\1\2" + REDACTED,
    ),
)

_secrets: set[str] = set()


def remember_secrets(env: Mapping[str, str]) -> None:
    """Scrub, from every line this process writes, the values of its secret settings."""
    for name, value in env.items():
        if not name.startswith("ONSALE_") or not value:
            continue
        if SECRET_NAME.match(name):
            _secrets.add(value)
        elif "://" in value:
            password = urlsplit(value).password
            if password:
                _secrets.add(password)
    for value in [s for s in _secrets if len(s) < SECRET_CHARS_MIN]:
        _secrets.discard(value)


def scrub(text: str) -> str:
    for value in _secrets:
        if value in text:
            text = text.replace(value, REDACTED)
    for pattern, replacement in PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact_url(url: str) -> str:
    """A URL or DSN fit for a log line: its password replaced."""
    return scrub(url)


def timestamp(created: float) -> str:
    """UTC, ISO 8601, milliseconds: 2025-01-31T12:00:00.123Z."""
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{seconds}.{int(created * 1000) % 1000:03d}Z"


def scrubbed(value: Any) -> Any:
    """`value` with every string in it scrubbed (before it is serialised: JSON's escapes would
    hide a `"token": "..."` from the patterns)."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, Mapping):
        return {str(k): scrubbed(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [scrubbed(v) for v in value]
    if isinstance(value, bool | int | float) or value is None:
        return value
    return scrub(str(value))


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": scrub(record.getMessage()),
        }
        request_id = REQUEST_ID.get()
        if request_id:
            line["request_id"] = request_id
        fields = getattr(record, "fields", None)
        if isinstance(fields, Mapping):
            line.update({k: scrubbed(v) for k, v in fields.items() if k not in line})
        if record.exc_info:
            line["exc"] = scrub(self.formatException(record.exc_info))
        return orjson.dumps(line).decode()


class TextFormatter(logging.Formatter):
    """For a terminal: `ts level logger [request id] message key=value ...`."""

    def format(self, record: logging.LogRecord) -> str:
        request_id = REQUEST_ID.get()
        parts = [timestamp(record.created), record.levelname, record.name]
        parts += [f"[{request_id}]"] if request_id else []
        parts.append(record.getMessage())
        fields = getattr(record, "fields", None)
        if isinstance(fields, Mapping):
            parts += [f"{k}={v}" for k, v in fields.items()]
        text = " ".join(parts)
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return scrub(text)


def writes_json() -> bool:
    """Whether this process logs JSON (its root handlers say so; configured or not)."""
    return not any(isinstance(h.formatter, TextFormatter) for h in logging.getLogger().handlers)


LOG_LEVEL = Choice("ONSALE_LOG_LEVEL", "debug, info, warning or error", "info", choices=LEVELS)
LOG_FORMAT = Choice(
    "ONSALE_LOG_FORMAT", "json: one JSON object a line, with the request id while serving one; "
    "text: for a terminal", "json", choices=FORMATS,
)  # fmt: skip
LOGS = Group("logs", (LOG_LEVEL, LOG_FORMAT))


def uvicorn_config(env: Mapping[str, str]) -> dict[str, Any]:
    """`logging.config.dictConfig` of a process: one stderr handler with our formatter; uvicorn
    and httpx say only what goes wrong (the access log is api/logs.py's)."""
    level = LOG_LEVEL.read(env).upper()
    kind = LOG_FORMAT.read(env)
    formatter = JsonFormatter if kind == "json" else TextFormatter
    quiet = {"level": "WARNING"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"onsale": {"()": f"{formatter.__module__}.{formatter.__name__}"}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "stream": "ext://sys.stderr",
                "formatter": "onsale",
            }
        },
        "root": {"level": level, "handlers": ["stderr"]},
        "loggers": {
            "uvicorn": quiet,
            "uvicorn.error": quiet,
            "uvicorn.access": {"level": "WARNING", "handlers": [], "propagate": False},
            "httpx": quiet,
            "httpcore": quiet,
        },
    }


def configure(env: Mapping[str, str]) -> None:
    """Set up this process's logging from ONSALE_LOG_LEVEL and ONSALE_LOG_FORMAT, and remember
    its secrets for scrubbing."""
    import logging.config

    logging.config.dictConfig(uvicorn_config(env))
    remember_secrets(env)
    sys.stderr.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    sys.excepthook = _log_uncaught  # a crash's traceback is a log line too, scrubbed


def _log_uncaught(kind: type[BaseException], value: BaseException, tb: Any) -> None:
    logging.getLogger("onsale").critical("uncaught %s", kind.__name__, exc_info=(kind, value, tb))
