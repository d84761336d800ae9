"""README's sample session is what `specbench analyze` prints for it, line for line, and its
Commands table names every option each command's `--help` lists."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from bot.cli.main import build_parser
from tests.conftest import REPO

README = REPO / "README.md"
PROMPT = "$ specbench analyze docs/examples/seed-session.jsonl\n"


def sample() -> str:
    """The fenced block that opens with the analyze prompt, without its prompt line."""
    text = README.read_text(encoding="utf-8")
    start = text.index("```\n" + PROMPT) + len("```\n" + PROMPT)
    return text[start:text.index("```\n", start)]


def test_the_readmes_sample_is_what_analyze_prints() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "analyze", "docs/examples/seed-session.jsonl"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
        timeout=60)
    assert done.returncode == 0, done.stderr
    assert "..." not in sample()  # nothing elided
    assert sample() == done.stdout


def test_the_commands_table_names_every_option() -> None:
    rows = [line for line in README.read_text(encoding="utf-8").splitlines()
            if line.startswith("| `specbench ")]
    parser = build_parser()
    [commands] = [a for a in parser._actions if a.dest == "command"]
    for name, sub in commands.choices.items():  # type: ignore[union-attr]
        row = next((r for r in rows if re.search(rf"`specbench {name}\b", r)), None)
        assert row is not None, f"README's Commands table has no row for `specbench {name}`"
        for action in sub._actions:
            for option in action.option_strings:
                if option != "--help" and option != "-h" and len(option) > 2:
                    assert option in row, f"`specbench {name}` row lacks {option}"
