"""`specbench watch add|list|show|pause|resume|stop|run|ack|dismiss` (docs/contracts.md "Regression
watch"): the JSON shapes of `watch list` and `watch show`, `watch run` waiting for its batch and
its confirmation as `run` does, the series chart, the digest's section, and bad input (exit 2,
one line on stderr, nothing stored). Embedded, on the stand-in SGLang."""

from __future__ import annotations

import datetime as dt
import json
import socket
from pathlib import Path

import pytest

from bot.cli.main import main
from jobs.core.watch import SeriesKey, SeriesPoint, point_stack
from jobs.store import Store
from tests.jobs.test_watch_history import PRESET
from tests.standin.harness import make_standin


@pytest.fixture
def nightly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config_copy: Path) -> Path:
    make_standin(tmp_path, monkeypatch)
    model = tmp_path / "model"
    model.mkdir()
    (model / "revision").write_text("4f1c2e9\n")
    (config_copy / "presets" / "nightly.yaml").write_text(
        PRESET.replace("queue: nightly", "queue: default")
        .replace("/models/tiny-llama", str(model)))
    monkeypatch.setenv("USER", "tester")
    monkeypatch.setenv("STANDIN_THROUGHPUT", "100")
    return config_copy


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_watch_list_and_show_print_the_contracts_json(
    nightly: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(capsys, "watch", "add", "nightly")[0] == 0
    code, out, _ = run(capsys, "watch", "add", "nightly", "--every", "weekly", "--at", "5:30",
                       "--queue", "h200")
    assert code == 0 and out.startswith("Watch 2 added: nightly weekly at 05:30 UTC on queue "
                                        "h200; first run ")
    assert "It has no chat thread (added outside Slack)" in out
    assert run(capsys, "watch", "pause", "2")[1] == "watch 2 (nightly) is paused\n"
    code, out, _ = run(capsys, "watch", "list", "--format", "json")
    assert json.loads(out) == [
        {"id": 1, "preset": "nightly", "every": "daily", "at": "02:00", "queue": "default",
         "state": "active"},
        {"id": 2, "preset": "nightly", "every": "weekly", "at": "05:30", "queue": "h200",
         "state": "paused"}]
    code, _, err = run(capsys, "watch", "show", "1", "--chart", "empty.png")
    assert code == 2 and err == "specbench watch: error: no chart: watch 1 has no point yet\n"
    shown = json.loads(run(capsys, "watch", "show", "1", "--format", "json")[1])
    assert {k: shown[k] for k in ("id", "preset", "every", "at", "queue", "state", "owner",
                                  "series", "changes", "precision")} == {
        "id": 1, "preset": "nightly", "every": "daily", "at": "02:00", "queue": "default",
        "state": "active", "owner": "tester", "series": [], "changes": [], "precision": []}


@pytest.mark.timeout(180)
def test_watch_run_waits_for_its_confirmation_and_show_has_the_series_changes_and_chart(
    nightly: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path,
) -> None:
    assert run(capsys, "watch", "add", "nightly")[0] == 0
    store = Store()
    from jobs.engines import get_engine

    stack = point_stack(get_engine("sglang").fingerprint(), engine="sglang",  # this host's
                        host=socket.gethostname(), model_revision="4f1c2e9")
    start = dt.datetime(2026, 11, 1, 2, 0, tzinfo=dt.UTC)
    store.put_points(1, [SeriesPoint(key=SeriesKey("baseline", "output_throughput"),
                                     batch=f"b-old{i}", at=start + dt.timedelta(days=i),
                                     value=112.0 + (i % 3), low=111.0, high=115.0, stack=stack)
                         for i in range(15)])
    code, out, err = run(capsys, "watch", "run", "1", "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["watch"] == 1
    [change] = [c for c in report["watch_changes"] if c["approach"] == "baseline"]
    assert change["state"] == "confirmed" and change["delta_pct"] < -10
    assert "confirmation" in err  # its confirmation ran before the wait ended, on stderr
    confirmation = store.get_batch(change["confirmation"])
    assert confirmation is not None and confirmation.state == "done"
    assert confirmation.plan.confirms == report["batch"] and confirmation.plan.watch == 1

    chart = tmp_path / "series.png"
    code, out, err = run(capsys, "watch", "show", "1", "--format", "json", "--chart", str(chart))
    assert code == 0 and chart.read_bytes()[:4] == b"\x89PNG" and "chart written to" in err
    shown = json.loads(out)
    [base] = [s for s in shown["series"] if s["approach"] == "baseline"]
    assert (base["key"], base["load"], len(base["points"])) == ("output_throughput", None, 16)
    newest = base["points"][-1]
    assert set(newest) == {"batch", "at", "value", "low", "high", "stack"}
    assert newest["batch"] == report["batch"] and newest["value"] == 100.0
    assert newest["stack"]["model_revision"] == "4f1c2e9"
    assert newest["stack"]["host"] == socket.gethostname()
    [listed] = [c for c in shown["changes"] if c["approach"] == "baseline"]
    assert {"id", "approach", "key", "load", "batch", "confirmation", "state", "before",
            "after", "delta_pct", "stack_diff", "environment"} <= set(listed)
    assert listed["before"]["batches"] == 15 and listed["after"]["value"] == 100.0
    assert listed["stack_diff"] == [] and listed["environment"] is False

    code, out, _ = run(capsys, "watch", "dismiss", str(listed["id"]))
    assert out == f"change {listed['id']} of watch 1 dismissed (not a regression) by tester\n"
    code, out, _ = run(capsys, "watch", "ack", str(listed["id"]))
    assert code == 0 and out.startswith(f"change {listed['id']} of watch 1 was already "
                                        "dismissed (not a regression) by tester at ")
    digest = json.loads(run(capsys, "digest", "--format", "json")[1])["watches"]
    [alert] = [a for a in digest["alerts"] if a["approach"] == "baseline"]
    assert (alert["watch"], alert["change"], alert["state"]) == (1, listed["id"], "dismissed")
    assert {"watch": 1, "preset": "nightly", "approach": "baseline", "key": "output_throughput",
            "load": None, "confirmed": 1, "dismissed": 1, "blips": 0,
            "precision": 0.0} in digest["precision"]
    code, text, _ = run(capsys, "digest")
    assert f"watch 1 (nightly), change {listed['id']}: output_throughput of baseline" in text
    blocks = json.loads(run(capsys, "digest", "--format", "slack")[1])["blocks"]
    assert any("*Regression watches*: 1 confirmed, 0 not confirmed" in json.dumps(b)
               for b in blocks)


@pytest.mark.parametrize(("args", "says"), [
    (["watch", "add", "nope"], "unknown preset 'nope'"),
    (["watch", "add", "nightly", "--at", "7pm"], "--at '7pm': not a time of day"),
    (["watch", "add", "nightly", "--every", "15m"], "a watch runs at most hourly"),
    (["watch", "add", "nightly", "--set", "x=1"], "unknown knob 'x'"),
    (["watch", "show", "5"], "unknown watch '5'"),
    (["watch", "run", "5"], "unknown watch '5'"),
    (["watch", "stop", "abc"], "unknown watch 'abc'"),
    (["watch", "ack", "3"], "unknown change '3'"),
    (["watch", "show", "1", "--chart", "x.jpg"], "--chart writes a PNG"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_stored(
    nightly: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str,
) -> None:
    code, out, err = run(capsys, *args)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("specbench watch: error: ") and says in err
    assert Store().list_watches() == [] and Store().list_batches() == []


def test_a_watch_of_a_sweep_beyond_max_points_is_refused(
    nightly: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SPECBENCH_MAX_POINTS", "2")
    code, _, err = run(capsys, "watch", "add", "cpu-demo")
    assert code == 2 and "(SPECBENCH_MAX_POINTS)" in err and err.count("\n") == 1
    assert Store().list_watches() == []
