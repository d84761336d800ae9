"""The shape of the code: the core imports no adapter library; `analyze` starts light."""

from __future__ import annotations

import ast
import json
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, make_record

CORE_DIR = REPO / "jobs" / "core"
# Every module of the core, found on disk (a new one is checked without being listed here).
CORE = tuple(
    sorted(m.name for m in pkgutil.walk_packages([str(CORE_DIR)], prefix="jobs.core."))
) + ("jobs.core", "jobs.settings")
# Adapter libraries (and our own adapters) that no core module may pull in, even indirectly.
ADAPTERS = (
    "torch", "transformers", "celery", "kombu", "redis", "slack_bolt", "slack_sdk",
    "sqlalchemy", "alembic", "httpx", "uvicorn", "starlette", "aiohttp", "matplotlib",
    "subprocess", "urllib.request",
    "jobs.store", "jobs.broker", "jobs.engines", "jobs.charts", "bot",
)
# What no core module may import itself (`urllib.parse` comes in with pathlib, so only the
# direct import of any part of urllib can be told apart).
DIRECT = (*ADAPTERS, "urllib")
# What `specbench analyze` must never import (docs/contracts.md: no GPU, broker or Slack).
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


def test_the_core_is_found_on_disk() -> None:
    assert {"jobs.core.advice._report", "jobs.core.verdicts._verdicts",
            "jobs.core.plans._plans"} <= set(CORE)


def test_core_modules_import_no_adapter_library() -> None:
    code = (
        "import importlib, json, sys\n"
        f"for name in {CORE!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    modules = python(code)
    assert set(CORE) <= set(modules)
    assert offending(modules, ADAPTERS) == []


def imported_names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of every import that runs, lazy ones in functions included; imports
    under `if TYPE_CHECKING:` are only read by the type checker and left out."""
    typing_only = {
        id(inner) for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
        for stmt in node.body for inner in ast.walk(stmt)
    }
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def test_core_modules_name_no_adapter_in_their_own_imports() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line} imports {name}"
        for path in sorted(CORE_DIR.rglob("*.py"))
        for line, name in imported_names(ast.parse(path.read_text(encoding="utf-8")))
        if offending([name], DIRECT)
    ]
    assert found == []


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
        assert "jobs.core.advice._report" in modules
        assert offending(modules, HEAVY) == [], fmt


ENGINES_DIR = REPO / "jobs" / "engines"
ENGINE_WORDS = re.compile(r"sglang|vllm", re.IGNORECASE)


def engine_naming_lines(root: Path) -> list[str]:
    """Each line of a module outside an engine's own package (jobs/engines/<name>/) that names
    SGLang or vLLM, in code, strings, comments or docstrings alike."""
    found: list[str] = []
    packages = {p.parent for p in ENGINES_DIR.glob("*/__init__.py")}
    for path in sorted([*(root / "jobs").rglob("*.py"), *(root / "bot").rglob("*.py")]):
        if any(package in path.parents for package in packages):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if ENGINE_WORDS.search(line):
                found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return found


def test_no_module_outside_an_engine_package_names_an_engine() -> None:
    assert engine_naming_lines(REPO) == []


def test_the_engine_check_fails_on_a_module_that_names_one(tmp_path: Path) -> None:
    (tmp_path / "jobs" / "core").mkdir(parents=True)
    (tmp_path / "bot").mkdir()
    (tmp_path / "jobs" / "core" / "x.py").write_text('"""Ask vLLM."""\nPORT = 1\n')
    (tmp_path / "bot" / "y.py").write_text("engine = 'sglang'\n")
    assert engine_naming_lines(tmp_path) == [
        "bot/y.py:1: engine = 'sglang'", 'jobs/core/x.py:1: """Ask vLLM."""',
    ]


# --------------------------------------------------------------------------- the dependency rules

sys.path.insert(0, str(REPO / "scripts"))
import import_contracts  # noqa: E402 - the script that makes the contracts from the doc


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter over the packages under `root`, with this repository's contracts."""
    return subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--config",
         str(REPO / "pyproject.toml"), "--no-cache"],
        cwd=root, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(root)})


def test_the_architecture_page_and_the_import_contracts_are_one_truth() -> None:
    """pyproject.toml's import-linter contracts are exactly those docs/architecture.md's tables
    make: a rule changed in one place only fails here."""
    import tomllib

    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    held = config["tool"]["importlinter"]["contracts"]
    assert held == import_contracts.contracts(doc)
    table = import_contracts.folders(doc)
    # every folder of bot/ and jobs/ (and every module beside them) has its row
    on_disk = {f"{top}.{p.stem}" for top in ("bot", "jobs") for p in (REPO / top).iterdir()
               if (p.is_dir() and (p / "__init__.py").exists()) or (
                   p.suffix == ".py" and p.name != "__init__.py")}
    assert on_disk == set(table)


def test_every_import_keeps_the_rules_and_a_planted_upward_one_breaks_them(
    tmp_path: Path,
) -> None:
    """lint-imports reads every import, those inside functions too: the tree as it is keeps
    every contract; a copy with one upward import planted in a function of the core does not."""
    kept = _lint_imports(REPO)
    assert kept.returncode == 0, kept.stdout[-3000:]
    assert "0 broken" in kept.stdout
    import shutil

    for top in ("bot", "jobs"):
        shutil.copytree(REPO / top, tmp_path / top,
                        ignore=shutil.ignore_patterns("__pycache__"))
    planted = tmp_path / "jobs" / "core" / "units.py"
    planted.write_text(planted.read_text(encoding="utf-8")
                       + "\n\ndef _upward() -> object:\n"
                       + "    from jobs.store import Store\n\n    return Store\n",
                       encoding="utf-8")
    broken = _lint_imports(tmp_path)
    assert broken.returncode == 1
    assert "jobs.core may import only what docs/architecture.md lists BROKEN" in broken.stdout
    assert "jobs.core.units -> jobs.store" in broken.stdout


def test_no_module_outside_a_room_imports_its_private_modules() -> None:
    """Rooms of jobs/core are used through their faces (`from jobs.core.verdicts import ...`),
    never through the modules behind them (`jobs.core.verdicts._verdicts`)."""
    private = re.compile(r"\bjobs\.core\.([a-z_]+)\._[a-z_]+")
    found = []
    for path in [*(REPO / "jobs").rglob("*.py"), *(REPO / "bot").rglob("*.py")]:
        parts = path.relative_to(REPO).parts
        own = parts[2] if parts[:2] == ("jobs", "core") and len(parts) > 3 else None
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            found += [f"{path.relative_to(REPO)}: {name}" for name in names
                      if (m := private.search(name or "")) and m.group(1) != own]
    assert found == []
