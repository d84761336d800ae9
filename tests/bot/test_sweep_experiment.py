"""A sweep and its confirmation are one experiment (docs/contracts.md), through the real CLI and
console on the SGLang stand-in: the CLI prints the confirmation's progress, `show` without BATCH is
the sweep with its confirmation folded in, the confirmation names its sweep, `compare`'s defaults,
`history` and the digest count the experiment once; and a sweep that extends a better approach says
that it found nothing better than where it started.

The sweeps and the chat thread's run through the real `python -m bot.cli.main`, each in a process of
its own; what only reads the store (`show`, `compare`, the console's `history`, `digest`) runs
`bot.cli.main.main` in this process with the environment the command would have had (`here`,
tests/builders.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import specbench_here_as
from tests.standin.harness import SERVER_ARGS, STANDIN, TINY_BENCH

REPO = Path(__file__).resolve().parents[2]
NOTHING_BETTER = "found nothing better than the approach it started from"
PRESET = {
    "name": "standin-parent", "description": "A sweep that starts from a better approach",
    "engine": "sglang", "metric": "output_throughput", "min_effect_pct": 2.0, "reps": 2,
    "warmup": False, "timeouts": {"startup_s": 20, "bench_s": 20}, "bench": TINY_BENCH,
    "baseline": {"server_args": SERVER_ARGS,
                 "env": {"STANDIN_THROUGHPUT": "82.0", "STANDIN_STARTUP_S": "0.1"}},
    "approaches": [{"name": "fast", "hypothesis": "A fast parent",
                    "env": {"STANDIN_THROUGHPUT": "150"}}],
    "sweep": {"name": "tp", "extends": "fast", "grid": {"STANDIN_THROUGHPUT": [90, 110]},
              "search": "grid", "confirm_reps": 2},
}
WINNER = "tp@STANDIN_THROUGHPUT=110"


def specbench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real `specbench` with the stand-in SGLang and a config dir holding PRESET."""
    return subprocess.run([sys.executable, "-m", "bot.cli.main", *args], capture_output=True,
                          text=True, timeout=120, env=environment(tmp_path), cwd=REPO)


def environment(tmp_path: Path) -> dict[str, str]:
    """A `specbench` command's environment: the stand-in SGLang, the data dir under tmp_path and
    a config dir there holding PRESET (written on first use)."""
    config = tmp_path / "config"
    if not config.exists():
        shutil.copytree(REPO / "config", config)
        (config / "presets" / "standin-parent.yaml").write_text(yaml.safe_dump(PRESET))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STANDIN_", "SPECBENCH_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(STANDIN), str(REPO)]),
               SPECBENCH_SGLANG_PYTHON=sys.executable, SPECBENCH_CONFIG_DIR=str(config),
               SPECBENCH_DATA_DIR=str(tmp_path / "data"), USER="tester",
               STANDIN_HEALTH_S="0.02")  # servers ready at once: no test here times a start
    return env


