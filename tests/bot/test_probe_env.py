"""A probe's `--env` follows the preset rule (issue 32, items 2 and 9): a secret-looking name
takes `${NAME}` only and nothing stores, posts, uploads or prints its value; a variable that
chooses the code the ranks load (PYTHONPATH, LD_PRELOAD, BASH_ENV, PATH, HOME...) is never
accepted. Through the CLI, the console, the Slack stand-in and the worker that takes a queued
probe, with real gloo ranks. A planted sitecustomize.py writes a file when imported: it never
is.

How the ranks are seen to get what a reference resolves to: gloo reads GLOO_SOCKET_IFNAME, so
`${PROBE_IFACE}` resolved to `lo` measures, and left as it is fails in gloo's own words.

A probe that starts ranks runs `specbench` in a process of its own; a refusal, which starts none,
calls `bot.cli.main.main(argv)`, the same entry, in this process, with the same environment.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.chat.router import Router
from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.batches.planning import submit
from jobs.batches.probing import execute_probe, probe_plan
from jobs.evidence.probe_input import asked
from jobs.store import Store
from tests.bot.conftest import BotServer, start_bot, summaries, thread_of
from tests.bot.test_chat_probe import ALICE, ended, refused, router, said  # noqa: F401
from tests.builders import specbench_here
from tests.standin.slack_api import SlackStandin

REPO = Path(__file__).resolve().parents[2]
SECRET = "s3cret-probe-value-7f1e2d"  # the value of MY_SECRET_TOKEN where the probe runs
IFACE = "nosuch-s3cret-if0"  # a PROBE_IFACE that gloo cannot find: its error quotes it
PLANTED = """
import os, pathlib
pathlib.Path(os.environ.get("PLANT_MARK", "{mark}")).write_text("imported")
"""
# Each variable here would make a rank (or the shell before it) load code of the caller's
# choosing; the first plants a sitecustomize.py.
PROTECTED = ("PYTHONPATH", "LD_PRELOAD", "BASH_ENV", "PATH", "HOME", "PYTHONSTARTUP",
             "LD_LIBRARY_PATH", "NCCL_NET_PLUGIN")


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A folder with a sitecustomize.py that writes `imported` to the returned path."""
    folder = tmp_path / "planted"
    folder.mkdir()
    mark = tmp_path / "planted-was-imported"
    (folder / "sitecustomize.py").write_text(PLANTED.format(mark=mark))
    return mark


