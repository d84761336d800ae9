"""The shape of the code: the core imports no adapter library; `analyze` starts light."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, make_record

CORE = (
    "jobs.core.records", "jobs.core.presets", "jobs.core.plans", "jobs.core.verdicts", "jobs.core.report",
    "jobs.core.remedies", "jobs.core.rules", "jobs.core.messages", "jobs.core.errors", "jobs.settings",
    "jobs.core.events",
)
# Adapter libraries (and our own adapters) that no core module may pull in.
ADAPTERS = (
    "torch", "transformers", "celery", "kombu", "redis", "slack_bolt", "slack_sdk",
    "sqlalchemy", "alembic", "httpx", "uvicorn", "starlette", "aiohttp",
    "jobs.engines.sglang", "jobs.engines.local", "jobs.store", "jobs.engines.procs",
)
# What `specbench analyze` must never import (SPEC.md: no GPU, broker or Slack).
HEAVY = ("torch", "transformers", "celery", "kombu", "redis", "slack_bolt", "slack_sdk")


def python(code: str, *args: str) -> list[str]:
    """Run `code` in a fresh interpreter; its last stdout line is a JSON list of module names."""
    result = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=REPO, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    modules: list[str] = json.loads(result.stdout.strip().splitlines()[-1])
    return modules


def offending(modules: list[str], banned: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == b or m.startswith(b + ".") for b in banned))


def test_core_modules_import_no_adapter_library() -> None:
    code = (
        "import importlib, json, sys\n"
        f"for name in {CORE!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    modules = python(code)
    assert set(CORE) <= set(modules)
    assert offending(modules, ADAPTERS) == []


def test_analyze_imports_no_torch_celery_or_slack(tmp_path: Path) -> None:
    runs = tmp_path / "runs.jsonl"
    runs.write_text(
        make_record("baseline", samples=[100.0, 101.0]).to_json() + "\n"
        + make_record("a", samples=[110.0, 111.0], accept_length=2.0).to_json() + "\n"
    )
    # the real entry point, then a dump of what it imported (on stdout's last line)
    code = (
        "import contextlib, io, json, sys\n"
        "from bot.cli.main import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    code = main(sys.argv[1:])\n"
        "assert code == 0, code\n"
        "assert 'improved' in out.getvalue()\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    for fmt in ("text", "json", "slack"):
        modules = python(code, "analyze", str(runs), "--format", fmt)
        assert "jobs.core.report" in modules
        assert offending(modules, HEAVY) == [], fmt
