"""The optional extras (pyproject's `[project.optional-dependencies]`): what each one brings, and
the one refusal when a command needs an extra this installation lacks (docs/contracts.md
"Optional extras").

A command checks what it needs before anything runs or is stored, where the work happens: the
local engine and an adaptive sweep where the batch runs (this process in embedded mode, the
worker otherwise), charts where one is drawn, Celery and Redis wherever
`SPECBENCH_BROKER_URL` is set, Slack's libraries in the bot and the digest's beat, psycopg
wherever the store is PostgreSQL. The refusal is one line naming the extra to install
(`MissingExtra`, exit 2), never a traceback or a batch whose every row failed.
"""

from __future__ import annotations

import importlib.util

from jobs.errors import UserError

EXTRAS: dict[str, tuple[str, ...]] = {
    "local": ("torch", "transformers"),
    "search": ("optuna", "scipy", "torch"),
    "charts": ("matplotlib",),
    "distributed": ("celery", "redis"),
    "slack": ("slack_bolt", "slack_sdk", "uvicorn", "starlette", "aiohttp"),
    "postgres": ("psycopg",),
    "watch": ("ruptures", "numpy", "scipy"),
}
"""Each extra's top-level modules, as its packages install them (a test holds this to
pyproject.toml's extras)."""


PROCESSES: dict[str, tuple[tuple[str, str], ...]] = {
    "bot": (("slack", "the Slack bot"),),
    "worker": (("distributed", "specbench worker"),),
    "beat": (("distributed", "the digest's beat"), ("slack", "the digest's beat")),
}
"""What each long-running process needs, whatever it runs (a worker also needs what its batches
need: `jobs.batches.planning.needs`)."""


class MissingExtra(UserError):
    """A command needs an extra this installation lacks: nothing ran, nothing is stored."""


def lacking(extra: str) -> list[str]:
    """The modules of `extra` this interpreter cannot import (found without importing them)."""
    return [name for name in EXTRAS[extra] if not _is_importable(name)]


def require(*needs: tuple[str, str]) -> None:
    """Raise MissingExtra unless every module of each needed extra is here. `needs`: (extra,
    what needs it) pairs; the line names every module missing and every extra to install."""
    short = [(extra, what, lacking(extra)) for extra, what in needs]
    short = [item for item in short if item[2]]
    if not short:
        return
    whats = _and(list(dict.fromkeys(what for _, what, _ in short)))
    modules = _and(list(dict.fromkeys(m for _, _, missing in short for m in missing)))
    extras = ",".join(dict.fromkeys(extra for extra, _, _ in short))
    raise MissingExtra(f"{whats} {'need' if ' and ' in whats else 'needs'} {modules}, which "
                       f"this installation lacks: pip install 'specbench[{extras}]'")


def _and(words: list[str]) -> str:
    return " and ".join([", ".join(words[:-1]), words[-1]]) if len(words) > 1 else words[0]


def _is_importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a finder that refuses it, a module without a spec
        return False
