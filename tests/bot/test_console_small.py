"""What a user meets first in the console and the CLI (issue 21, item 6 B): the console's
banner, progress drawn above the line being typed (a real pseudo-terminal), `show` of a batch
still running, errors on stderr, and help for every flag that points to docs/contracts.md.
The console on a pipe and on a terminal is a process of its own; a line given with `-c`, `show`,
a refusal and `--help` run in this process (tests/builders.py `specbench_here`), their stdout
and stderr apart as a process's are."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jobs import __version__, settings
from jobs.store import Store
from tests.builders import specbench_here
from tests.conftest import REPO, make_plan, make_record
from tests.standin.harness import SERVER_ARGS, STANDIN, TINY_BENCH

BANNER_HINT = "type `help` for commands, Ctrl-D to quit"


def console(*args: str, stdin: str | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`specbench console ARGS...` in a fresh interpreter; its stdin a pipe (or nothing)."""
    return subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "console", *args], cwd=REPO,
        env=env or {**os.environ, "PYTHONPATH": str(REPO)}, input=stdin or "",
        capture_output=True, text=True, timeout=90,
    )


# ------------------------------------------------------------------ banner, errors on stderr


def test_the_console_on_a_pipe_greets_then_answers_and_its_errors_go_to_stderr() -> None:
    done = console(stdin="help\nstauts\n")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"specbench console {__version__}"
    assert lines[1] == f"data dir: {settings.data_dir().resolve()}"
    assert lines[2] == "mode: embedded (batches run in this process)"
    assert lines[3] == BANNER_HINT
    assert "Usage: /specbench COMMAND" in done.stdout  # the answer to `help`
    assert "Did you mean `status`?" in done.stderr  # the error, on stderr alone
    assert "Did you mean" not in done.stdout
    # No terminal: no prompt, no escape sequence.
    assert "specbench> " not in done.stdout and "\x1b[" not in done.stdout


def test_the_banner_names_the_broker_without_its_password() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO),
           "SPECBENCH_BROKER_URL": "redis://:hunter2@127.0.0.1:1/0", "SPECBENCH_QUEUE": "gpu-a"}
    done = console(stdin="", env=env)
    mode = next(line for line in done.stdout.splitlines() if line.startswith("mode: "))
    assert mode == "mode: distributed (broker redis://:***@127.0.0.1:1/0, queue gpu-a)", mode
    assert "hunter2" not in done.stdout + done.stderr


@pytest.mark.parametrize(("line", "code", "expected"), [
    ("stauts", 2, "Did you mean `status`?"),
    ("/specbench run nope", 2, "unknown preset 'nope'"),
    ("show b-nope", 2, "b-nope"),
])
def test_a_console_line_that_fails_answers_on_stderr_alone(
    line: str, code: int, expected: str, capsys: pytest.CaptureFixture[str],
) -> None:
    done = specbench_here(capsys, "console", "-c", line)
    assert done.returncode == code, (done.returncode, done.stderr)
    assert expected in done.stderr
    assert done.stdout == ""


def test_a_console_line_that_works_answers_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    done = specbench_here(capsys, "console", "-c", "help")
    assert done.returncode == 0, done.stderr
    assert "Usage: /specbench COMMAND" in done.stdout
    assert done.stderr == ""


def test_every_cli_error_goes_to_stderr_with_its_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    results = [specbench_here(capsys, *args) for args in (
        [], ["run", "nope"], ["run", "cpu-demo", "--reps", "many"], ["show", "b-nope"],
        ["cancel", "b-nope"], ["compare", "b-nope", "b-other"],
        ["digest", "--chart", str(tmp_path / "trend.svg")], ["analyze", str(tmp_path / "no")],
        ["status", "--format", "yaml"], ["console", "--timeout", "0"],
    )]
    for result in results:
        assert result.returncode == 2, (result.args, result.returncode, result.stderr)
        assert result.stdout == "", (result.args, result.stdout)
        assert result.stderr.strip(), result.args
        assert "Traceback" not in result.stderr


