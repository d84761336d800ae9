"""tests/warm_cli.py: a `specbench` process forked from the warm interpreter answers as a cold
one does (the same output, exit code, stdin, environment, directory, sys.path, session and
signals), dies with it, and whatever a cold one would have started differently starts cold."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import warm_cli
from tests.warm_cli_modules import NOT_PRELOADED

REPO = Path(__file__).resolve().parents[1]
# A module run with `-m` that shows what a process starts with.
SHOW_ME = '''import json, os, signal, sys
print(json.dumps({
    "argv": sys.argv[1:], "argv0": os.path.basename(sys.argv[0]), "path": sys.path[:3],
    "cwd": os.getcwd(), "stdin": sys.stdin.read(), "name": __name__,
    "env": {k: v for k, v in os.environ.items() if k.startswith("SHOW_")},
    "leads_group": os.getpgid(0) == os.getpid(), "leads_session": os.getsid(0) == os.getpid(),
    "signals": [str(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD,
                                                   signal.SIGPIPE)],
    "line_buffered": sys.stdout.line_buffering, "write_through": sys.stdout.write_through,
}))
print("to stderr", file=sys.stderr)
sys.exit(int(os.environ.get("SHOW_EXIT", "0")))
'''


@pytest.fixture
def show_me(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """An environment whose PYTHONPATH (a relative entry among them) finds `show_me`, routed."""
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "show_me.py").write_text(SHOW_ME)
    monkeypatch.setattr(warm_cli, "ROUTED", warm_cli.ROUTED | {"show_me"})
    yield {**os.environ, "PYTHONPATH": os.pathsep.join(["mods", str(REPO)]), "SHOW_A": "1"}


def both(argv: list[str], **options: object) -> tuple[subprocess.Popen[str], ...]:
    """The same command line started cold, then from the warm interpreter, each run to its end
    with its own stdin."""
    stdin = options.pop("input", "")
    done = []
    for popen in (warm_cli._COLD_POPEN, warm_cli.WarmPopen):
        proc = popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True, **options)
        proc.outs = proc.communicate(stdin, timeout=120)
        done.append(proc)
    assert [getattr(p, "_warm", False) for p in done] == [False, True]
    return tuple(done)


@pytest.mark.parametrize("session", [False, True])
@pytest.mark.parametrize("code", ["0", "3"])
def test_a_warm_child_starts_as_a_cold_one(
        tmp_path: Path, show_me: dict[str, str], session: bool, code: str) -> None:
    cold, warm = both([sys.executable, "-m", "show_me", "x", "--y"], input="hello\n",
                      env={**show_me, "SHOW_EXIT": code}, cwd=tmp_path,
                      start_new_session=session)
    assert warm.outs == cold.outs and warm.returncode == cold.returncode == int(code)
    shown = json.loads(warm.outs[0])
    assert shown["path"][:2] == [str(tmp_path), str(tmp_path / "mods")]
    assert shown["stdin"] == "hello\n" and shown["env"] == {"SHOW_A": "1", "SHOW_EXIT": code}
    assert shown["leads_session"] is session and shown["name"] == "__main__"


@pytest.mark.parametrize("argv", [["--version"], ["no-such-command"], ["presets"],
                                  ["show", "b-00000000"], ["run", "no-such-preset"]])
def test_specbench_answers_alike_warm_and_cold(tmp_path: Path, argv: list[str]) -> None:
    env = {**os.environ, "SPECBENCH_DATA_DIR": str(tmp_path / "data")}
    cold, warm = both([sys.executable, "-m", "bot.cli.main", *argv], env=env, cwd=REPO)
    assert warm.outs == cold.outs and warm.returncode == cold.returncode


def test_signals_timeouts_and_the_warm_interpreters_end(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "bot.cli.main", "console"]
    env = {**os.environ, "SPECBENCH_DATA_DIR": str(tmp_path / "data")}
    console = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
    assert isinstance(console, warm_cli.WarmPopen) and console._warm
    assert console.poll() is None
    console.terminate()
    assert console.wait(timeout=60) == -signal.SIGTERM
    quiet, held = os.pipe()  # a stdin that never ends: the console waits on it
    try:
        with pytest.raises(subprocess.TimeoutExpired):  # killed on the way out, as run() does
            subprocess.run(argv, stdin=quiet, stdout=subprocess.DEVNULL, env=env, timeout=0.5,
                           start_new_session=True)
    finally:
        os.close(quiet)
        os.close(held)
    server = warm_cli.warm_interpreter()
    assert server is not None and server.alive()
    orphan = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env)
    assert orphan._warm
    server.proc.kill()  # the child dies with it (PR_SET_PDEATHSIG) and says so
    assert orphan.wait(timeout=60) == -signal.SIGKILL
    again = subprocess.run([*argv[:3], "--version"], capture_output=True, text=True)
    assert again.stdout.startswith("specbench ") and warm_cli.warm_interpreter() is not server


def test_what_a_cold_one_would_start_differently_starts_cold(
        tmp_path: Path, show_me: dict[str, str]) -> None:
    def started(**options: object) -> subprocess.Popen[str]:
        proc = subprocess.Popen([sys.executable, "-m", "show_me"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                **{"env": show_me, "cwd": tmp_path, **options})
        proc.communicate(timeout=120)
        assert proc.returncode == 0
        return proc

    assert started()._warm
    (tmp_path / "mods" / "yaml.py").write_text("")  # a cold one imports this yaml, not PyYAML
    assert not started()._warm
    (tmp_path / "mods" / "yaml.py").unlink()
    (tmp_path / "mods" / "sitecustomize.py").write_text("")  # what `site` runs at start
    assert not started()._warm
    (tmp_path / "mods" / "sitecustomize.py").unlink()
    # another variable the interpreter reads as it starts (a value no environment has already)
    unheard_of = "ignore::UserWarning:specbench_none"
    assert not started(env={**show_me, "PYTHONWARNINGS": unheard_of})._warm
    assert not started(preexec_fn=lambda: None)._warm
    assert not started(pass_fds=(0,))._warm
    with pytest.raises(FileNotFoundError):  # as a cold start says it, in this process
        started(cwd=tmp_path / "missing")


def test_the_warm_interpreter_holds_no_library_that_reads_the_environment_at_import() -> None:
    server = warm_cli.warm_interpreter()
    assert server is not None
    assert set(NOT_PRELOADED).isdisjoint(server.modules)
    assert {"sqlalchemy", "celery", "bot", "jobs"} <= set(server.modules)
    status = Path(f"/proc/{server.proc.pid}/status").read_text()
    assert "\nThreads:\t1\n" in status  # forked with no thread of its own
