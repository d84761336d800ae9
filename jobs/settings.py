"""Where specbench finds its configuration, data and services (docs/contracts.md's environment)."""

from __future__ import annotations

import datetime
import functools
import os
import re
import zoneinfo
from pathlib import Path
from typing import NoReturn

from jobs.errors import SettingError
from jobs.redaction import redact_urls

_PACKAGE = Path(__file__).resolve().parent


@functools.cache
def _shipped(name: str) -> Path:
    """A folder shipped with the package: inside the wheel, or the checkout's own (where the
    code lies does not move while it runs: looked up once per process, not at each of the
    thousands of engine lookups a batch's analysis makes)."""
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
    """The most points a sweep's grid may hold (docs/contracts.md "Bounded work and any file"):
    SPECBENCH_MAX_POINTS, default 10,000; a value that is not a positive whole number is the
    default."""
    raw = os.environ.get("SPECBENCH_MAX_POINTS", "").strip().replace("_", "").replace(",", "")
    return int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_MAX_POINTS


DEFAULT_MAX_POINTS = 10_000


def stacks_file() -> Path | None:
    """SPECBENCH_STACKS: the host's stacks file (docs/contracts.md "Stacks"), or None: the host
    has one stack per engine, its interpreter setting's."""
    given = os.environ.get("SPECBENCH_STACKS", "").strip()
    return Path(given).expanduser() if given else None


def max_watches() -> int:
    """The most active regression watches (docs/contracts.md "Regression watch"):
    SPECBENCH_MAX_WATCHES, default 20; a value that is not a positive whole number is the
    default."""
    raw = os.environ.get("SPECBENCH_MAX_WATCHES", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_MAX_WATCHES


DEFAULT_MAX_WATCHES = 20


def watch_tick_s() -> float:
    """How often the beat looks for a watch that is due (SPECBENCH_WATCH_TICK_S, default 60
    seconds; at least 0.1)."""
    raw = os.environ.get("SPECBENCH_WATCH_TICK_S", "").strip()
    try:
        value = float(raw) if raw else DEFAULT_WATCH_TICK_S
    except ValueError:
        _refuse("SPECBENCH_WATCH_TICK_S", raw, "not a number of seconds (unset: 60)")
    if not 0.1 <= value <= 3600:
        _refuse("SPECBENCH_WATCH_TICK_S", raw, "must be from 0.1 to 3600 seconds (unset: 60)")
    return value


DEFAULT_WATCH_TICK_S = 60.0


def watch_clock() -> datetime.datetime:
    """The time a watch is added and its schedule is read at: now, or, where
    SPECBENCH_WATCH_CLOCK_FILE names a file (a test's simulated nights), the ISO time in it."""
    path = os.environ.get("SPECBENCH_WATCH_CLOCK_FILE")
    if not path:
        return utcnow()
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
        value = datetime.datetime.fromisoformat(text)
    except (OSError, ValueError) as exc:
        _refuse("SPECBENCH_WATCH_CLOCK_FILE", path, f"holds no ISO time ({exc})")
    return value if value.tzinfo else value.replace(tzinfo=datetime.UTC)


def seconds(name: str, *, default: float, least: float) -> float:
    """A number of seconds from the environment, at least `least`; unset, or not a number: the
    default (a tuning knob of the operator's, never a reason to refuse to start)."""
    raw = os.environ.get(name, "").strip()
    try:
        return max(float(raw), least) if raw else default
    except ValueError:
        return default


def id_list(name: str) -> frozenset[str]:
    """A comma-separated list of Slack IDs from the environment; empty means no restriction."""
    return frozenset(part.strip() for part in os.environ.get(name, "").split(",") if part.strip())


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
