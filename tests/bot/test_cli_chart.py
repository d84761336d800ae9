"""`specbench show --chart FILE.png` and `specbench digest --chart FILE.png`: the chart written
and the report printed as usual; a path it cannot write, a name that is no PNG's or a batch with
nothing measured is exit 2 with one line, and no file. Each command runs through the console
script's entry in this process (tests/builders.py `specbench_here`): what is held is the chart and
the refusals, not a process start."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.core.advice import analyze, load_remedies
from jobs.core.records import RunRecord
from jobs.core.rules import load_rules
from jobs.core.verdicts import Metric
from jobs.store import Store
from tests.bot.test_cli import refused
from tests.builders import specbench_here
from tests.conftest import make_plan, make_record

PNG = b"\x89PNG\r\n\x1a\n"


def stored(records: list[RunRecord], *, batch_id: str = "b-test") -> None:
    """A finished batch of `records` with its report, as a worker leaves it."""
    report = analyze(records, metric=Metric(), rules=load_rules(), remedies=load_remedies())
    with Store() as store:
        store.create_batch(batch_id=batch_id, preset="eagle3", engine="local", queue="default",
                           requested_by="u", plan=make_plan())
        store.put_records([(i, r) for i, r in enumerate(records)])
        store.end(batch_id, "done", report=report)


def measured() -> list[RunRecord]:
    return [make_record("baseline", samples=[80.0, 81.0, 82.0]),
            make_record("eagle3", samples=[90.0, 91.0, 92.0]),
            make_record("oom", samples=[], status="failed", log_tail="CUDA out of memory\n")]


def test_show_writes_the_chart_and_prints_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stored(measured())
    chart, latest = tmp_path / "batch.png", tmp_path / "latest.PNG"
    by_id = specbench_here(capsys, "show", "b-test", "--chart", str(chart))
    by_default = specbench_here(capsys, "show", "--chart", str(latest), "--format", "jsonl")
    assert by_id.returncode == 0, by_id.stderr
    assert chart.read_bytes().startswith(PNG)
    assert by_id.stderr.strip() == f"chart written to {chart}"
    assert "eagle3" in by_id.stdout and "tok/s" in by_id.stdout  # the report, as usual
    assert by_default.returncode == 0, by_default.stderr
    assert latest.read_bytes().startswith(PNG)
    assert by_default.stdout.count("\n") == 3  # the run records, one a line


def test_show_chart_refuses_what_it_cannot_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stored(measured())
    missing = tmp_path / "no-such-folder" / "batch.png"
    folder = tmp_path / "a-folder.png"
    folder.mkdir()
    not_png, no_folder, a_folder = [
        specbench_here(capsys, "show", "--chart", str(path))
        for path in (tmp_path / "batch.svg", missing, folder)]
    refused(not_png, "must end in .png")
    refused(no_folder, "cannot write the chart to", str(missing))
    refused(a_folder, "cannot write the chart to")
    assert not missing.parent.exists() and not (tmp_path / "batch.svg").exists()


def test_show_chart_of_a_batch_with_nothing_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stored([make_record("baseline", samples=[], status="failed", log_tail="boom\n"),
            make_record("eagle3", samples=[], status="failed", log_tail="boom\n")])
    chart = tmp_path / "batch.png"
    refused(specbench_here(capsys, "show", "--chart", str(chart)), "no chart: nothing was measured")
    assert not chart.exists()


def test_digest_writes_its_trend_chart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = tmp_path / "trend.png"
    empty = specbench_here(capsys, "digest", "--chart", str(chart))
    refused(empty, "no chart: nothing was measured in the last 7 days")
    assert not chart.exists()
    stored(measured())
    result = specbench_here(capsys, "digest", "--chart", str(chart))
    nowhere = specbench_here(capsys, "digest", "--chart", str(tmp_path / "nope" / "trend.png"))
    assert result.returncode == 0, result.stderr
    assert chart.read_bytes().startswith(PNG)
    assert result.stderr.strip() == f"chart written to {chart}"
    assert result.stdout.strip()  # the digest itself, as usual
    refused(nowhere, "cannot write the chart to")
