"""Small things a user meets in the text output (issue 21 item 6), through the real CLI: long
approach names keep the tables aligned, `compare` leaves out what neither batch ran and states
a shared knob change once, counts are singular or plural as they should be, and `presets`
lists sweeps."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from jobs.core.messages import render_text
from jobs.core.plans import load_preset, resolve
from jobs.store import Store
from tests.bot.test_cli import specbench
from tests.builders import standin_preset
from tests.conftest import REPO, make_record
from tests.standin.harness import make_standin

SEED = REPO / "docs" / "examples" / "seed-session.jsonl"
SIXTY = "a-sixty-character-approach-name-that-used-to-break-the-table"
HUGE = "x" * 100  # over the column's cap: a line of its own
MARKS = "●▲▼=?✗■·"
T0 = datetime(2026, 11, 30, 14, 0, tzinfo=UTC)


def table(text: str) -> list[str]:
    """The lines of the first text table: its header, its rule and its rows."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Approach  "))
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())
    return lines[start:end]


def column(header: str, name: str) -> int:
    at = header.index(name)
    assert header[at - 2:at] == "  "
    return at


# --------------------------------------------------------------------------- long names


def test_long_approach_names_keep_the_summary_columns_aligned(tmp_path: Path) -> None:
    assert len(SIXTY) == 60
    renamed = {"eagle3-nccl-tree": SIXTY, "eagle3-torch-symm-mem": HUGE}
    lines = []
    for line in SEED.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        record["approach"] = renamed.get(record["approach"], record["approach"])
        record["parent"] = renamed.get(record["parent"], record["parent"])
        lines.append(json.dumps(record))
    runs = tmp_path / "runs.jsonl"
    runs.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = specbench("analyze", str(runs))
    assert result.returncode == 0, result.stderr
    rows = table(result.stdout)
    at = column(rows[0], "Result")
    assert rows[1].startswith("-" * 60 + "  ") and rows[1][at - 2:at] == "  "
    names = {json.loads(line)["approach"] for line in lines}
    seen = []
    body = iter(rows[2:])
    for row in body:
        if row == HUGE:  # its row follows, with the columns where the others have them
            row = next(body)
            assert row[:at].strip() == "" and row[at] in MARKS, row
            seen.append(HUGE)
            continue
        name = row[:at].rstrip()
        if name:
            assert row[at] in MARKS, row
            seen.append(name)
        else:  # a continuation line: the Why column only
            assert row[at:].startswith(" " * 36), row
    assert sorted(seen) == sorted(names)


def test_long_names_keep_the_compare_columns_aligned() -> None:
    old, new, _ = _two_sweep_batches()
    result = specbench("compare", old, new)
    assert result.returncode == 0, result.stderr
    rows = [row for row in table(result.stdout) if not row.startswith("… ")]
    a, b = column(rows[0], f"A {old}"), column(rows[0], f"B {new}")
    assert max(len(row[:a].rstrip()) for row in rows[2:]) > 40  # the point names are long
    for row in rows[2:]:
        assert row[a - 2:a] == "  " and row[a] != " ", row
        assert row[b - 2:b] == "  " and row[b] != " ", row


# --------------------------------------------------------------------------- compare


def _two_sweep_batches() -> tuple[str, str, list[str]]:
    """Two stored cpu-demo batches (plans as `run` makes them), the newer with `--set
    threads=2`; each ran the baseline, the approaches and a few of the sweep's points.
    Returns their ids and the names of the points neither ran."""
    preset = load_preset("cpu-demo")
    assert preset.sweep is not None
    ran: set[str] = set()
    with Store() as store:
        for i, (batch, overrides) in enumerate([("b-old", {}), ("b-new", {"threads": 2})]):
            plan = resolve(preset, overrides=overrides)
            points = [p.approach for p in list(plan.points)[: 3 + i]]
            names = [c.approach for c in plan.configs] + points
            ran.update(points)
            store.create_batch(batch_id=batch, preset="cpu-demo", engine="local",
                               queue="default", requested_by="U1", plan=plan,
                               created_at=T0 + timedelta(hours=i))
            value = 100.0 + 50 * i
            records = [make_record(n, samples=(value, value + 1, value + 2), batch=batch,
                                   preset="cpu-demo", server_args=dict(plan.config(n).server_args))
                       for n in names]
            store.put_records(list(enumerate(records)))
            store.set_state(batch, "done")
        grid = [p.approach for p in resolve(preset).points]
    return "b-old", "b-new", [p for p in grid if p not in ran]


def test_compare_drops_rows_run_in_neither_batch_and_states_a_shared_change_once() -> None:
    old, new, neither = _two_sweep_batches()
    assert len(neither) >= 2
    text, data = [specbench("compare", old, new, *fmt) for fmt in ((), ("--format", "json"))]
    assert text.returncode == 0 and data.returncode == 0, text.stderr + data.stderr
    out = text.stdout
    assert not any(line.count("(not run)") == 2 for line in out.splitlines()), out
    assert not any(name in out for name in neither)
    assert f"\n… {len(neither)} planned approaches ran in neither batch (not shown)\n" in out
    # threads 1 → 2 on every configuration but prompt-lookup-3gram (which sets threads 2 itself)
    assert out.count("threads 1 → 2") == 1, out
    shared = "Every approach but prompt-lookup-3gram: threads 1 → 2 (an override)"
    lines = out.splitlines()
    assert lines.index(shared) < next(i for i, x in enumerate(lines) if x.startswith("Approach"))
    assert "Knobs: no change but the above" in lines
    compared = json.loads(data.stdout)
    assert compared["not_run"] == neither
    assert all(r["a"]["present"] or r["b"]["present"] for r in compared["approaches"])
    assert compared["common_knobs"] == [{"kind": "server_args", "knob": "threads", "a": 1,
                                         "b": 2, "except": ["prompt-lookup-3gram"],
                                         "override": True}]
    assert compared["knobs"] and all(k["common"] for k in compared["knobs"])


