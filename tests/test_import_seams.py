"""Two import circles stay broken (issue 22): the Slack HTTP mode serves a `ServedBot` protocol
instead of importing the bot that starts it, and secret references read the preset's model, not
the preset loader that asks them (mypy checks that SpecbenchBot is a ServedBot where
bot.slack.app serves it). Type-only imports count: a circle is a circle to the reader."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at the top, in a function or under TYPE_CHECKING."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize(("importer", "imported"), [
    ("bot/slack/app.py", "bot.slack.http"),
    ("jobs/core/plans/_presets.py", "jobs.core.plans._secret_refs"),
])
def test_the_import_runs_one_way(importer: str, imported: str) -> None:
    back = REPO / (imported.replace(".", "/") + ".py")
    importer_module = importer.removesuffix(".py").replace("/", ".")
    assert imported in imported_modules(REPO / importer)
    assert importer_module not in imported_modules(back)

