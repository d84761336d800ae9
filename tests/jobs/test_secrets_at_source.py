"""Secrets are masked at the source (issue 10, item 5): the worker stores run records and writes
server logs masked, by name (docs/contracts.md), with its own environment and what the
configurations' `${NAME}` references resolve to there, so that no process that shows them later
(Slack's upload, "Show logs", `specbench show`) needs to know the secret to hide it. A
configuration's secret is a reference (issue 19, item 4): the database holds no secret at all.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.batches.execution import execute_batch
from jobs.batches.planning import submit
from jobs.core.events import LocalChannel
from jobs.core.records import RunRecord
from jobs.engines.base import mask_record
from jobs.engines.procs import ProcessGroup
from jobs.engines.sglang.engine import SGLangEngine
from jobs.store import Store
from tests.standin.harness import Standin, make_standin

REPO = Path(__file__).resolve().parents[2]
WORKER_TOKEN = "hf_worker-only-7c1e9a5b3d"  # set only in the worker's environment
WORKER_SETTING = "sb-worker-setting-44e1f0"  # a SPECBENCH_* variable with a secret-like name
CONFIG_KEY = "cfg-api-key-2b8d6f0a"  # the worker's MY_API_KEY: a configuration's ${MY_API_KEY}
SECRETS = (WORKER_TOKEN, WORKER_SETTING, CONFIG_KEY)
PRINTED = "HF_TOKEN,SPECBENCH_UPLOAD_PASSWORD,MY_API_KEY"


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Standin:
    setup = make_standin(tmp_path, monkeypatch)
    monkeypatch.setenv("HF_TOKEN", WORKER_TOKEN)
    monkeypatch.setenv("SPECBENCH_UPLOAD_PASSWORD", WORKER_SETTING)
    monkeypatch.setenv("MY_API_KEY", CONFIG_KEY)
    return setup


def _found(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


@pytest.mark.timeout(120)
def test_records_logs_and_the_database_never_hold_a_secret(
    standin: Standin, tmp_path: Path
) -> None:
    env = {"STANDIN_PRINT_ENV": PRINTED, "MY_API_KEY": "${MY_API_KEY}"}
    plan = standin.plan(
        standin.config("baseline", role="baseline", env=env),
        standin.config("crash", "crash", env={**env, "STANDIN_STARTUP_S": "0.1"}),
        startup_s=10.0,
    )
    database = tmp_path / "store.db"
    store = Store(f"sqlite:///{database}")
    row, _ = submit(plan, store=store, requested_by="tester")
    execute_batch(row.id, store=store, sink=LocalChannel(), engine=SGLangEngine())
    standin.assert_clean()

    records = store.records(row.id)
    assert [(r.approach, r.status) for r in records] == [("baseline", "ok"), ("crash", "failed")]
    for record in records:
        assert "environment: HF_TOKEN=***" in record.log_tail, record.log_tail
        assert "environment: MY_API_KEY=***" in record.log_tail
        assert record.env["MY_API_KEY"] == "${MY_API_KEY}"  # the reference, never the value
        assert _found(record.to_json()) == []

    # The database: no secret anywhere, the batch's plan included (it keeps the reference).
    with sqlite3.connect(database) as connection:
        dump = "\n".join(connection.iterdump())
    assert _found(dump) == [] and "${MY_API_KEY}" in dump

    # The server logs on disk, the server's and bench_serving's.
    logs = sorted((tmp_path / "data" / "logs").rglob("*.log"))
    assert logs
    for path in logs:
        assert _found(path.read_text()) == [], path
    assert "environment: HF_TOKEN=***" in (tmp_path / "data" / "logs" / row.id
                                           / "baseline.log").read_text()

    # `specbench show --format jsonl` in a process that does not know any of the secrets.
    clean = {k: v for k, v in os.environ.items()
             if k not in ("HF_TOKEN", "SPECBENCH_UPLOAD_PASSWORD", "MY_API_KEY")}
    clean["SPECBENCH_DATABASE_URL"] = f"sqlite:///{database}"
    shown = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "show", row.id, "--format", "jsonl"],
        env=clean, cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert "environment: HF_TOKEN=***" in shown.stdout
    assert _found(shown.stdout + shown.stderr) == []


def test_a_process_groups_log_and_tail_are_masked(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    seen: list[str] = []
    code = "import os; print('token', os.environ['HF_TOKEN'], 'and', os.environ['PLAIN'])"
    env = {**os.environ, "HF_TOKEN": WORKER_TOKEN, "PLAIN": "visible-value"}
    group = ProcessGroup([sys.executable, "-c", code], env=env, log_path=log,
                         on_line=seen.append)
    group.proc.wait(timeout=30)
    group.stop(grace_s=1.0)
    assert log.read_text() == "token *** and visible-value\n"
    assert group.tail_text() == "token *** and visible-value"
    assert seen == ["token *** and visible-value"]


def test_mask_record_masks_env_by_name_and_values_everywhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = RunRecord(
        batch="b-1", preset="p", approach="a", role="approach", status="failed",
        change={"server_args": {}, "env": {"MY_API_KEY": CONFIG_KEY, "NCCL_ALGO": "Tree"}},
        server_args={"api-key": CONFIG_KEY, "tp-size": 8},
        env={"MY_API_KEY": CONFIG_KEY, "NCCL_ALGO": "Tree"},
        log_tail=f"launch --api-key {CONFIG_KEY} with {WORKER_TOKEN}",
        extra={"fallbacks": [f"line with {WORKER_TOKEN}"]},
    )
    masked = mask_record(record, secrets=(CONFIG_KEY, WORKER_TOKEN))
    assert masked.env == {"MY_API_KEY": "***", "NCCL_ALGO": "Tree"}
    assert masked.change["env"] == {"MY_API_KEY": "***", "NCCL_ALGO": "Tree"}
    assert masked.server_args == {"api-key": "***", "tp-size": 8}
    assert masked.log_tail == "launch --api-key *** with ***"
    assert masked.extra == {"fallbacks": ["line with ***"]}
    assert mask_record(masked, secrets=(CONFIG_KEY, WORKER_TOKEN)) == masked
