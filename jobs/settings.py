"""Where specbench finds its configuration, data and services (SPEC.md's environment)."""

from __future__ import annotations

import datetime
import os
import re
import zoneinfo
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NoReturn

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
    """SPECBENCH_CONFIG_DIR, else the shipped config/; one that is no folder is refused (a
    typo would otherwise read as a config without presets, rules or remedies)."""
    given = os.environ.get("SPECBENCH_CONFIG_DIR")
    if not given:
        return _shipped("config")
    path = Path(given)
    if (problem := _folder_problem(path, create=False)) is not None:
        _refuse("SPECBENCH_CONFIG_DIR", given, f"{problem}; point it at a copy of the shipped "
                "config/ (presets/, failure_rules.yaml, remedies.yaml) or unset it")
    return path


def shipped_config() -> Path:
    """The config folder shipped with the code (what an engine's facts are read from, whatever
    SPECBENCH_CONFIG_DIR says: they belong to the code, not to a deployment)."""
    return _shipped("config")


def templates_dir() -> Path:
    return _shipped("templates")


def data_dir() -> Path:
    """SPECBENCH_DATA_DIR, else ./.specbench: a folder, or one specbench can create (its path
    holds no file where a folder must be)."""
    given = os.environ.get("SPECBENCH_DATA_DIR")
    path = Path(given or ".specbench")
    if (problem := _folder_problem(path, create=True)) is not None:
        _refuse("SPECBENCH_DATA_DIR", given or "./.specbench (the default)",
                f"{problem}; point it at a folder (specbench creates it) or unset it")
    return path


def _folder_problem(path: Path, *, create: bool) -> str | None:
    """Why `path` is no folder (with `create`: nor can become one), or None."""
    for candidate in (path, *path.parents) if create else (path,):
        try:
            if candidate.is_dir():
                return None
            if candidate.exists():
                where = "" if candidate == path else f"{candidate} "
                return f"{where}{'is ' if where else ''}a file, not a folder"
        except OSError as exc:
            return f"cannot be read ({exc.strerror or exc})"
    return None if create else "no such folder"


def _refuse(name: str, value: str, why: str) -> NoReturn:
    """A setting that cannot be used: one line naming it, its value (a URL's password masked)
    and why; bad input, exit 2 (docs/contracts.md "Environment")."""
    from jobs.core.errors import SettingError  # the one hierarchy, which reads this module

    raise SettingError(f"{name} is {redact_urls(value)!r}: {why}")


def database_url() -> str:
    url = os.environ.get("SPECBENCH_DATABASE_URL")
    if url:
        return url
    return f"sqlite:///{(data_dir() / 'specbench.db').resolve()}"


def broker_url() -> str | None:
    """SPECBENCH_BROKER_URL: unset (embedded), or a Redis URL (the broker and the events)."""
    url = os.environ.get("SPECBENCH_BROKER_URL") or None
    if url is not None and (problem := _broker_problem(url)) is not None:
        _refuse("SPECBENCH_BROKER_URL", url, f"{problem}; the broker is Redis: "
                "redis://HOST:PORT/DB, rediss://... or unix://PATH (unset: batches run in this "
                "process)")
    return url


# redis://[[user]:password@]host[:port][/db][?options], as redis-py reads it
_REDIS_URL = re.compile(r"(?i)(?P<scheme>rediss?|unix)://(?:[^@/]*@)?(?P<host>\[[^\]]*\]|[^:/?#]*)"
                        r"(?::(?P<port>[^/?#]*))?(?:/(?P<db>[^?#]*))?")


def _broker_problem(url: str) -> str | None:
    """Why `url` is no Redis URL redis-py can connect with, or None."""
    found = _REDIS_URL.match(url)
    if found is None:
        return "not a Redis URL"
    if found["scheme"].lower() == "unix":
        return None
    port, db = found["port"], found["db"]
    if port is not None and not (port.isdigit() and 1 <= int(port) <= 65535):
        return f"the port {port!r} is not a number from 1 to 65535"
    if db and not db.isdigit():
        return f"the database {db!r} is not a number"
    return None


def default_queue() -> str:
    return os.environ.get("SPECBENCH_QUEUE") or "default"


def timezone() -> str:
    """The time zone of the digest's schedule and of dates in messages: an IANA name."""
    name = os.environ.get("SPECBENCH_TIMEZONE", "").strip() or "UTC"
    if name != "UTC":
        try:
            zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            _refuse("SPECBENCH_TIMEZONE", name, "no such time zone; an IANA name such as "
                    "Europe/Paris or America/New_York (unset: UTC)")
    return name


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
