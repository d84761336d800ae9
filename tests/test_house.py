"""The house's measures (docs/architecture.md): every module of bot/ and jobs/ (migrations aside)
under 300 lines and with a docstring, and no folder whose own modules (its sub-folders apart)
hold more than 15% of the lines of bot/ and jobs/ together. The import rules are `make lint`'s
(import-linter, tests/test_architecture.py)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from tests.conftest import REPO

MAX_LINES = 300
MAX_FOLDER_SHARE = 0.15


def _modules() -> list[Path]:
    found = [p for top in ("bot", "jobs") for p in sorted((REPO / top).rglob("*.py"))]
    return [p for p in found if "migrations" not in p.relative_to(REPO).parts]


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_every_module_is_short_and_says_what_it_is() -> None:
    long = [f"{p.relative_to(REPO)}: {n}" for p in _modules() if (n := _lines(p)) > MAX_LINES]
    assert long == [], f"over {MAX_LINES} lines"
    silent = [str(p.relative_to(REPO)) for p in _modules()
              if p.stat().st_size > 200 and not ast.get_docstring(ast.parse(p.read_text()))]
    assert silent == [], "no module docstring"


def test_no_folder_holds_more_than_its_share() -> None:
    per_folder: Counter[str] = Counter()
    for path in _modules():
        per_folder[str(path.parent.relative_to(REPO))] += _lines(path)
    total = sum(per_folder.values())
    heavy = {folder: f"{lines / total:.1%}" for folder, lines in per_folder.items()
             if lines > MAX_FOLDER_SHARE * total}
    assert heavy == {}, f"of {total} lines"
