"""The CLI's last line of defence: an internal error is one line on stderr with an incident ID;
its traceback goes to the data dir's logs/errors.log alone, masked (issue 10, item 8)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli import commands
from bot.cli.main import main
from jobs import settings
from tests.conftest import REPO

SECRET = "sk-incident-secret-4242"
URL = "redis://:hunter2-password@cache.internal:6379/0"

# `specbench status` with cmd_status replaced by one that fails with the secret in its message.
_RAISE = f"""
import sys
from bot.cli import commands
def boom(args):
    raise RuntimeError("could not talk to {URL} with " + {SECRET!r})
commands.cmd_status = boom
from bot.cli.main import main
sys.exit(main(["status"]))
"""


def _check(stderr: str, *, data_dir: Path) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert re.fullmatch(r"specbench status: internal error, sorry \(incident [0-9a-f]{8}; .*\)",
                        lines[0]), lines[0]
    assert "Traceback" not in stderr and SECRET not in stderr and "hunter2" not in stderr
    incident = re.search(r"incident ([0-9a-f]{8})", lines[0]).group(1)  # type: ignore[union-attr]
    log = (data_dir / "logs" / "errors.log").read_text(encoding="utf-8")
    assert f"--- incident {incident}" in log
    assert "Traceback (most recent call last)" in log and "RuntimeError: could not talk" in log
    assert SECRET not in log and "hunter2" not in log
    assert "with ***" in log and "redis://:***@cache.internal" in log


def test_an_internal_error_is_one_line_and_a_masked_log(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MY_API_KEY", SECRET)

    def boom(args: object) -> int:
        raise RuntimeError(f"could not talk to {URL} with {SECRET}")

    monkeypatch.setattr(commands, "cmd_status", boom)
    assert main(["status"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    _check(captured.err, data_dir=settings.data_dir())


def test_a_real_process_prints_no_traceback(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": str(REPO), "MY_API_KEY": SECRET,
           "SPECBENCH_DATA_DIR": str(data)}
    done = subprocess.run([sys.executable, "-c", _RAISE], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    _check(done.stderr, data_dir=data)


def test_a_database_that_does_not_answer_is_named_not_an_internal_error(tmp_path: Path) -> None:
    """The real CLI against a PostgreSQL URL where nothing listens: one line that names the
    database (password masked) and says it did not answer; exit 1 (infrastructure)."""
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(REPO), "SPECBENCH_DATA_DIR": str(tmp_path),
           "SPECBENCH_DATABASE_URL": f"postgresql+psycopg://bench:pg-secret-77@127.0.0.1:{port}/x",
           "SPECBENCH_DB_CONNECT_TIMEOUT_S": "2"}
    done = subprocess.run([sys.executable, "-m", "bot.cli.main", "status"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1, done.stderr
    assert len(lines) == 1 and "internal error" not in lines[0], done.stderr
    assert lines[0].startswith(f"specbench status: error: the database at postgresql+psycopg://"
                               f"bench:***@127.0.0.1:{port}/x did not answer ("), lines[0]
    assert "pg-secret-77" not in done.stderr and done.stdout == ""


def test_an_incident_whose_traceback_cannot_be_kept_names_no_log_that_does_not_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32, item 5: with SPECBENCH_DATA_DIR a file the message named an errors.log that
    cannot exist; it says why the traceback was not kept instead, naming the setting."""
    data = tmp_path / "a-file"
    data.write_text("not a folder\n")
    monkeypatch.setenv("SPECBENCH_DATA_DIR", str(data))

    def boom(args: object) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(commands, "cmd_status", boom)
    assert main(["status"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert re.fullmatch(r"specbench status: internal error, sorry \(incident [0-9a-f]{8}; its "
                        r"traceback could not be kept: SPECBENCH_DATA_DIR is .*\)", line), line
    assert "errors.log" not in line and f"'{data}': a file, not a folder" in line
    assert data.read_text() == "not a folder\n"
