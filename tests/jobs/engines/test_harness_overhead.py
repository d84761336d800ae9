"""What a batch spends outside its servers (issue 19, `bench_engines`' harness overhead): the
SGLang version is asked once per batch, by its preflight, not again before every server; a real
stand-in batch through `execute_batch`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jobs.batches.execution import execute_batch
from jobs.batches.planning import submit
from jobs.core.events import NullSink
from jobs.engines import probe as engine_probe
from jobs.engines.sglang.engine import SGLangEngine
from jobs.store import Store
from tests.standin.harness import make_standin


def test_a_batch_asks_its_sglang_version_once(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    standin = make_standin(tmp_path, monkeypatch)
    asked: list[str] = []
    probe = engine_probe._probe_version

    def counted(which: Any, python: str, *, env: Any = None) -> Any:  # the real probe (it
        asked.append(python)                                          # imports the stand-in)
        return probe(which, python, env=env)

    monkeypatch.setattr(engine_probe, "_probe_version", counted)
    plan = standin.plan(standin.config("baseline", role="baseline"),
                        standin.config("a", env={"STANDIN_THROUGHPUT": "90"}),
                        standin.config("b", env={"STANDIN_THROUGHPUT": "70"}))
    with Store(f"sqlite:///{tmp_path}/specbench.db") as store:
        row, _ = submit(plan, store=store, requested_by="test")
        report = execute_batch(row.id, store=store, sink=NullSink(), engine=SGLangEngine())
        records = store.records(row.id)
    assert [r.status for r in records] == ["ok", "ok", "ok"]
    assert report["state"] == "done"
    assert len(asked) == 1  # the stand-in has no metadata: every asking imports it again
    standin.assert_clean()


def test_a_run_without_preflight_still_asks(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    standin = make_standin(tmp_path, monkeypatch)
    asked: list[str] = []
    probe = engine_probe._probe_version
    monkeypatch.setattr(engine_probe, "_probe_version",
                        lambda which, python, env=None: asked.append(python)
                        or probe(which, python, env=env))
    config = standin.config("baseline", role="baseline")
    record = SGLangEngine().run(config, standin.ctx(standin.plan(config), "baseline"))
    assert record.status == "ok" and len(asked) == 1