def test_a_change_of_one_approach_stays_on_its_own_line() -> None:
    """Only what most approaches share is lifted above the table."""
    preset = load_preset("cpu-demo")
    with Store() as store:
        for i, overrides in enumerate([{}, {"seed": 7}]):
            plan = resolve(preset, overrides=overrides)
            if i:  # one approach changed by hand as well
                configs = tuple(
                    c if c.approach != "prompt-lookup" else
                    dataclasses.replace(c, server_args={**c.server_args, "threads": 4})
                    for c in plan.configs)
                plan = dataclasses.replace(plan, configs=configs)
            batch = f"b-{i}"
            store.create_batch(batch_id=batch, preset="cpu-demo", engine="local",
                               queue="default", requested_by="U1", plan=plan,
                               created_at=T0 + timedelta(hours=i))
            store.put_records(list(enumerate(
                make_record(c.approach, batch=batch, preset="cpu-demo") for c in plan.configs)))
            store.set_state(batch, "done")
    result = specbench("compare", "b-0", "b-1")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "Every approach: seed 0 → 7 (an override)" in lines
    assert "Knobs: prompt-lookup threads 1 → 4" in lines
    assert result.stdout.count("seed 0 → 7") == 1


# --------------------------------------------------------------------------- counts


def standin(name: str, *, tag: str) -> str:
    """A stand-in batch whose one approach is `name`."""
    return standin_preset(
        "standin", description="a stand-in batch with a long approach name",
        env={"STANDIN_STARTUP_S": "0.1", "STANDIN_TAG": tag},
        approaches=[{"name": name, "hypothesis": "a faster stand-in",
                     "env": {"STANDIN_THROUGHPUT": "90"}}],
    )


@pytest.mark.timeout(90)
def test_a_real_run_of_one_rep_says_1_rep_and_keeps_its_table_aligned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, config_copy: Path
) -> None:
    setup = make_standin(tmp_path, monkeypatch)
    (config_copy / "presets" / "standin.yaml").write_text(
        standin(SIXTY, tag=setup.tag), encoding="utf-8")
    listed = specbench("presets")
    assert listed.returncode == 0, listed.stderr
    assert "min effect 2.0%, 1 rep; overridable" in listed.stdout
    # one repetition is no noise estimate: `?`; two decide: `▲`
    for args, reps, mark in ((["--reps", "1"], "1 rep each", "?"),
                             (["--reps", "2"], "2 reps each", "▲")):
        result = subprocess.run(  # the stand-in SGLang first on the path, as its servers need
            [sys.executable, "-m", "bot.cli.main", "run", "standin", *args], cwd=REPO,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([os.environ["PYTHONPATH"],
                                                              str(REPO)])},
            capture_output=True, text=True, timeout=60,
        )
        assert result.returncode == 0, result.stderr
        assert f"2 configurations, {reps} after a warm-up" in result.stderr
        assert "1 reps" not in result.stderr + result.stdout
        rows = table(result.stdout)
        at = column(rows[0], "Result")
        assert rows[3].startswith(SIXTY + "  ") and rows[3][at] == mark, rows
    setup.assert_clean()


def test_the_thread_parent_and_a_sweep_line_count_in_the_singular() -> None:
    parent = render_text("batch_parent", report=None, ended=None, preset="p", batch="b-1",
                         who="U1", approaches=1, reps=1, host=None, position=1,
                         queue="default", live_workers=1, warnings=[], error=None)
    assert "1 configuration, 1 rep each" in parent
    many = render_text("batch_parent", report=None, ended=None, preset="p", batch="b-1",
                       who="U1", approaches=3, reps=2, host=None, position=1,
                       queue="default", live_workers=1, warnings=[], error=None)
    assert "3 configurations, 2 reps each" in many


# --------------------------------------------------------------------------- presets


def test_presets_lists_sweeps_with_their_size(config_copy: Path) -> None:
    (config_copy / "presets" / "tiny-grid.yaml").write_text(
        (config_copy / "presets" / "cpu-demo.yaml").read_text(encoding="utf-8")
        .replace("name: cpu-demo", "name: tiny-grid")
        .replace("prompt-lookup-num-tokens: [2, 4, 6, 10, 16, 24]", "prompt-lookup-num-tokens: [2]")
        .replace("max-matching-ngram-size: [1, 2, 3]", "max-matching-ngram-size: [1]")
        .replace("search: adaptive", "search: grid").replace("  budget: 5\n", "")
        .replace("confirm_reps: 3", "confirm_reps: 1"), encoding="utf-8")
    result = specbench("presets")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for name in ("cpu-demo", "eagle3-tune"):
        preset = load_preset(name)
        assert preset.sweep is not None
        sweep = preset.sweep
        assert f"\n{name} ({preset.engine}, sweep): " in out
        line = next(x for x in out.splitlines() if x.startswith(f"  - sweep {sweep.name} "))
        assert f"(extends {sweep.extends}): {sweep.size:,} points over " in line
        assert ", ".join(sweep.grid) in line
        assert f"at most {sweep.budget} servers" in line
        assert f"confirmed with {sweep.confirm_reps} reps each" in line
    assert "\neagle3 (sglang): " in out  # no sweep, not called one
    tiny = next(x for x in out.splitlines() if x.startswith("  - sweep lookup (extends")
                and "1 point " in x)
    assert "grid search, every point" in tiny and "confirmed with 1 rep each" in tiny