# ------------------------------------------------------------------ help


def test_every_flag_of_every_command_has_a_help_string() -> None:
    import argparse

    from bot.cli.main import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert len(commands.choices) >= 11
    missing = [f"{name} {action.dest}" for name, sub in commands.choices.items()
               for action in sub._actions
               if not isinstance(action, argparse._HelpAction) and not action.help]
    assert missing == []


def test_help_names_the_contract_the_repository_has(capsys: pytest.CaptureFixture[str]) -> None:
    assert (REPO / "docs" / "contracts.md").is_file()
    names = ["run", "analyze", "console", "bot", "worker", "status", "cancel", "show",
             "presets", "compare", "digest"]
    results = [specbench_here(capsys, *args)
               for args in (["--help"], *[[name, "--help"] for name in names])]
    for result in results:
        assert result.returncode == 0, (result.args, result.stderr)
        assert "SPEC.md" not in result.stdout, result.args
    top, run = results[0], results[1]
    assert "docs/contracts.md" in top.stdout
    assert "docs/contracts.md" in run.stdout
    flowed = " ".join(run.stdout.split())  # argparse wraps the help to the terminal's width
    assert '--rerun-known start known dead ends too (docs/contracts.md, "Memory across ' \
        'batches")' in flowed


# ------------------------------------------------------------------ show, still running


def _running_batch() -> None:
    """Batch b-run, running: its baseline recorded, its other configuration not yet."""
    with Store() as store:
        store.create_batch(batch_id="b-run", preset="eagle3", engine="local", queue="default",
                           requested_by="u", plan=make_plan())
        store.put_records([(0, make_record("baseline", batch="b-run", samples=[80.0, 81.0]))])
        store.set_state("b-run", "running")


def test_show_of_a_running_batch_says_so_and_its_key_achievement_is_provisional(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _running_batch()
    text, slack, done = (specbench_here(capsys, *args) for args in (
        ["show", "b-run"], ["show", "b-run", "--format", "slack"], ["console", "-c", "show b-run"]))
    assert text.returncode == 0, text.stderr
    header = text.stdout.split("\n\n", 1)[0].splitlines()
    assert "Still running: 1 of 2 runs done; the results below are provisional" in header
    assert "\nKey achievement (provisional, the batch is still running): " in text.stdout
    assert "\nKey achievement: " not in text.stdout
    import json

    blocks = json.loads(slack.stdout)["blocks"]
    sections = [b["text"]["text"] for b in blocks if b["type"] == "section"]
    assert sections[0].startswith("*Still running: 1 of 2 runs done*")
    assert any("*Key achievement (provisional" in s for s in sections)
    # The console shows it the same way.
    assert done.returncode == 0, done.stderr
    assert "Still running: 1 of 2 runs done" in done.stdout
    assert "Key achievement (provisional" in done.stdout


def test_show_of_an_ended_batch_is_not_provisional(capsys: pytest.CaptureFixture[str]) -> None:
    _running_batch()
    with Store() as store:
        store.put_records([(1, make_record("eagle3", batch="b-run", samples=[90.0, 91.0]))])
        store.set_state("b-run", "failed", error="the host went away")
    done = specbench_here(capsys, "show", "b-run")
    assert done.returncode == 0, done.stderr
    assert "still running" not in done.stdout.lower()
    assert "provisional" not in done.stdout
    assert "\nKey achievement: " in done.stdout


# ------------------------------------------------------------------ a real terminal

PRESET = {
    "name": "standin-slow", "description": "Two configurations, slow enough to type during",
    "engine": "sglang", "metric": "output_throughput", "min_effect_pct": 2.0, "reps": 2,
    "warmup": False, "timeouts": {"startup_s": 20, "bench_s": 20}, "bench": TINY_BENCH,
    # the baseline's start is the time to type in; the rest of the batch need not be slow
    "baseline": {"server_args": SERVER_ARGS,
                 "env": {"STANDIN_THROUGHPUT": "82.0", "STANDIN_STARTUP_S": "1.5"}},
    "approaches": [{"name": "faster", "hypothesis": "More tokens per second",
                    "env": {"STANDIN_THROUGHPUT": "95.0", "STANDIN_STARTUP_S": "0.05",
                            "STANDIN_HEALTH_S": "0.02"}}],
}


class Terminal:
    """`specbench console` on a pseudo-terminal, 120 columns wide."""

    def __init__(self, env: dict[str, str]) -> None:
        import fcntl
        import pty
        import struct
        import termios

        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the console on the terminal
            os.chdir(REPO)
            os.execvpe(sys.executable, [sys.executable, "-m", "bot.cli.main", "console"], env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.seen = b""

    def type(self, text: bytes) -> int:
        """Type `text`; where the output stood before it."""
        at = len(self.seen)
        os.write(self.fd, text)
        return at

    def read_until(self, pattern: bytes, *, since: int = 0, timeout: float = 60.0) -> bytes:
        """Until `pattern` (a regex) matches what arrived from `since` on; that output."""
        import select
        import time

        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.seen[since:]) and time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if ready:
                try:
                    self.seen += os.read(self.fd, 4096)
                except OSError:
                    break
        assert re.search(pattern, self.seen[since:]), self.seen.decode(errors="replace")
        return self.seen[since:]

    def exit_code(self) -> int:
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status)


