"""Progress shows the warm-up (not a sample) and every repetition's value with its unit, on
the command line and in the chat thread alike, from the events a real batch emits."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bot.cli.progress import ProgressBar
from bot.thread.progress_message import ProgressMessage
from jobs.batches.dispatch import EmbeddedDispatcher
from jobs.batches.planning import plan_batch
from jobs.core.events import Event, make_event
from jobs.core.progress import outcome_text, phase_text
from jobs.store import Store
from tests.jobs.test_distributed import pipeline_preset
from tests.jobs.test_embedded import ended, until
from tests.standin.harness import Standin, make_standin


def phase(phase: str, **fields: object) -> Event:
    return make_event("approach.phase", "b-1", approach="baseline", index=1, of=3, phase=phase,
                      **fields)


def test_phases_say_warm_up_and_repetitions_with_units() -> None:
    assert phase_text(phase("warmup", reps=3)) == "warm-up (not a sample)"
    warm = phase("result", rep=0, reps=3, metric="output_throughput", value=459.0, warmup=True)
    assert phase_text(warm) == "warm-up 459 tok/s (not a sample)"
    assert phase_text(phase("repetition", rep=1, reps=3)) == "rep 1/3"
    rep = phase("result", rep=1, reps=3, metric="output_throughput", value=879.4)
    assert phase_text(rep) == "rep 1/3: 879.4 tok/s"
    ttft = phase("result", rep=2, reps=3, metric="median_ttft_ms", value=12.5)
    assert phase_text(ttft) == "rep 2/3: 12.5 ms"
    lost = phase("result", rep=3, reps=3, metric="output_throughput", value=None,
                 why="completed 1 of 2")
    assert phase_text(lost) == "rep 3/3: no sample (completed 1 of 2)"
    done = make_event("approach.finished", "b-1", approach="lookup", index=2, of=3,
                      status="ok", verdict="improved", value=951.2, delta_pct=9.1, cause=None,
                      why="", metric="output_throughput")
    assert outcome_text(done) == "improved 951.2 tok/s (+9.1%)"


def test_the_chat_row_keeps_the_warm_up_and_the_values_so_far() -> None:
    progress = ProgressMessage.of("b-1", ["baseline"])
    for event in (
        phase("warmup", reps=3),
        phase("result", rep=0, reps=3, metric="output_throughput", value=459.0, warmup=True),
        phase("repetition", rep=1, reps=3),
        phase("result", rep=1, reps=3, metric="output_throughput", value=879.0),
        phase("repetition", rep=2, reps=3),
    ):
        assert progress.apply(event)
    text = progress.render().text
    assert "baseline: rep 2/3 · warm-up 459 tok/s (not a sample) · reps: 879 tok/s" in text


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config_copy: Path) -> Standin:
    setup = make_standin(tmp_path, monkeypatch)
    (config_copy / "presets" / "standin.yaml").write_text(
        pipeline_preset("standin", reps=2, tag=setup.tag, second_startup="0.2"))
    return setup


@pytest.mark.timeout(90)
def test_a_real_batch_shows_its_warm_ups_and_units(tmp_path: Path, standin: Standin) -> None:
    dispatcher = EmbeddedDispatcher(Store(f"sqlite:///{tmp_path / 'db.sqlite'}"))
    try:
        sub = dispatcher.subscribe()
        batch = dispatcher.submit(plan_batch("standin"), requested_by="U1").batch.id
        events = until(sub, ended(batch), timeout=60)
        records = dispatcher.store.records(batch)
    finally:
        dispatcher.close()
    stream = io.StringIO()
    bar = ProgressBar(stream)
    chat = ProgressMessage.of(batch, ["baseline", "second", "third", "baseline (last)"])
    for event in events:
        bar.on_event(event)
        chat.apply(event)
    lines = [line.split("] ", 1)[1] for line in stream.getvalue().splitlines()]
    # three configurations and the baseline again last (docs/contracts.md "Noise, measured")
    assert "4 configurations, 2 reps each after a warm-up" in lines[0]
    # The stand-in serves STANDIN_THROUGHPUT tok/s: 82 by default, 90 for `second`.
    assert "1/4 baseline: warm-up (not a sample)" in lines
    assert "1/4 baseline: warm-up 82 tok/s (not a sample)" in lines
    assert "1/4 baseline: rep 1/2: 82 tok/s" in lines
    assert "2/4 second: rep 2/2: 90 tok/s" in lines
    assert "2/4 second: improved 90 tok/s (+9.8%)" in lines
    assert "4/4 baseline (last): rep 2/2: 82 tok/s" in lines
    assert all(r.warmup is not None and len(r.samples("output_throughput")) == 2
               for r in records)
    assert "✓ baseline: ok 82 tok/s" in chat.render(final="done").text
    standin.assert_clean()
