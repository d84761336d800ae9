"""A sweep in chat: progress says "point K of at most N", the summary leads with the
confirmation's verdict (docs/contracts.md "Sweeps and search")."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from bot.thread.progress_message import ProgressMessage
from jobs.core.events import make_event
from tests.bot.test_console import REPO, console
from tests.standin.harness import SERVER_ARGS, TINY_BENCH

PRESET = {
    "name": "standin-sweep", "description": "A sweep over the stand-in's throughput",
    "engine": "sglang", "metric": "output_throughput", "min_effect_pct": 2.0, "reps": 1,
    "timeouts": {"startup_s": 20, "bench_s": 20}, "bench": TINY_BENCH,
    "baseline": {"server_args": SERVER_ARGS,
                 "env": {"STANDIN_THROUGHPUT": "82.0", "STANDIN_STARTUP_S": "0.1"}},
    "approaches": [],
    "sweep": {"name": "tp", "grid": {"STANDIN_THROUGHPUT": [70, 95, 82.0]}, "search": "grid",
              "confirm_reps": 2},
}


def test_progress_rows_for_points_as_they_run() -> None:
    progress = ProgressMessage.of("b-1", ["baseline"])
    sweep = {"name": "tp", "search": "adaptive", "points": 40, "max_servers": 12}
    progress.apply(make_event("batch.started", "b-1", approaches=["baseline"], sweep=sweep))
    assert "point" not in progress.render().text
    progress.apply(make_event("approach.phase", "b-1", approach="tp@a=1", index=2, of=13,
                              phase="launching"))
    progress.apply(make_event("approach.finished", "b-1", approach="tp@a=1", index=2, of=13,
                              status="ok", verdict="improved", value=90.0, delta_pct=9.8))
    progress.apply(make_event("approach.phase", "b-1", approach="tp@a=2", index=3, of=13,
                              phase="ready"))
    text = progress.render().text
    assert "Sweep tp (adaptive): point 2 of at most 12" in text
    assert "tp@a=1: improved 90 (+9.8%)" in text and "tp@a=2: ready" in text
    assert not progress.apply(make_event("approach.phase", "b-1", approach="other", index=4,
                                         of=13, phase="ready"))  # not a point: no row


def test_a_sweep_from_the_console_shows_points_and_leads_with_the_confirmation(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config"
    shutil.copytree(REPO / "config", config)
    (config / "presets" / "standin-sweep.yaml").write_text(yaml.safe_dump(PRESET))
    done = console(tmp_path, "run standin-sweep")
    assert done.returncode == 0, done.stderr
    thread = [line for line in done.stdout.splitlines() if line.startswith("  │ ")]
    assert any("Sweep tp (grid): point 2 of 2" in line for line in thread), done.stdout
    summary = next(i for i, line in enumerate(thread) if "Sweep tp (grid, 2 of 3 points" in line)
    assert "confirmed: " in thread[summary] and "tp@STANDIN_THROUGHPUT=95" in thread[summary]
    assert any("Make tp@STANDIN_THROUGHPUT=95 the new baseline (STANDIN_THROUGHPUT=95)" in line
               for line in thread)