def test_progress_is_drawn_above_the_line_being_typed(tmp_path: Path) -> None:
    """A command half typed while the batch's progress is redrawn: the progress goes above,
    the prompt and the typed text come back below it, and finishing the line runs it."""
    import shutil

    import yaml

    config = tmp_path / "config"
    shutil.copytree(REPO / "config", config)
    (config / "presets" / "standin-slow.yaml").write_text(yaml.safe_dump(PRESET))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STANDIN_", "SPECBENCH_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(STANDIN), str(REPO)]), TERM="xterm",
               SPECBENCH_SGLANG_PYTHON=sys.executable, SPECBENCH_CONFIG_DIR=str(config),
               SPECBENCH_DATA_DIR=str(tmp_path / "data"), USER="tester")
    term = Terminal(env)
    try:
        banner = term.read_until(rb"specbench> ")
        assert f"specbench console {__version__}".encode() in banner
        assert BANNER_HINT.encode() in banner
        at = term.type(b"/specbench run standin-slow\r")
        term.read_until(rb"Progress of b-", since=at)
        at = term.type(b"hel")
        # A progress line (in the thread, indented), then the prompt with what was typed.
        term.read_until("│[^\n]*\r?\nspecbench> hel".encode(), since=at, timeout=30)
        at = term.type(b"p\r")
        term.read_until(rb"Usage: /specbench COMMAND", since=at, timeout=30)
        term.read_until(rb"Key achievement: faster", timeout=60)  # the batch ended
        term.type(b"\x04")  # Ctrl-D
        assert term.exit_code() == 0
    finally:
        os.close(term.fd)


def test_a_console_stopped_while_reading_gives_the_terminal_back_as_it_was(
    tmp_path: Path,
) -> None:
    """Ctrl-C at the prompt: readline had turned echo off; the terminal gets it back."""
    import signal
    import termios

    env = {**os.environ, "SPECBENCH_DATA_DIR": str(tmp_path), "PYTHONPATH": str(REPO),
           "TERM": "xterm"}
    term = Terminal(env)
    try:
        term.read_until(rb"specbench> ")
        at = term.type(b"stat")
        term.read_until(rb"stat", since=at)
        assert not termios.tcgetattr(term.fd)[3] & termios.ECHO  # readline echoes, not the tty
        os.kill(term.pid, signal.SIGINT)
        term.read_until(rb"interrupted", timeout=30)
        assert term.exit_code() == 1  # interrupted (docs/contracts.md's exit codes)
        assert termios.tcgetattr(term.fd)[3] & termios.ECHO
    finally:
        os.close(term.fd)
