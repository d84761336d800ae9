"""The report: the seed session's table, and scenarios for root cause, next steps and more."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.core.advice import EFFORTS, analyze, load_remedies, split_batch
from jobs.core.records import RunRecord, parse_lines
from jobs.core.rules import load_rules
from jobs.core.verdicts import Metric, Verdict
from jobs.errors import RecordError
from tests.conftest import SEED_VERDICTS, make_record

SPEC_KEYS = {
    "batch", "preset", "metric", "baseline", "results", "key_achievement", "root_cause",
    "next_steps",
}
RESULT_KEYS = {
    "approach", "verdict", "cause", "value", "delta_pct", "why", "vs_parent", "break_even",
}
STEP_KEYS = {"rank", "kind", "approach", "action", "why", "effort"}
KIND_ORDER = ("retry", "adopt", "remedy", "accept")

LOGS = {
    "arch-unsupported": "RuntimeError: CUDA error: no kernel image is available for execution "
    "on the device",
    "out-of-memory": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    "cuda-graph-incompatible": "Exception: Capture cuda graph failed: operation not permitted "
    "when stream is capturing",
    "nccl-error": "torch.distributed.DistBackendError: NCCL error in: "
    "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error "
    "(run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3",
}


def report_of(records: list[RunRecord], metric: Metric | None = None) -> dict[str, Any]:
    return analyze(
        records, metric=metric or Metric(), rules=load_rules(), remedies=load_remedies()
    )


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["approach"]: r for r in report["results"]}


def failing(name: str, cause: str, **kwargs: Any) -> RunRecord:
    return make_record(name, status="failed", samples=[], log_tail=f"loading\n{LOGS[cause]}\n",
                       **kwargs)


def check_shape(report: dict[str, Any]) -> None:
    """docs/contracts.md's keys are all there (extra keys are allowed) and steps are in kind
    order."""
    assert SPEC_KEYS <= set(report)
    assert {"approach", "value", "status"} <= set(report["baseline"])
    for result in report["results"]:
        assert RESULT_KEYS <= set(result)
    steps = report["next_steps"]
    assert [s["rank"] for s in steps] == list(range(1, len(steps) + 1))
    for step in steps:
        assert STEP_KEYS <= set(step)
    kinds = [KIND_ORDER.index(s["kind"]) for s in steps]
    assert kinds == sorted(kinds)
    # accept: at most once, last, and only naming a configuration that was measured
    accepts = [s for s in steps if s["kind"] == "accept"]
    assert len(accepts) <= 1
    if accepts:
        assert steps[-1] is accepts[0]
        assert "no measurement" not in accepts[0]["action"]
    remedies = [EFFORTS.index(s["effort"]) for s in steps if s["kind"] == "remedy"]
    assert remedies == sorted(remedies)


# --------------------------------------------------------------------------- the seed session


@pytest.fixture
def seed(seed_records: list[RunRecord]) -> dict[str, Any]:
    return report_of(seed_records)


def test_seed_verdicts(seed: dict[str, Any]) -> None:
    check_shape(seed)
    results = by_name(seed)
    assert {name: (r["verdict"], r["cause"]) for name, r in results.items()} == SEED_VERDICTS
    assert seed["baseline"] == {"approach": "baseline", "value": 82.0, "status": "ok",
                                "samples": [81.7, 82.0, 82.4]}


def test_seed_results_in_record_order(
    seed: dict[str, Any], seed_records: list[RunRecord]
) -> None:
    assert [r["approach"] for r in seed["results"]] == [
        r.approach for r in seed_records if r.role == "approach"
    ]


def test_seed_key_achievement_and_inconclusive(seed: dict[str, Any]) -> None:
    assert seed["key_achievement"] == {
        "approach": "cuda-graph-max-bs-128", "value": 89.5, "delta_pct": 9.1,
    }
    fewer = by_name(seed)["eagle3-nccl-fewer-channels"]
    assert "mem-fraction-static" in fewer["why"]
    assert "0.8" in fewer["why"] and "0.85" in fewer["why"]
    assert fewer["vs_parent"] == {"approach": "eagle3", "delta_pct": 2.4}
    assert fewer["delta_pct"] == -32.4 and fewer["value"] == 55.4


def test_seed_root_cause(seed: dict[str, Any]) -> None:
    root = seed["root_cause"]
    assert (root["cause"], root["count"], root["of"]) == ("arch-unsupported", 2, 4)
    assert "compute capability 12.0" in root["text"]


def test_seed_next_steps(seed: dict[str, Any]) -> None:
    steps = seed["next_steps"]
    first = steps[0]
    assert (first["rank"], first["kind"], first["approach"]) == (
        1, "retry", "eagle3-nccl-fewer-channels",
    )
    assert "mem-fraction-static" in first["action"] and "0.85" in first["action"]
    assert steps[1]["kind"] == "adopt" and steps[1]["approach"] == "cuda-graph-max-bs-128"
    assert steps[-1]["kind"] == "accept"
    efforts = [s["effort"] for s in steps if s["kind"] == "remedy"]
    assert efforts[0] == "low" and "medium" in efforts and efforts[-1] == "high"


def test_seed_break_even(seed: dict[str, Any]) -> None:
    results = by_name(seed)
    assert results["eagle3"]["break_even"] == {"now_ms": 48.2, "needed_ms": 31.8}
    assert results["cuda-graph-max-bs-128"]["break_even"] is None
    assert results["eagle3-nccl-tree"]["break_even"] is None


# --------------------------------------------------------------------------- scenarios


def test_failed_baseline() -> None:
    records = [
        make_record("baseline", status="failed", samples=[], log_tail=LOGS["out-of-memory"]),
        make_record("a", samples=[110.0, 111.0]),
        make_record("b", samples=[90.0, 91.0]),
        failing("c", "nccl-error"),
    ]
    report = report_of(records)
    check_shape(report)
    results = by_name(report)
    assert results["a"]["verdict"] == results["b"]["verdict"] == "inconclusive"
    assert "baseline failed" in results["a"]["why"]
    assert results["c"]["verdict"] == "failed"
    assert report["baseline"]["status"] == "failed" and report["baseline"]["value"] is None
    assert report["key_achievement"] is None
    first = report["next_steps"][0]
    assert first["kind"] == "retry" and "fix the baseline" in first["action"].lower()
    # one step for the baseline, not one retry per approach
    assert sum(s["kind"] == "retry" for s in report["next_steps"]) == 1
    # nothing was measured against a baseline that ran: no configuration to keep
    assert all(s["kind"] != "accept" for s in report["next_steps"])


def test_fingerprint_drift_in_the_report() -> None:
    records = [
        make_record("baseline", samples=[100.0, 101.0]),
        make_record("a", samples=[120.0, 121.0], fingerprint={
            "gpu": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "gpu_count": 8,
            "driver": "580.82", "cuda": "12.8", "torch": "2.8.0", "sglang": "0.5.2",
            "nccl": "2.27.3",
        }),
    ]
    report = report_of(records)
    result = by_name(report)["a"]
    assert result["verdict"] == "inconclusive"
    assert "driver" in result["why"] and "580.82" in result["why"] and "575.57.08" in result["why"]
    retry = report["next_steps"][0]
    assert retry["kind"] == "retry" and retry["approach"] == "a"


def test_noisy_samples_get_a_retry_with_more_repetitions() -> None:
    report = report_of([
        make_record("baseline", samples=[90.0, 100.0, 110.0]),
        make_record("noisy", samples=[105.0, 112.0, 130.0]),
    ])
    result = by_name(report)["noisy"]
    assert result["verdict"] == "inconclusive" and result["delta_pct"] == 12.0
    assert "more repetitions" in report["next_steps"][0]["action"]


@pytest.mark.parametrize(
    ("causes", "expected"),
    [
        # needs at least 2 sharing it
        (["out-of-memory"], None),
        (["out-of-memory", "nccl-error"], None),
        # ...and at least half of the failures (2 of 4 is half)
        (["out-of-memory", "out-of-memory", "nccl-error", "arch-unsupported"], "out-of-memory"),
        (["nccl-error", "nccl-error", "out-of-memory", "arch-unsupported", "crash"], None),
        # ties go to the earlier tag in the precedence
        (["nccl-error", "nccl-error", "out-of-memory", "out-of-memory"], "out-of-memory"),
        (
            ["cuda-graph-incompatible", "cuda-graph-incompatible", "arch-unsupported",
             "arch-unsupported"],
            "arch-unsupported",
        ),
        (["crash", "crash", "nccl-error"], "crash"),
    ],
)
def test_root_cause_rules(causes: list[str], expected: str | None) -> None:
    records = [make_record("baseline", samples=[100.0, 101.0])]
    for n, cause in enumerate(causes):
        if cause == "crash":
            records.append(make_record(f"x{n}", status="failed", samples=[], log_tail="bye\n"))
        else:
            records.append(failing(f"x{n}", cause))
    records.append(make_record("fine", samples=[100.5, 101.5]))
    report = report_of(records)
    assert [r["cause"] for r in report["results"][:-1]] == causes
    root = report["root_cause"]
    if expected is None:
        assert root is None
    else:
        assert root["cause"] == expected
        assert root["of"] == len(causes) and root["count"] == causes.count(expected)
    check_shape(report)


def test_break_even_absent_when_the_baseline_speculates() -> None:
    records = [
        make_record("baseline", samples=[80.0, 82.0, 84.0], accept_length=2.0),
        make_record("deeper", samples=[60.0, 61.0, 62.0], accept_length=2.5),
    ]
    assert by_name(report_of(records))["deeper"]["break_even"] is None
    records[0] = make_record("baseline", samples=[80.0, 82.0, 84.0])
    assert by_name(report_of(records))["deeper"]["break_even"] == {
        "now_ms": round(2.5 / 61.0 * 1000, 1), "needed_ms": round(2.5 / 82.0 * 1000, 1),
    }


def test_vs_parent() -> None:
    records = [
        make_record("baseline", samples=[100.0, 101.0]),
        make_record("parent", samples=[50.0, 51.0]),
        make_record("child", parent="parent", samples=[60.0, 61.0]),
        failing("broken", "out-of-memory"),
        make_record("orphan", parent="broken", samples=[70.0, 71.0]),
        failing("failed-child", "out-of-memory", parent="parent"),
    ]
    results = by_name(report_of(records))
    assert results["child"]["vs_parent"] == {"approach": "parent", "delta_pct": 19.8}
    assert results["orphan"]["vs_parent"] is None  # the parent failed: no value
    assert results["failed-child"]["vs_parent"] is None
    assert results["parent"]["vs_parent"] is None


def test_lower_is_better_report() -> None:
    metric = Metric(name="median_ttft_ms", lower_is_better=True)
    records = [
        make_record("baseline", samples=[200.0, 201.0], metric="median_ttft_ms"),
        make_record("faster", samples=[150.0, 151.0], metric="median_ttft_ms", accept_length=2.0),
        make_record("slower", samples=[300.0, 301.0], metric="median_ttft_ms"),
    ]
    report = report_of(records, metric)
    results = by_name(report)
    assert results["faster"]["verdict"] == "improved" and results["faster"]["delta_pct"] > 0
    assert results["slower"]["verdict"] == "regressed" and results["slower"]["delta_pct"] < 0
    assert report["key_achievement"]["approach"] == "faster"
    assert results["faster"]["break_even"] is None  # a latency is no rate


def test_key_achievement_is_the_largest_improvement() -> None:
    report = report_of([
        make_record("baseline", samples=[100.0, 101.0]),
        make_record("good", samples=[110.0, 111.0]),
        make_record("better", samples=[130.0, 131.0]),
        make_record("worse", samples=[80.0, 81.0]),
    ])
    assert report["key_achievement"]["approach"] == "better"
    adopt = [s for s in report["next_steps"] if s["kind"] == "adopt"]
    assert len(adopt) == 1 and adopt[0]["approach"] == "better"
    assert report["next_steps"][-1]["approach"] == "better"
    check_shape(report)


def test_no_improvement_accepts_the_baseline() -> None:
    report = report_of([
        make_record("baseline", samples=[100.0, 101.0]),
        make_record("same", samples=[100.0, 101.0]),
    ])
    assert report["key_achievement"] is None and report["root_cause"] is None
    assert [s["kind"] for s in report["next_steps"]] == ["remedy", "accept"]
    assert report["next_steps"][-1]["approach"] == "baseline"


def test_cancelled_and_skipped_in_the_report() -> None:
    report = report_of([
        make_record("baseline", samples=[100.0, 101.0]),
        make_record("a", status="cancelled", samples=[]),
        make_record("b", status="skipped", samples=[]),
    ])
    assert [r["verdict"] for r in report["results"]] == ["cancelled", "skipped"]
    assert report["root_cause"] is None
    check_shape(report)


def test_timeout_cause_and_its_remedy() -> None:
    report = report_of([
        make_record("baseline", samples=[100.0, 101.0]),
        make_record("slow", status="timeout", samples=[], log_tail="Capturing batches\n"),
    ])
    assert by_name(report)["slow"]["cause"] == "timeout"
    remedies = [s for s in report["next_steps"] if s["kind"] == "remedy"]
    assert remedies and "timeout" in remedies[0]["action"]


def test_unknown_keys_are_kept_and_ignored() -> None:
    lines = [
        make_record("baseline", samples=[100.0, 101.0], extra={"host": "gpu-7"}).to_json(),
        make_record("a", samples=[110.0, 111.0], extra={"future": {"x": 1}}).to_json(),
    ]
    records = list(parse_lines(lines))
    assert records[1].extra == {"future": {"x": 1}}
    assert records[1].to_dict()["future"] == {"x": 1}
    assert by_name(report_of(records))["a"]["verdict"] == "improved"


def test_verdicts_already_judged_are_taken_as_given(seed_records: list[RunRecord]) -> None:
    """A worker judges each run as it ends; the report then judges only the rest."""
    fresh = report_of(seed_records)
    first = fresh["results"][0]
    given = Verdict("improved", None, first["value"], first["delta_pct"], "judged by the worker")
    report = analyze(
        seed_records, metric=Metric(), rules=load_rules(), remedies=load_remedies(),
        judged={first["approach"]: given},
    )
    assert report["results"][0]["verdict"] == "improved"
    # the given why, then what the report adds of the batch as a whole (jobs.core.verdicts)
    assert report["results"][0]["why"].startswith("judged by the worker; a real gain not "
                                                  "explained by its hypothesis")
    assert report["results"][1:] == fresh["results"][1:]


def test_split_batch_errors() -> None:
    with pytest.raises(RecordError, match="no baseline"):
        split_batch([make_record("a")])
    with pytest.raises(RecordError, match="2 baseline"):
        split_batch([make_record("baseline"), make_record("baseline")])
    with pytest.raises(RecordError, match="mix 2 batches"):
        split_batch([make_record("baseline"), make_record("a", batch="b-other")])


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("{not json", r"RUNS.jsonl:2: not valid JSON"),
        ("[1, 2]", r"RUNS.jsonl:2: a run record must be a JSON object"),
        ('{"batch": "b"}', r"RUNS.jsonl:2: 'preset' is missing"),
    ],
)
def test_malformed_lines_name_the_line(line: str, match: str) -> None:
    good = make_record("baseline").to_json()
    with pytest.raises(RecordError, match=match):
        list(parse_lines([good, line]))
