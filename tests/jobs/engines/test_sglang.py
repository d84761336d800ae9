"""The SGLang engine against the stand-in: real processes, real HTTP, real argparse."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from jobs.core.rules import cause_of, load_rules
from jobs.engines import get_engine
from jobs.engines.sglang.engine import SGLangEngine, last_json_line, to_cli_args
from tests.standin.harness import Standin, make_standin


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Standin:
    return make_standin(tmp_path, monkeypatch)


def cause(record: Any) -> str:
    return cause_of(log_tail=record.log_tail, status=record.status, rules=load_rules())[0]


def test_to_cli_args_true_is_bare_and_false_or_none_is_dropped() -> None:
    args = {"tp-size": 8, "trust_remote_code": True, "disable-cuda-graph": False,
            "quantization": None, "cuda-graph-bs": [1, 2]}
    assert to_cli_args(args) == [
        "--tp-size", "8", "--trust-remote-code", "--cuda-graph-bs", "1", "2",
    ]


def test_last_json_line_skips_noise(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text('{"output_throughput": 1}\n{"output_throughput": 2}\nnot json\n')
    assert last_json_line(path) == {"output_throughput": 2}
    assert last_json_line(tmp_path / "missing.jsonl") is None


def test_get_engine_returns_the_sglang_engine() -> None:
    assert get_engine("sglang").name == "sglang"


def test_ok_run_measures_every_repetition(standin: Standin) -> None:
    config = standin.config("baseline", role="baseline", env={"STANDIN_THROUGHPUT": "82.0"})
    plan = standin.plan(config, reps=2)
    phases: list[tuple[str, dict[str, Any]]] = []
    record = SGLangEngine().run(config, standin.ctx(plan, "baseline", phases=phases))
    assert record.status == "ok" and record.exit_code == 0
    assert record.metrics["output_throughput"] == [82.0, 82.0]
    assert len(record.metrics["total_throughput"]) == 2
    assert len(record.metrics["median_ttft_ms"]) == len(record.metrics["median_itl_ms"]) == 2
    assert record.metrics["accept_length"] is None
    assert [name for name, _ in phases] == [
        "launching", "ready", "warmup", "result", "repetition", "result", "repetition", "result",
        "stopping",
    ]
    assert phases[3][1] == {"rep": 0, "of": 2, "metric": "output_throughput", "warmup": True,
                            "value": 82.0}
    assert phases[6][1] == {"rep": 2, "of": 2}
    assert phases[7][1] == {"rep": 2, "of": 2, "metric": "output_throughput", "value": 82.0}
    assert "The server is fired up and ready to roll!" in record.log_tail
    assert record.server_args["cuda-graph-max-bs"] == 8 and record.role == "baseline"
    assert len(standin.notes("bench")) == 3  # the warm-up and two repetitions
    assert record.extra["warmup"]["output_throughput"] == 82.0
    standin.assert_clean()


def test_speculative_run_reports_accept_length(standin: Standin) -> None:
    config = standin.config(
        "eagle3", server_args={"speculative-algorithm": "EAGLE3",
                               "speculative-draft-model-path": "/models/draft"},
        env={"STANDIN_ACCEPT_LENGTH": "2.61"},
    )
    plan = standin.plan(config, reps=2)
    record = SGLangEngine().run(config, standin.ctx(plan, "eagle3"))
    assert record.status == "ok"
    # one figure per repetition, each its own (the cache and the counters flushed before it)
    per_rep = [rep["accept_length"] for rep in record.extra["repetitions"]]
    assert len(per_rep) == 2
    assert record.metrics["accept_length"] == pytest.approx(sum(per_rep) / 2)
    standin.assert_clean()


def test_crash_fails_at_once_with_its_traceback(standin: Standin) -> None:
    config = standin.config("crash", "crash")
    # an hour to start: only the crash, never the startup timeout, can end this run in the test's
    # time, and the status says which ("timeout" otherwise)
    plan = standin.plan(config, startup_s=3600)
    record = SGLangEngine().run(config, standin.ctx(plan, "crash"))
    assert record.status == "failed" and record.exit_code == 1
    assert "RuntimeError: Cannot find any model weights" in record.log_tail
    assert cause(record) == "crash"
    assert record.metrics["output_throughput"] == []
    standin.assert_clean()


@pytest.mark.parametrize(("fatal", "tag"), [("oom", "out-of-memory"), ("arch", "arch-unsupported")])
def test_fatal_line_stops_a_hanging_server_within_seconds(
    standin: Standin, fatal: str, tag: str
) -> None:
    config = standin.config("fatal", "fatal-then-hang", env={"STANDIN_FATAL": fatal})
    plan = standin.plan(config, startup_s=3600)  # the server hangs: only its fatal line ends it
    record = SGLangEngine().run(config, standin.ctx(plan, "fatal"))
    assert len(standin.notes("fatal")) == 1
    assert record.status == "failed"  # not "timeout": the line ended the run
    assert cause(record) == tag
    standin.assert_clean()


def test_fatal_line_during_the_benchmark_fails_the_run(standin: Standin) -> None:
    config = standin.config("fatal-bench", "fatal-in-bench")
    plan = standin.plan(config, bench_s=3600)  # only the fatal line ends the bench in time
    record = SGLangEngine().run(config, standin.ctx(plan, "fatal-bench"))
    assert record.status == "failed"
    assert cause(record) == "out-of-memory"
    standin.assert_clean()


def test_silent_hang_times_out_at_startup(standin: Standin) -> None:
    config = standin.config("hang", "silent-hang")
    plan = standin.plan(config, startup_s=1.0)
    record = SGLangEngine().run(config, standin.ctx(plan, "hang"))
    assert record.status == "timeout"
    assert cause(record) == "timeout"
    standin.assert_clean()


def test_children_of_the_server_are_stopped_with_it(standin: Standin) -> None:
    config = standin.config("children", "children")
    plan = standin.plan(config)
    record = SGLangEngine().run(config, standin.ctx(plan, "children"))
    assert record.status == "ok"
    children = standin.notes("child")
    assert len(children) == 2
    [server] = standin.notes("server")
    assert all(child["pgid"] == server["pgid"] for child in children)
    standin.assert_clean()


def test_unknown_flag_is_rejected_by_preflight_and_by_argparse(standin: Standin) -> None:
    bad = standin.config("typo", server_args={"cuda-graph-max-bz": 8})
    plan = standin.plan(standin.config("baseline", role="baseline"), bad)
    engine = SGLangEngine()
    reasons = engine.preflight(plan)
    assert list(reasons) == ["typo"]
    assert "unrecognized arguments: --cuda-graph-max-bz" in reasons["typo"]
    assert "(did you mean --cuda-graph-max-bs?)" in reasons["typo"]
    match = load_rules().classify(reasons["typo"])
    assert match is not None and match.tag == "bad-config"
    # Started anyway, the real argparse refuses it the same way.
    record = engine.run(bad, standin.ctx(plan, "typo"))
    assert record.status == "failed" and record.exit_code == 2
    assert cause(record) == "bad-config"
    standin.assert_clean()


@pytest.mark.parametrize(("warmup", "what"), [(True, "warm-up"), (False, "repetition 1")])
def test_bench_timeout_gives_timeout(standin: Standin, warmup: bool, what: str) -> None:
    """The warm-up has the bench timeout, and missing it ends the run as a repetition's would."""
    config = standin.config("slow", "slow-bench")
    plan = dataclasses.replace(standin.plan(config, bench_s=1.0), warmup=warmup)
    record = SGLangEngine().run(config, standin.ctx(plan, "slow"))
    assert record.status == "timeout"
    assert f"bench_serving ({what}) timed out" in record.log_tail
    assert record.extra["warmup"] is None and "repetitions" not in record.extra
    standin.assert_clean()


