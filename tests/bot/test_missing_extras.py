"""A missing optional dependency is one line naming the extra to install, before anything runs
(issue 32, item 6): through the real `specbench` (and `python -m bot.slack.beat`) on an
installation without that extra.

An installation without an extra is this one with the extra's modules made unimportable in every
process (a `sitecustomize` on PYTHONPATH puts None in `sys.modules` for each: `import` fails and
`importlib.util.find_spec` finds nothing, as when the package was never installed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest

from tests.conftest import REPO

BLOCKER = '''import os, sys
for name in filter(None, os.environ.get("SPECBENCH_TEST_UNINSTALLED", "").split(",")):
    sys.modules[name] = None  # not installed: import fails, find_spec finds nothing
'''


def without(tmp_path: Path, modules: str, *argv: str,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`argv` (specbench's arguments, or a `-m` module) on an installation without `modules`."""
    site = tmp_path / "uninstalled"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER, encoding="utf-8")
    command = [sys.executable, *argv] if argv[0] == "-m" else [
        sys.executable, "-m", "bot.cli.main", *argv]
    return subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join((str(site), str(REPO))),
             "SPECBENCH_TEST_UNINSTALLED": modules, **(env or {})})


def one_line(done: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit 2, one line on stderr, no traceback, nothing on stdout."""
    assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.stdout == ""
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def nothing_stored() -> None:
    data = Path(os.environ["SPECBENCH_DATA_DIR"])
    if (data / "specbench.db").exists():
        from jobs.store import Store

        with Store() as store:
            assert store.list_batches() == [] and store.list_watches() == []


@pytest.mark.parametrize(("modules", "argv", "line"), [
    ("torch,transformers", ("run", "cpu-loads"),
     "specbench run: error: the local engine needs torch and transformers, which this "
     "installation lacks: pip install 'specbench[local]'"),
    ("torch", ("run", "cpu-demo"),
     "specbench run: error: the local engine and an adaptive sweep (Optuna's sampler) need "
     "torch, which this installation lacks: pip install 'specbench[local,search]'"),
    ("torch", ("probe", "--backend", "gloo"),
     "specbench probe: error: the collectives probe needs torch, which this installation "
     "lacks: pip install 'specbench[local]'"),
], ids=lambda v: str(v)[:40])
def test_a_command_without_its_extra_says_which_to_install(
    tmp_path: Path, modules: str, argv: tuple[str, ...], line: str
) -> None:
    """In a process of its own: the local engine's children, the probe's ranks and the fork
    server would import what the command lacks."""
    assert one_line(without(tmp_path, modules, *argv)) == line
    nothing_stored()


def in_process(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
               modules: str, argv: list[str], *, env: dict[str, str] | None = None,
               ) -> tuple[int, str]:
    """`bot.cli.main.main(argv)` with `modules` not installed: its exit code and one line."""
    for name in modules.split(","):
        monkeypatch.setitem(sys.modules, name, None)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    from bot.cli.main import main

    code = main(argv)
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return code, err.strip()


@pytest.mark.parametrize(("modules", "argv", "env", "line"), [
    ("optuna", ["run", "cpu-demo"], {},
     "specbench run: error: an adaptive sweep (Optuna's sampler) needs optuna, which this "
     "installation lacks: pip install 'specbench[search]'"),
    ("matplotlib", ["digest", "--chart", "trend.png"], {},
     "specbench digest: error: --chart needs matplotlib, which this installation lacks: "
     "pip install 'specbench[charts]'"),
    ("matplotlib", ["show", "--chart", "chart.png"], {},
     "specbench show: error: --chart needs matplotlib, which this installation lacks: "
     "pip install 'specbench[charts]'"),
    ("slack_bolt,slack_sdk", ["bot"], {},
     "specbench bot: error: the Slack bot needs slack_bolt and slack_sdk, which this "
     "installation lacks: pip install 'specbench[slack]'"),
    ("celery,redis", ["run", "cpu-loads"], {"SPECBENCH_BROKER_URL": "redis://127.0.0.1:6379/15"},
     "specbench run: error: distributed mode (SPECBENCH_BROKER_URL is set) needs celery and "
     "redis, which this installation lacks: pip install 'specbench[distributed]'"),
    ("celery", ["worker", "--queue", "q"], {"SPECBENCH_BROKER_URL": "redis://127.0.0.1:6379/15"},
     "specbench worker: error: specbench worker needs celery, which this installation lacks: "
     "pip install 'specbench[distributed]'"),
    ("ruptures", ["watch", "add", "cpu-loads"], {},
     "specbench watch: error: a regression watch's change detection needs ruptures, which this "
     "installation lacks: pip install 'specbench[watch]'"),
    ("matplotlib", ["watch", "show", "1", "--chart", "series.png"], {},
     "specbench watch: error: --chart needs matplotlib, which this installation lacks: "
     "pip install 'specbench[charts]'"),
    ("psycopg", ["status"],
     {"SPECBENCH_DATABASE_URL": "postgresql+psycopg://specbench:secret@127.0.0.1:5432/x"},
     "specbench status: error: a PostgreSQL store (SPECBENCH_DATABASE_URL) needs psycopg, "
     "which this installation lacks: pip install 'specbench[postgres]'"),
], ids=lambda v: str(v)[:40])
def test_the_same_line_for_every_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    modules: str, argv: list[str], env: dict[str, str], line: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert in_process(monkeypatch, capsys, modules, argv, env=env) == (2, line)
    assert not list(tmp_path.glob("*.png"))
    nothing_stored()


def test_the_digest_beat_without_celery(monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from bot.slack import beat

    monkeypatch.setitem(sys.modules, "celery", None)
    monkeypatch.setenv("SPECBENCH_BROKER_URL", "redis://127.0.0.1:6379/15")
    assert beat.main([]) == 2
    assert capsys.readouterr().err.strip() == (
        "python -m bot.slack.beat: error: the digest's beat needs celery, which this "
        "installation lacks: pip install 'specbench[distributed]'")


def test_the_console_says_it_in_one_line_and_starts_nothing(tmp_path: Path) -> None:
    """The chat surface: the same line as its reply, no batch whose every row crashed."""
    done = without(tmp_path, "torch,transformers", "console", "-c", "run cpu-loads")
    assert done.returncode == 2, (done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stdout + done.stderr
    assert "the local engine needs torch and transformers, which this installation lacks: " \
           "pip install 'specbench[local]'" in done.stderr
    assert "crash" not in done.stdout
    nothing_stored()


def test_the_extras_are_pyprojects() -> None:
    """Each extra's modules are those its packages install (pyproject.toml's optional
    dependencies, their modules read from this installation's metadata): every package of an
    extra brings at least one module named, and none named comes from elsewhere."""
    import re
    import tomllib

    from jobs.extras import EXTRAS, PROCESSES

    declared = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    extras = {name: deps for name, deps in
              declared["project"]["optional-dependencies"].items() if name != "dev"}
    assert set(extras) == set(EXTRAS)
    provides: dict[str, set[str]] = {}
    for module, dists in metadata.packages_distributions().items():
        for dist in dists:
            provides.setdefault(_normal(dist), set()).add(module)
    for name, deps in extras.items():
        brought = [provides.get(_normal(re.split(r"[\[<>=!~ ]", dep)[0]), set()) for dep in deps]
        assert all(modules & set(EXTRAS[name]) for modules in brought), (name, brought)
        assert set(EXTRAS[name]) <= set().union(*brought), (name, brought)
    assert {extra for needs in PROCESSES.values() for extra, _ in needs} <= set(EXTRAS)


def _normal(dist: str) -> str:
    return dist.lower().replace("_", "-")


@pytest.mark.timeout(300)
def test_a_worker_without_the_engines_extra_refuses_the_batch(tmp_path: Path) -> None:
    """Distributed: the bot's host has no engine to check, the worker does, before any server
    starts: the batch ends `refused` with the line, `run` exits 2, no run is recorded."""
    import signal

    from jobs.store import Store
    from tests.jobs.test_distributed import redis_db

    gen = redis_db()
    broker = next(gen)
    site = tmp_path / "uninstalled"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER, encoding="utf-8")
    env = {**os.environ, "SPECBENCH_BROKER_URL": broker,
           "PYTHONPATH": os.pathsep.join((str(site), str(REPO)))}
    log = tmp_path / "worker.log"
    with open(log, "w") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "bot.cli.main", "worker", "--queue", "cpu"], cwd=tmp_path,
            env={**env, "SPECBENCH_TEST_UNINSTALLED": "torch,transformers"}, stdout=out,
            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        while "ready." not in log.read_text(errors="replace"):
            assert worker.poll() is None, log.read_text()[-3000:]
            time.sleep(0.1)
        done = subprocess.run([sys.executable, "-m", "bot.cli.main", "run", "cpu-loads",
                               "--queue", "cpu", "--timeout", "240"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=270)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=60)
        next(gen, None)
    assert done.returncode == 2, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert "refused" in last and ("the local engine needs torch and transformers, which this "
                                  "installation lacks: pip install 'specbench[local]'") in last
    with Store() as store:
        (row,) = store.list_batches()
        assert row.state == "refused" and store.records(row.id) == []
