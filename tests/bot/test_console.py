"""`specbench console`: the same router and thread, drawn in a terminal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.standin.harness import SERVER_ARGS, STANDIN, TINY_BENCH

REPO = Path(__file__).resolve().parents[2]
PRESET = {
    "name": "standin-demo", "description": "Two approaches on the SGLang stand-in",
    "engine": "sglang", "metric": "output_throughput", "min_effect_pct": 2.0, "reps": 2,
    "timeouts": {"startup_s": 20, "bench_s": 20}, "bench": TINY_BENCH,
    "overridable": ["mem-fraction-static"],
    "baseline": {"server_args": SERVER_ARGS,
                 "env": {"STANDIN_THROUGHPUT": "82.0", "STANDIN_STARTUP_S": "0.1"}},
    "approaches": [
        {"name": "faster", "hypothesis": "More tokens per second",
         "env": {"STANDIN_THROUGHPUT": "95.0"}},
        {"name": "crashes", "hypothesis": "A server that dies", "env": {"STANDIN_MODE": "crash"}},
    ],
}


def console(tmp_path: Path, line: str, *, preset: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot.cli.main", "console", "-c", line, "--timeout",
                           "60"], capture_output=True, text=True, env=console_env(tmp_path),
                          timeout=90, cwd=REPO)


def console_env(tmp_path: Path) -> dict[str, str]:
    """The environment of `console`'s process: the stand-in SGLang, the config folder under
    tmp_path with the standin-demo preset (written on first use), the data folder beside it."""
    import yaml

    config = tmp_path / "config"
    if not config.exists():
        import shutil

        shutil.copytree(REPO / "config", config)
        (config / "presets" / "standin-demo.yaml").write_text(yaml.safe_dump(PRESET))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STANDIN_", "SPECBENCH_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(STANDIN), str(REPO)]),
               SPECBENCH_SGLANG_PYTHON=sys.executable, SPECBENCH_CONFIG_DIR=str(config),
               SPECBENCH_DATA_DIR=str(tmp_path / "data"), USER="tester")
    return env


def test_console_runs_a_batch_and_prints_the_thread_and_the_report(tmp_path: Path) -> None:
    done = console(tmp_path, "/specbench run standin-demo")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    lines = out.splitlines()
    assert lines[0].startswith("specbench standin-demo · batch b-")
    assert "for tester" in lines[0]
    thread = [line for line in lines if line.startswith("  │ ")]
    assert any("Progress of" in line for line in thread)
    assert any("faster: improved" in line for line in thread)  # plain progress lines (no tty)
    assert any("Key achievement: faster" in line for line in thread)
    assert any("[file]" in line and "-chart.png" in line for line in thread)
    assert any("[file]" in line and "-runs.jsonl" in line for line in thread)
    assert any(line.startswith("(edited) standin-demo · batch") for line in lines)
    assert "\x1b[" not in out


@pytest.mark.parametrize(("line", "code", "expected"), [
    ("stauts", 2, "Did you mean `status`?"),
    ("/specbench run nope", 2, "unknown preset 'nope'"),
    ("help", 0, "Usage: /specbench COMMAND"),
    ("status", 0, "No batch is running or queued."),
])
def test_console_one_liners(tmp_path: Path, line: str, code: int, expected: str) -> None:
    done = console(tmp_path, line)
    assert done.returncode == code, done.stderr
    assert expected in (done.stdout if code == 0 else done.stderr)  # errors go to stderr


# ------------------------------------------------------------------ the prompt and the thread


class _Terminal:
    """A text stream that says it is a terminal, keeping what was written."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def test_a_message_posted_while_the_prompt_waits_is_drawn_above_a_fresh_prompt() -> None:
    import asyncio

    from bot.console import PROMPT, ConsolePoster
    from bot.thread.messages import Message

    term = _Terminal()
    poster = ConsolePoster(term)  # type: ignore[arg-type]
    poster.show_prompt()
    asyncio.run(poster.post(channel="c", thread_ts="1", message=Message(text="baseline: rep 1/3")))
    # The prompt's line is cleared, the message takes it, the prompt comes back below it.
    assert term.text == f"{PROMPT}\r\x1b[K  │ baseline: rep 1/3\n{PROMPT}"
    ts = asyncio.run(poster.post(channel="c", thread_ts="1", message=Message(text="p\nq")))
    term.text = ""
    asyncio.run(poster.update(channel="c", ts=ts, message=Message(text="p\nr")))
    # Redrawn in place: up over the message's two lines (the cursor sits on the prompt's).
    assert term.text == f"\x1b[2F\x1b[J\r\x1b[K  │ p\n  │ r\n{PROMPT}"
    poster.prompt_answered()
    term.text = ""
    poster.say("done")
    assert term.text == "done\n"  # no prompt on screen: nothing to clear or redraw


def test_the_console_on_a_real_terminal_keeps_its_prompt_on_a_line_of_its_own(
    tmp_path: Path,
) -> None:
    """`specbench console` on a pseudo-terminal: each answer starts on its own line and the
    prompt follows it, never the other way round."""
    import pty
    import select
    import time

    env = {**os.environ, "SPECBENCH_DATA_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    pid, fd = pty.fork()
    if pid == 0:  # the child: the console on the terminal
        os.execvpe(sys.executable, [sys.executable, "-m", "bot.cli.main", "console"], env)
    seen = b""

    def read_until(marker: bytes, timeout: float = 60.0) -> None:
        """Until `marker` appears in what arrives from now on."""
        nonlocal seen
        start = len(seen)
        deadline = time.monotonic() + timeout
        while marker not in seen[start:] and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    seen += os.read(fd, 4096)
                except OSError:
                    break
        assert marker in seen[start:], seen.decode(errors="replace")

    try:
        read_until(b"specbench> ")
        os.write(fd, b"presets\n")
        read_until(b"specbench> ", timeout=30)  # the next prompt, after the answer
        os.write(fd, b"exit\n")
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    text = seen.decode(errors="replace").replace("\r\n", "\n")
    answer = text.split("presets\n", 1)[1]
    # The answer begins on the line after the typed command, and the prompt after the answer.
    assert "cpu-demo" in answer
    assert "specbench>" not in answer.rstrip().removesuffix("specbench>")
    assert answer.rstrip().endswith("specbench>")