@pytest.mark.parametrize(
    ("mode", "code", "evidence"),
    [("bench-fails", 1, "ValueError: Warmup failed"),
     ("bench-empty", 0, "wrote no result")],
)
def test_failing_bench_fails_the_run_with_its_lines(
    standin: Standin, mode: str, code: int, evidence: str
) -> None:
    config = standin.config(mode, mode)
    plan = standin.plan(config)
    record = SGLangEngine().run(config, standin.ctx(plan, mode))
    assert record.status == "failed" and record.exit_code == code
    assert evidence in record.log_tail
    assert "The server is fired up and ready to roll!" in record.log_tail
    standin.assert_clean()


def test_cancel_stops_the_run(standin: Standin) -> None:
    config = standin.config("cancel", "slow-bench")
    plan = standin.plan(config, bench_s=3600)  # a slow bench: only the cancel ends it in time
    phases: list[tuple[str, dict[str, Any]]] = []
    record = SGLangEngine().run(
        config,
        standin.ctx(plan, "cancel", phases=phases,
                    should_stop=lambda: any(name == "warmup" for name, _ in phases)),
    )
    assert record.status == "cancelled"
    assert phases[-1][0] == "stopping"
    standin.assert_clean()


def test_missing_interpreter_fails_the_run_without_raising(
    standin: Standin, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECBENCH_SGLANG_PYTHON", str(standin.root / "no-python"))
    config = standin.config("nopython")
    record = SGLangEngine().run(config, standin.ctx(standin.plan(config), "nopython"))
    assert record.status == "failed"
    assert "cannot start" in record.log_tail
