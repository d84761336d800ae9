"""Typed knob values on every surface through the command layer: chat in distributed mode (the
bot's host has no SGLang, the type table ships), retry, and the console (issue 14, item 3)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.commands import retry, run
from jobs.commands.context import Caller, Context
from jobs.core.plans import BatchPlan, parse_sets
from jobs.errors import KnobError, PresetError
from jobs.store import TERMINAL_STATES, Store
from tests.bot.conftest import FakeEngine

TINY = """\
name: tiny
description: One approach on the local engine
engine: local
metric: output_throughput
reps: 1
timeouts: {startup_s: 10, bench_s: 10}
bench: {num-prompts: 1}
overridable: [threads, seed]
baseline:
  server_args: {seed: 0, threads: 1}
approaches:
  - name: lookup
    hypothesis: Prompt lookup
    server_args: {prompt-lookup-num-tokens: 4}
"""


class NoSubmit:
    """A distributed dispatcher that must not be reached with a bad value."""

    mode = "distributed"

    def __init__(self) -> None:
        self.submitted: list[BatchPlan] = []

    def submit(self, plan: BatchPlan, **_: Any) -> Any:
        self.submitted.append(plan)
        raise RuntimeError("stored")  # far enough: the check passed


@pytest.fixture
def tiny(config_copy: Path) -> Path:
    (config_copy / "presets" / "tiny.yaml").write_text(TINY)
    return config_copy


def test_chat_in_distributed_mode_checks_the_types_before_submitting(tiny: Path) -> None:
    dispatcher = NoSubmit()
    ctx = Context(store=Store("sqlite://"), caller=Caller(user="U_ALICE", surface="slack"),
                  make_dispatcher=lambda: dispatcher,
                  engine_for=lambda name: pytest.fail("no engine on the bot's host"))
    for value in ("threads=abc", "seed=", "threads=0"):
        with pytest.raises(KnobError, match=f"^--set {value}: "):
            run.run(ctx, run.RunArgs(preset="tiny", sets=parse_sets([value])))
    with pytest.raises(KnobError, match="mem-fraction-static takes a number .SGLang., got 'x'"):
        run.run(ctx, run.RunArgs(preset="eagle3", sets=parse_sets(["mem-fraction-static=x"])))
    assert dispatcher.submitted == []
    with pytest.raises(RuntimeError, match="stored"):
        run.run(ctx, run.RunArgs(preset="eagle3", sets=parse_sets(["mem-fraction-static=0.8"])))
    assert len(dispatcher.submitted) == 1


@pytest.fixture
def embedded(tiny: Path) -> Iterator[Context]:
    d = EmbeddedDispatcher(Store(), engine_factory=lambda name: FakeEngine())
    yield Context(store=d.store, caller=Caller(user="U_ALICE", surface="cli"),
                  make_dispatcher=lambda: d, engine_for=lambda name: FakeEngine())
    d.close()


def test_retry_checks_its_new_values_and_stores_nothing(embedded: Context) -> None:
    started = run.run(embedded, run.RunArgs(preset="tiny", sets=parse_sets(["threads=2"])))
    deadline = time.monotonic() + 60
    while (row := embedded.store.get_batch(started.submitted.batch.id)) is None \
            or row.state not in TERMINAL_STATES:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    before = [r.id for r in embedded.store.list_batches()]
    for value in ("threads=abc", "seed=2.5"):
        with pytest.raises(KnobError, match=f"^--set {value}: "):
            retry.retry(embedded, retry.RetryArgs(batch=row.id, approaches=["lookup"],
                                                  sets=parse_sets([value])))
    assert [r.id for r in embedded.store.list_batches()] == before


def test_a_preset_in_the_config_folder_with_a_bad_value_is_refused_by_name(tiny: Path) -> None:
    (tiny / "presets" / "tiny.yaml").write_text(TINY.replace("threads: 1", "threads: one"))
    ctx = Context(store=Store("sqlite://"), caller=Caller(user="U_ALICE", surface="slack"),
                  make_dispatcher=NoSubmit)
    with pytest.raises(PresetError, match="^preset 'tiny', baseline: threads takes an integer"):
        run.run(ctx, run.RunArgs(preset="tiny"))


def test_the_console_refuses_a_bad_value_with_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECBENCH_")}
    env["SPECBENCH_DATA_DIR"] = str(tmp_path / "data")
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "console", "-c", "run cpu-demo --set seed=abc"],
        env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "--set seed=abc: seed takes an integer (local engine), got 'abc'" in done.stderr
    database = tmp_path / "data" / "specbench.db"
    assert not database.exists() or Store(f"sqlite:///{database}").list_batches() == []