Here = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def here(capsys: pytest.CaptureFixture[str]) -> Here:
    """`here(tmp_path, ARGS)`: `specbench(tmp_path, ARGS)` in this process (tests/builders.py
    `specbench_here_as`), its environment and folder those the real command gets."""
    return specbench_here_as(capsys, environment, REPO)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def as_json(result: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(ok(result))


@pytest.fixture(scope="module")
def two_sweeps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two runs of the sweep through the CLI, each a process of its own (what `show` says of the
    latest is asked by the tests that read it)."""
    tmp = tmp_path_factory.mktemp("sweeps")
    first = specbench(tmp, "run", "standin-parent")
    second = specbench(tmp, "run", "standin-parent", "--format", "json")
    return {"tmp": tmp, "first": first, "second": second, "second_report": as_json(second)}


def test_the_cli_prints_the_confirmation_while_it_runs(two_sweeps: dict[str, Any]) -> None:
    run = two_sweeps["first"]
    ok(run)
    lines = run.stderr.splitlines()
    started = next(i for i, line in enumerate(lines) if "confirmation batch b-" in line)
    assert "started" in lines[started] and "2 configurations, 2 reps each" in lines[started]
    after = lines[started:]
    assert any("confirmation 1/2 baseline: rep 2/2: 82 tok/s" in line for line in after)
    assert any(f"confirmation 2/2 {WINNER}: improved 110 tok/s (+34.1%)" in line
               for line in after)
    assert any(line.endswith(" done") and "confirmation batch" in line for line in after)
    assert lines[-1].endswith("done") and "confirmation" not in lines[-1]  # the sweep's end


def test_a_sweep_that_loses_to_its_parent_says_so_in_every_format(
    two_sweeps: dict[str, Any], here: Here,
) -> None:
    text = ok(two_sweeps["first"]).splitlines()
    assert text[1].startswith("Sweep tp (grid, 2 of 2 points measured): confirmed: +34.1%")
    # the point's figure is its confirmation's (docs/contracts.md "A sweep and its
    # confirmation are one experiment")
    assert re.fullmatch(f"The sweep {NOTHING_BETTER}: its best point {WINNER} 110 tok/s in its "
                        r"confirmation b-[0-9a-f]{8} is -26\.7% against fast 150 tok/s", text[2])
    best = two_sweeps["second_report"]["sweep"]["best"]
    assert best["approach"] == WINNER
    assert {k: best["vs_parent"][k] for k in ("approach", "delta_pct", "better")} == {
        "approach": "fast", "delta_pct": -26.7, "better": False}
    assert NOTHING_BETTER in best["vs_parent"]["why"]
    assert NOTHING_BETTER in ok(here(two_sweeps["tmp"], "show", "--format", "slack"))


def test_show_is_the_sweep_and_the_confirmation_names_it(
    two_sweeps: dict[str, Any], here: Here,
) -> None:
    tmp, report = two_sweeps["tmp"], two_sweeps["second_report"]
    latest = as_json(here(tmp, "show", "--format", "json"))
    assert latest["batch"] == report["batch"]  # the batch the person started, not its confirmation
    confirmation = latest["sweep"]["confirmation"]
    assert confirmation["verdict"] == "improved" and confirmation["approach"] == WINNER
    shown = as_json(here(tmp, "show", confirmation["batch"], "--format", "json"))
    assert shown["confirms"] == report["batch"] and "confirms" not in latest
    text = ok(here(tmp, "show", confirmation["batch"]))
    assert f"Confirmation of sweep batch {report['batch']}" in text.splitlines()[1]


def test_compare_history_and_the_digest_count_the_experiment_once(
    two_sweeps: dict[str, Any], here: Here,
) -> None:
    tmp = two_sweeps["tmp"]
    first = ok(two_sweeps["first"]).split(" · batch ")[1].split(":")[0]
    second = two_sweeps["second_report"]["batch"]
    confirm = two_sweeps["second_report"]["sweep"]["confirmation"]["batch"]
    compared = as_json(here(tmp, "compare", "--format", "json"))
    assert (compared["a"]["batch"], compared["b"]["batch"]) == (first, second)
    # a confirmation named alone is compared with what came before its sweep
    compared = as_json(here(tmp, "compare", confirm, "--format", "json"))
    assert (compared["a"]["batch"], compared["b"]["batch"]) == (first, confirm)
    history = ok(here(tmp, "console", "-c", "history"))
    lines = [line for line in history.splitlines() if " standin-parent by tester" in line]
    assert [line.split()[0] for line in lines] == [second, first]
    assert all("sweep tp confirmed +34.1% in b-" in line and "nothing better than fast" in line
               for line in lines), history
    digest = as_json(here(tmp, "digest", "--format", "json"))
    assert [b["batch"] for b in digest["batches"]] == [first, second]
    assert digest["counts"] == {"done": 2}
    assert all(b["confirmation"] for b in digest["batches"])
    assert [(w["approach"], w["confirmed_in"] is not None) for w in digest["wins"]] == [
        ("fast", False), (WINNER, True), ("fast", False), (WINNER, True)]
    assert [(h["preset"], h["unit"], h["runs"]) for h in digest["hours"]] == [
        ("standin-parent", "CPU-hours", 12)]  # 4 sweep and 2 confirmation servers, twice
    assert digest["regressions"] == []  # the same values on the same host and stack


def test_the_chat_thread_shows_the_confirmation_running(tmp_path: Path) -> None:
    done = specbench(tmp_path, "console", "-c", "run standin-parent", "--timeout", "90")
    thread = [line for line in ok(done).splitlines() if line.startswith("  │ ")]
    rows = [i for i, line in enumerate(thread) if "Confirmation b-" in line]
    assert rows, done.stdout
    assert "the best point against the baseline again" in thread[rows[-1]]
    assert any(f"{WINNER}: improved 110 tok/s (+34.1%)" in line for line in thread[rows[-1]:])
    assert any(NOTHING_BETTER in line for line in thread)


def test_status_shows_a_running_confirmation_on_its_sweep_line(tmp_path: Path) -> None:
    from bot import views
    from jobs.batches.sweeping import confirmation_plan
    from jobs.commands.context import Caller, Context
    from jobs.commands.status import status
    from jobs.core.plans import parse_preset, resolve
    from jobs.store import Store
    from jobs.store.experiments import confirmation_key

    store = Store(f"sqlite:///{tmp_path / 'status.db'}")
    store.migrate()
    plan = resolve(parse_preset(yaml.safe_dump(PRESET), source="p.yaml", stem="standin-parent"))
    sweep, _ = store.create_batch(batch_id="b-sweep", preset=plan.preset, engine=plan.engine,
                                  queue="default", requested_by="U1", plan=plan)
    confirming = confirmation_plan(plan, WINNER, sweep_batch=sweep.id)
    store.create_batch(batch_id="b-confirm", preset=plan.preset, engine=plan.engine,
                       queue="default", requested_by="U1", plan=confirming,
                       idempotency_key=confirmation_key(sweep.id))
    store.set_state("b-sweep", "running", host="gpu1")
    store.set_state("b-confirm", "running", host="gpu1")
    data = status(Context(store=store, caller=Caller("U1")))
    (queue,) = data["queues"]
    (entry,) = queue["batches"]  # one experiment, one line
    assert entry["batch"] == "b-sweep"
    assert entry["confirming"] == {"batch": "b-confirm", "state": "running"}
    assert "confirming its best point in batch b-confirm (running)" in views.status(data)


def test_show_of_a_sweep_whose_confirmation_runs_says_so(tmp_path: Path) -> None:
    from bot import views
    from jobs.batches.sweeping import confirmation_plan
    from jobs.commands.context import Caller, Context
    from jobs.commands.show import show
    from jobs.core.plans import parse_preset, resolve
    from jobs.store import Store
    from jobs.store.experiments import confirmation_key
    from tests.conftest import make_record

    store = Store(f"sqlite:///{tmp_path / 'show.db'}")
    store.migrate()
    plan = resolve(parse_preset(yaml.safe_dump(PRESET), source="p.yaml", stem="standin-parent"))
    store.create_batch(batch_id="b-sweep", preset=plan.preset, engine=plan.engine,
                       queue="default", requested_by="U1", plan=plan)
    store.set_state("b-sweep", "running", host="gpu1")
    runs = [("baseline", 82.0), ("fast", 150.0), ("tp@STANDIN_THROUGHPUT=90", 90.0),
            (WINNER, 110.0)]
    store.put_records([(i, make_record(name, samples=[value, value], batch="b-sweep",
                                       preset=plan.preset, role="baseline" if i == 0 else None,
                                       change=plan.config(name).change,
                                       server_args=plan.config(name).server_args,
                                       env=plan.config(name).env))
                       for i, (name, value) in enumerate(runs)])
    store.create_batch(batch_id="b-confirm", preset=plan.preset, engine=plan.engine,
                       queue="default", requested_by="U1",
                       plan=confirmation_plan(plan, WINNER, sweep_batch="b-sweep"),
                       idempotency_key=confirmation_key("b-sweep"))
    store.set_state("b-confirm", "running", host="gpu1")
    shown = show(Context(store=store, caller=Caller("U1")))  # the latest a person started
    assert shown.row.id == "b-sweep" and shown.report is not None
    sweep = shown.report["sweep"]
    assert sweep["confirmation"] == {"batch": "b-confirm", "approach": WINNER,
                                     "state": "running", "verdict": None, "value": None,
                                     "delta_pct": None}
    assert sweep["best"]["vs_parent"]["better"] is False
    text = views.shown(shown)
    assert (f"confirming: {WINNER} against the baseline again in batch b-confirm (running)"
            in text.splitlines()[1])
    assert shown.report["key_achievement"]["approach"] == "fast"
