"""Where specbench finds its configuration, data and services (SPEC.md's environment)."""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD")
# A preset's `${NAME}` env value: a reference to a worker's variable, never a secret itself.
_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
# `scheme://user:password@host`: the password part, whatever env variable it came from.
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)[^@/\s]+(?=@)")


def _shipped(name: str) -> Path:
    """A folder shipped with the package: inside the wheel, or the checkout's own."""
    inside = _PACKAGE / "_shipped" / name
    return inside if inside.is_dir() else _PACKAGE.parent / name


def config_dir() -> Path:
    return Path(os.environ.get("SPECBENCH_CONFIG_DIR") or _shipped("config"))


def shipped_config() -> Path:
    """The config folder shipped with the code (what an engine's facts are read from, whatever
    SPECBENCH_CONFIG_DIR says: they belong to the code, not to a deployment)."""
    return _shipped("config")


def templates_dir() -> Path:
    return _shipped("templates")


def data_dir() -> Path:
    return Path(os.environ.get("SPECBENCH_DATA_DIR") or ".specbench")


def database_url() -> str:
    url = os.environ.get("SPECBENCH_DATABASE_URL")
    if url:
        return url
    return f"sqlite:///{(data_dir() / 'specbench.db').resolve()}"


def broker_url() -> str | None:
    return os.environ.get("SPECBENCH_BROKER_URL") or None


def default_queue() -> str:
    return os.environ.get("SPECBENCH_QUEUE") or "default"


def timezone() -> str:
    """The time zone of the digest's schedule and of dates in messages."""
    return os.environ.get("SPECBENCH_TIMEZONE", "").strip() or "UTC"


def max_points() -> int:
    """The most points a sweep's grid may hold (SPEC.md "Bounded work"): SPECBENCH_MAX_POINTS,
    default 10,000; a value that is not a positive whole number is the default."""
    raw = os.environ.get("SPECBENCH_MAX_POINTS", "").strip().replace("_", "").replace(",", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_MAX_POINTS


DEFAULT_MAX_POINTS = 10_000




def id_list(name: str) -> frozenset[str]:
    """A comma-separated list of Slack IDs from the environment; empty means no restriction."""
    return frozenset(part.strip() for part in os.environ.get(name, "").split(",") if part.strip())


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in _SECRET_WORDS)


def secret_values(*environs: Mapping[str, str]) -> tuple[str, ...]:
    """The values that must never be shown: in every environment given (`os.environ`, a run's
    env), each value of 4 characters or more whose name looks secret; longest first. A switch
    such as TOKENIZERS_PARALLELISM=false holds no secret: masking every "false" in a log would
    only hide what the failure rules and readers need."""
    values = {str(v) for env in environs for k, v in env.items() if is_secret_name(k)}
    return tuple(sorted(filter(is_secret_value, values), key=len, reverse=True))


def is_secret_value(value: str) -> bool:
    """Whether a value of a secret-looking name is one to hide: 4 characters or more, not a
    switch (true, false, auto...), and not a `${NAME}` reference (jobs.core.secret_refs),
    which names a secret without holding it."""
    return (len(value) >= 4 and value.lower() not in _NOT_SECRET
            and _REFERENCE.fullmatch(value) is None)


_NOT_SECRET = frozenset({"true", "false", "none", "null", "auto", "unset", "disabled",
                         "enabled"})


def redact(text: str, *, secrets: Iterable[str]) -> str:
    """`text` with each of `secrets` (see `secret_values`) replaced by ***, longest first so
    that a secret holding another is masked whole."""
    for value in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(value, "***")
    return text


def redact_urls(text: str) -> str:
    """`text` with the password of every URL it quotes read *** (`redis://:***@host`)."""
    return _URL_PASSWORD.sub(r"\g<head>***", text)


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """An env mapping as it may be shown: secret-looking names read ***, unless their value
    is a `${NAME}` reference, which is shown as it is (SPEC.md: outputs keep the reference)."""
    return {k: ("***" if is_secret_name(k) and _REFERENCE.fullmatch(str(v)) is None else v)
            for k, v in env.items()}


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
