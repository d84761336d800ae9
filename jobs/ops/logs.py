"""Logging for specbench's long-running processes: JSON lines when asked, plain text otherwise.

`configure_logging()` picks the format from `SPECBENCH_LOG_FORMAT` (`json` or `text`; text when
unset) and installs one stderr handler on the root logger; other libraries' loggers are kept at
WARNING, and a message longer than MAX_MESSAGE_CHARS is cut. Whatever the format, every line goes
through `jobs.redaction.redact` with the secrets of the environment at that call (docs/contracts.md:
env values whose name contains TOKEN, KEY, SECRET or PASSWORD read `***`) and loses the password of
any URL it quotes, tracebacks included. `log_start(role)` logs the version a process runs, once, at
its start.
"""

from __future__ import annotations

import datetime
import json as jsonlib
import logging
import os
import platform
import sys
from collections.abc import Sequence
from typing import IO, Any

from jobs import __version__, redaction, settings

FORMAT_VARIABLE = "SPECBENCH_LOG_FORMAT"
_PLAIN = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Libraries log at WARNING and up: their INFO lines are noise at best and, at worst, quote what
# they were sent (Bolt's invalid-signature line holds the whole request body). Ours stay INFO.
THIRD_PARTY = ("slack_bolt", "slack_sdk", "urllib3", "httpx", "httpcore", "aiohttp", "asyncio",
               "celery", "kombu", "amqp", "redis", "sqlalchemy", "alembic", "uvicorn",
               "websockets", "matplotlib", "PIL", "filelock", "transformers", "torch")
# ...but for the one line a worker's operator (and its tests) wait for: "celery@host ready.".
_KEPT_AT_INFO = ("celery.apps.worker",)
# A logged message (not its traceback) is cut there: nothing a caller passes floods the log.
MAX_MESSAGE_CHARS = 4096
# Attributes every LogRecord has; anything else on a record came from `extra=` and is logged.
_STANDARD_ATTRS = frozenset(
    vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None))
) | {"message", "asctime", "taskName"}


def scrub(text: str, *, secrets: Sequence[str]) -> str:
    """`text` as it may be logged: `secrets` (`redaction.secret_values`) and URL passwords read
    ***."""
    return redaction.redact_urls(redaction.redact(text, secrets=secrets))


def _scrub_value(value: Any, secrets: Sequence[str], *, name: str = "") -> Any:
    if name and redaction.is_secret_name(name):
        return "***"
    if isinstance(value, str):
        return scrub(value, secrets=secrets)
    if isinstance(value, dict):
        return {str(k): _scrub_value(v, secrets, name=str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_scrub_value(v, secrets) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return scrub(str(value), secrets=secrets)


def _bounded(message: str) -> str:
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    cut = len(message) - MAX_MESSAGE_CHARS
    return f"{message[:MAX_MESSAGE_CHARS]}... ({cut} more characters not logged)"


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ts, level, logger, message, any `extra=` fields, exc."""

    def __init__(self, *, secrets: Sequence[str]) -> None:
        super().__init__()
        self._secrets = secrets

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ).replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": _bounded(record.getMessage()),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and not key.startswith("_") and key not in payload:
                payload[key] = value
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            payload["stack"] = self.formatStack(record.stack_info)
        # Redact field by field before encoding, so that JSON escaping cannot hide a secret.
        return jsonlib.dumps(_scrub_value(payload, self._secrets), ensure_ascii=False)


class PlainFormatter(logging.Formatter):
    """The usual `time level logger: message` line, redacted (traceback included)."""

    def __init__(self, *, secrets: Sequence[str]) -> None:
        super().__init__(_PLAIN)
        self._secrets = secrets

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        record.message = _bounded(record.message)
        return super().formatMessage(record)

    def format(self, record: logging.LogRecord) -> str:
        return scrub(super().format(record), secrets=self._secrets)


class _SpecbenchHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Marks the handler `configure_logging` installed, so a second call replaces it."""


def is_json_requested() -> bool:
    value = os.environ.get(FORMAT_VARIABLE, "").strip().lower()
    return value == "json"


def configure_logging(
    json: bool | None = None, *, level: int | str = logging.INFO, stream: IO[str] | None = None
) -> logging.Handler:
    """Install specbench's handler on the root logger (replacing one installed before).

    `json=None` reads `SPECBENCH_LOG_FORMAT`. Returns the handler, for tests and for Celery's
    `setup_logging` signal (connect it to keep Celery from installing its own).
    """
    use_json = is_json_requested() if json is None else json
    secrets = redaction.secret_values(os.environ)  # the process's own: read once, at start
    formatter = JsonFormatter if use_json else PlainFormatter
    handler = _SpecbenchHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter(secrets=secrets))
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _SpecbenchHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    floor = max(logging.WARNING, root.level)
    for name in THIRD_PARTY:
        logging.getLogger(name).setLevel(floor)
    for name in _KEPT_AT_INFO:
        logging.getLogger(name).setLevel(root.level)
    return handler


def log_start(role: str, **details: Any) -> None:
    """Log the version a process runs (`specbench 0.1.0 bot starting`), with its mode."""
    mode = "distributed" if settings.broker_url() else "embedded"
    logging.getLogger("specbench").info(
        "specbench %s %s starting (%s mode, Python %s)",
        __version__, role, mode, platform.python_version(),
        extra={"version": __version__, "role": role, "mode": mode, **details},
    )