def specbench(*args: str, env: dict[str, str] | None = None,
              timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own; MY_SECRET_TOKEN and PROBE_IFACE only where `env` says."""
    inherited = {k: v for k, v in os.environ.items()
                 if k not in ("MY_SECRET_TOKEN", "PROBE_IFACE")}
    return subprocess.run(
        [sys.executable, "-m", "bot.cli.main", *args], cwd=REPO, capture_output=True, text=True,
        env={**inherited, "PYTHONPATH": str(REPO), **(env or {})}, timeout=timeout)


Done = subprocess.CompletedProcess


@pytest.fixture
def inprocess(capsys: pytest.CaptureFixture[str]) -> Callable[..., Done[str]]:
    """`specbench` as `specbench` above runs it (in the checkout, MY_SECRET_TOKEN and PROBE_IFACE
    only where `env` says), in this process (tests/builders.py `specbench_here`): for refusals,
    which start no rank."""

    def run(*args: str, env: dict[str, str] | None = None) -> Done[str]:
        return specbench_here(capsys, *args, drop=("MY_SECRET_TOKEN", "PROBE_IFACE"),
                              env={"PYTHONPATH": str(REPO), **(env or {})}, cwd=REPO)

    return run


def one_line(done: Done[str], code: int) -> str:
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    return line


def everything_under(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


# --------------------------------------------------------------------------- the CLI


def test_the_cli_refuses_a_literal_secret_and_runs_a_reference(
    tmp_path: Path, inprocess: Callable[..., Done[str]]
) -> None:
    line = one_line(inprocess("probe", "--env", f"NCCL_API_KEY={SECRET}"), 2)
    assert line.startswith("specbench probe: error: --env NCCL_API_KEY holds a literal secret")
    assert "write NCCL_API_KEY=${NCCL_API_KEY}" in line and SECRET not in line

    line = one_line(inprocess("probe", "--env", "NCCL_API_KEY=${MY_SECRET_TOKEN}"), 2)
    assert line == ("specbench probe: error: --env NCCL_API_KEY: ${MY_SECRET_TOKEN} is not set "
                    "in the worker's environment")

    done = specbench("probe", "--sizes", "4K", "--iters", "2", "--format", "json",
                     "--env", "NCCL_API_KEY=${MY_SECRET_TOKEN}",
                     "--env", "GLOO_SOCKET_IFNAME=${PROBE_IFACE}",
                     env={"MY_SECRET_TOKEN": SECRET, "PROBE_IFACE": "lo"})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["env"] == {"GLOO_SOCKET_IFNAME": "${PROBE_IFACE}",
                             "NCCL_API_KEY": "${MY_SECRET_TOKEN}"}
    assert [s["bytes"] for s in result["sizes"]] == [4096]  # gloo found `lo`: resolved
    assert SECRET not in done.stdout + done.stderr


def test_what_a_reference_resolved_to_is_masked_in_a_ranks_reason() -> None:
    line = one_line(specbench("probe", "--backend", "gloo", "--sizes", "4K", "--iters", "1",
                              "--env", "GLOO_SOCKET_IFNAME=${PROBE_IFACE}",
                              env={"PROBE_IFACE": IFACE}), 1)
    assert "Unable to find address for: ***" in line, line  # gloo's words, the value masked
    assert IFACE not in line


def test_the_cli_never_hands_the_ranks_a_variable_that_chooses_their_code(
    tmp_path: Path, planted: Path, inprocess: Callable[..., Done[str]]
) -> None:
    for name in PROTECTED:
        value = str(planted.parent / "planted") if name == "PYTHONPATH" else str(tmp_path)
        line = one_line(inprocess("probe", "--sizes", "4K", "--iters", "1",
                                  "--env", f"{name}={value}"), 2)
        assert line == (f"specbench probe: error: --env {name} is never accepted: it chooses "
                        "the code or the files the ranks load (docs/security.md)"), line
    assert not planted.exists()


# --------------------------------------------------------------------------- the console


def console(tmp_path: Path, line: str, *, via: Callable[..., Any] = specbench,
            **env: str) -> Done[str]:
    """`specbench console -c LINE` (through `via`), its own data dir, USER tester."""
    done: Done[str] = via(
        "console", "-c", line, "--timeout", "90",
        env={"SPECBENCH_DATA_DIR": str(tmp_path / "data"), "USER": "tester", **env})
    return done


def test_the_console_refuses_a_literal_secret_and_a_planted_path_storing_nothing(
    tmp_path: Path, planted: Path, inprocess: Callable[..., Done[str]]
) -> None:
    done = console(tmp_path, f"probe --sizes 4K --iters 1 --env MY_SECRET_TOKEN={SECRET}",
                   via=inprocess)
    assert done.returncode == 2 and done.stdout == "", done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert "--env MY_SECRET_TOKEN holds a literal secret: write MY_SECRET_TOKEN=" in line
    assert SECRET not in done.stdout + done.stderr

    done = console(tmp_path, f"probe --sizes 4K --iters 1 --env PYTHONPATH={planted.parent}"
                             "/planted", via=inprocess)
    assert done.returncode == 2 and done.stdout == "", done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert "--env PYTHONPATH is never accepted" in line
    assert not planted.exists()
    data = tmp_path / "data"
    assert not data.exists() or SECRET.encode() not in everything_under(data)
    assert Store(f"sqlite:///{data / 'specbench.db'}").list_batches() == []


def test_the_console_posts_uploads_and_stores_the_reference_only(tmp_path: Path) -> None:
    done = console(tmp_path, "probe --sizes 4K --iters 2 --env MY_SECRET_TOKEN=${MY_SECRET_TOKEN}"
                             " --env GLOO_SOCKET_IFNAME=${PROBE_IFACE}",
                   MY_SECRET_TOKEN=SECRET, PROBE_IFACE="lo")
    assert done.returncode == 0, done.stdout + done.stderr
    assert SECRET not in done.stdout + done.stderr
    assert done.stdout.count("MY_SECRET_TOKEN=${MY_SECRET_TOKEN}") >= 3  # parent, summary...
    data = tmp_path / "data"
    (upload,) = data.glob("console/b-*-probe.json")
    asked_env = {"GLOO_SOCKET_IFNAME": "${PROBE_IFACE}", "MY_SECRET_TOKEN": "${MY_SECRET_TOKEN}"}
    probed = json.loads(upload.read_text())
    assert probed["env"] == asked_env and len(probed["sizes"]) == 1  # gloo found `lo`
    stored = everything_under(data)
    assert SECRET.encode() not in stored and b"${MY_SECRET_TOKEN}" in stored
    (row,) = Store(f"sqlite:///{data / 'specbench.db'}").list_batches()
    assert row.state == "done" and row.plan.probe is not None
    assert dict(row.plan.probe["env"]) == asked_env


# --------------------------------------------------------------------------- chat and Slack


def test_chat_refuses_before_anything_is_stored(router: Router, planted: Path,  # noqa: F811
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROBE_MISSING", raising=False)
    refused(said(router, f"probe --env MY_SECRET_TOKEN={SECRET}"), "holds a literal secret")
    refused(said(router, f"probe --env=HF_TOKEN={SECRET}"), "--env HF_TOKEN holds a literal")
    for name in PROTECTED:
        refused(said(router, f"probe --env {name}={planted.parent / 'planted'}"),
                f"--env {name} is never accepted")
    refused(said(router, "probe --env NCCL_API_KEY=${PROBE_MISSING}"),  # embedded: the bot is
            "--env NCCL_API_KEY: ${PROBE_MISSING} is not set in the worker's environment")
    assert router.dispatcher.store.list_batches() == []
    assert not planted.exists()


def test_the_slack_thread_and_upload_keep_the_reference(
    dispatcher: EmbeddedDispatcher, standin: SlackStandin, monkeypatch: pytest.MonkeyPatch,
    planted: Path,
) -> None:
    monkeypatch.setenv("MY_SECRET_TOKEN", SECRET)
    server: BotServer = start_bot(dispatcher, standin)
    try:
        literal = server.command(f"probe --sizes 4K --env MY_SECRET_TOKEN={SECRET}")
        planting = server.command(f"probe --env PYTHONPATH={planted.parent / 'planted'}")
        assert literal.status_code == 200 and planting.status_code == 200
        standin.wait_for(lambda calls: len(
            [c for c in calls if c.method == "chat.postEphemeral"]) == 2, timeout=60)
        assert server.command("probe --sizes 4K --iters 2 "
                              "--env MY_SECRET_TOKEN=${MY_SECRET_TOKEN}").status_code == 200

        def finished(calls: list[Any]) -> bool:
            return bool(summaries(calls)) and any(
                c.method == "files.completeUploadExternal" for c in calls)

        standin.wait_for(finished, timeout=60)
        time.sleep(0.5)  # the parent's last edit follows the upload
        calls = standin.recorded(status=None)
    finally:
        server.stop()
    refusals = [c.body["text"] for c in calls if c.method == "chat.postEphemeral"]
    assert any("--env MY_SECRET_TOKEN holds a literal secret" in t for t in refusals), refusals
    assert any("--env PYTHONPATH is never accepted" in t for t in refusals), refusals
    assert not planted.exists()
    (row,) = dispatcher.store.list_batches()  # only the probe with the reference
    assert row.state == "done" and row.report is not None
    t = thread_of(calls)
    assert "env MY_SECRET_TOKEN=${MY_SECRET_TOKEN}" in t["parent"].body["text"]
    (summary,) = summaries(calls)
    assert "MY_SECRET_TOKEN=${MY_SECRET_TOKEN}" in json.dumps(summary.body["blocks"])
    (upload,) = [c for c in calls if c.method == "upload"]
    assert json.loads(upload.raw)["env"] == {"MY_SECRET_TOKEN": "${MY_SECRET_TOKEN}"}
    assert not [c.method for c in calls if SECRET.encode() in c.raw]
    assert SECRET not in json.dumps(dataclasses.asdict(row), default=str)


# --------------------------------------------------------------------------- the worker


def test_the_worker_checks_a_queued_probes_env_again(
    tmp_path: Path, planted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A queued probe is a message anyone who can reach the broker may have written: the worker
    refuses a protected variable or a reference its environment lacks, no rank started."""
    monkeypatch.delenv("PROBE_MISSING", raising=False)
    store = Store(f"sqlite:///{tmp_path / 'w.db'}")
    sent: list[dict[str, Any]] = []

    class Sink:
        def emit(self, event: dict[str, Any]) -> None:
            sent.append(event)

    base = asked(sizes=(4096,), iters=1)
    for env, why in (
        ((("PYTHONPATH", str(planted.parent / "planted")),), "--env PYTHONPATH is never"),
        ((("NCCL_API_KEY", "${PROBE_MISSING}"),), "${PROBE_MISSING} is not set in the worker"),
    ):
        plan = probe_plan(dataclasses.replace(base, env=env), queue="default")
        row, _ = submit(plan, store=store, requested_by="U_ALICE")
        report = execute_probe(row, store=store, sink=Sink(), should_stop=lambda: False)
        assert report["state"] == "refused" and report["probe"] is None, report
        assert why in report["error"], report["error"]
        assert "batch.started" not in [e["type"] for e in sent if e["batch"] == row.id]
    assert not planted.exists()
