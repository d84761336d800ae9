"""Verdicts under load (docs/contracts.md "Load levels and service-level objectives"): each level
judged against the baseline at the same level, then by the SLO; the result improved, regressed or
mixed with its crossover, else the rules' precedence."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from jobs.core import verdicts
from jobs.core.levels import crossover, judge, report_levels
from jobs.core.records import RunRecord
from jobs.core.rules import load_rules
from jobs.core.verdicts import Metric, Verdict
from tests.conftest import make_record

LEVELS = (1, 4, 16, 64)
SLO = Metric(slo=(("p99_ttft_ms", 1000.0),))


def spread(value: float) -> list[float]:
    """Three repetitions around `value`, narrow enough that a 2% effect is no noise."""
    return [value - 0.1, value, value + 0.1]


def leveled(
    name: str,
    throughput: Sequence[float | None],
    *,
    ttft: Sequence[float] | None = None,
    statuses: Sequence[str] | None = None,
    status: str = "ok",
    **kwargs: Any,
) -> RunRecord:
    """A run of a batch with loads [1, 4, 16, 64] as DESIGN23's record shape has it: every level
    in order with its metrics and status; the top-level metrics the lowest level's."""
    by_load = []
    for i, level in enumerate(LEVELS):
        value = throughput[i]
        metrics: dict[str, Any] = {
            "output_throughput": [] if value is None else spread(value), "accept_length": None,
        }
        if ttft is not None and value is not None:
            metrics["p99_ttft_ms"] = spread(ttft[i])
        by_load.append({"load": {"max-concurrency": level}, "metrics": metrics,
                        "status": statuses[i] if statuses else "ok"})
    first = throughput[0]
    return make_record(name, samples=[] if first is None else spread(first), status=status,
                       extra={"by_load": by_load}, **kwargs)


def judged(record: RunRecord, baseline: RunRecord, metric: Metric | None = None) -> Verdict:
    return judge(record, baseline, metric=metric or Metric(), rules=load_rules())


def level_verdicts(verdict: Verdict) -> list[str]:
    return [entry["verdict"] for entry in verdict.levels]


BASE = leveled("baseline", [100.0, 200.0, 300.0, 400.0])


def test_each_level_is_judged_against_the_baseline_at_the_same_level() -> None:
    # +30% at 1, +0.1% at 4, -20% at 16, +25% at 64: each against its own level's baseline
    verdict = judged(leveled("a", [130.0, 200.2, 240.0, 500.0]), BASE)
    assert level_verdicts(verdict) == ["improved", "unchanged", "regressed", "improved"]
    assert [e["delta_pct"] for e in verdict.levels] == [30.0, 0.1, -20.0, 25.0]
    assert [e["value"] for e in verdict.levels] == [130.0, 200.2, 240.0, 500.0]
    assert [e["load"] for e in verdict.levels] == [{"max-concurrency": n} for n in LEVELS]
    assert all(e["slo"] is None for e in verdict.levels)  # no SLO in this batch
    assert verdict.levels[0]["figures"] == {"output_throughput": 130.0}
    # the top-level value and delta are the lowest level's
    assert (verdict.value, verdict.delta_pct) == (130.0, 30.0)
    # improved at 1 and 64, regressed at 16: no single crossover, the levels are listed
    assert verdict.verdict == "mixed"
    assert verdict.why.startswith("improved at max-concurrency 1 and 64, regressed at 16: ")


def test_mixed_names_its_crossover() -> None:
    flat = leveled("baseline", [100.0] * 4)
    verdict = judged(leveled("eagle3", [130.0, 112.0, 90.0, 70.0]), flat)
    assert verdict.verdict == "mixed"
    assert level_verdicts(verdict) == ["improved", "improved", "regressed", "regressed"]
    assert verdict.why == ("improved up to max-concurrency 4, regressed from 16: "
                           "c=1 +30.0%, c=4 +12.0%, c=16 -10.0%, c=64 -30.0%")
    assert crossover(verdict.levels) == {
        "improved": [{"max-concurrency": 1}, {"max-concurrency": 4}],
        "regressed": [{"max-concurrency": 16}, {"max-concurrency": 64}],
        "text": "improved up to max-concurrency 4, regressed from 16",
    }
    # the other way round: a change that only pays once the GPU is busy
    late = judged(leveled("late", [90.0, 95.0, 101.0, 120.0]), flat)
    assert late.verdict == "mixed"
    assert late.why.startswith("regressed up to max-concurrency 4, improved from 64: ")


def test_improved_or_regressed_at_every_level_is_no_mixed() -> None:
    flat = leveled("baseline", [100.0] * 4)
    up = judged(leveled("up", [130.0, 120.0, 110.0, 105.0]), flat)
    assert up.verdict == "improved" and crossover(up.levels) is None
    assert up.why == "improved at every level: c=1 +30.0%, c=4 +20.0%, c=16 +10.0%, c=64 +5.0%"
    # improved at low load, unchanged above: improved, and the why says where
    some = judged(leveled("some", [130.0, 100.5, 100.0, 99.5]), flat)
    assert some.verdict == "improved"
    assert some.why.startswith("improved at max-concurrency 1; unchanged at max-concurrency 4, "
                               "16 and 64: ")
    down = judged(leveled("down", [80.0, 90.0, 100.0, 100.0]), flat)
    assert down.verdict == "regressed"


def test_an_slo_breach_turns_a_level_into_regressed_naming_the_limit() -> None:
    base = leveled("baseline", [100.0] * 4, ttft=[400.0, 500.0, 640.0, 900.0])
    # faster everywhere, but its first token comes too late from 16 concurrent requests
    ours = leveled("eagle3", [130.0, 120.0, 115.0, 110.0], ttft=[300.0, 600.0, 1420.0, 2500.0])
    verdict = judged(ours, base, SLO)
    assert level_verdicts(verdict) == ["improved", "improved", "regressed", "regressed"]
    assert [e["slo"] for e in verdict.levels] == ["met", "met", "violated", "violated"]
    at16 = verdict.levels[2]
    assert at16["why"].startswith("p99_ttft_ms 1420 ms > 1000 ms limit at max-concurrency 16")
    assert "the baseline's 640 ms meets it" in at16["why"]
    assert at16["delta_pct"] == 15.0  # the measured delta is kept; the SLO decides the verdict
    assert at16["figures"] == {"output_throughput": 115.0, "p99_ttft_ms": 1420.0}
    assert verdict.verdict == "mixed"
    assert verdict.why.startswith("improved up to max-concurrency 4, regressed from 16: ")
    assert "c=16 p99_ttft_ms 1420 ms > 1000 ms" in verdict.why


def test_a_breach_by_the_baseline_alone_is_improved_by_both_inconclusive() -> None:
    base = leveled("baseline", [100.0] * 4, ttft=[400.0, 500.0, 1200.0, 1500.0])
    # the same throughput; at 16 only the baseline breaks the limit, at 64 both do
    ours = leveled("a", [100.0] * 4, ttft=[400.0, 500.0, 800.0, 1300.0])
    verdict = judged(ours, base, SLO)
    assert level_verdicts(verdict) == ["unchanged", "unchanged", "improved", "inconclusive"]
    assert [e["slo"] for e in verdict.levels] == ["met", "met", "met", "violated"]
    assert "the baseline's p99_ttft_ms 1200 ms > 1000 ms limit at max-concurrency 16" in \
        verdict.levels[2]["why"]
    assert verdict.levels[3]["why"].startswith("both break the SLO at max-concurrency 64")
    assert verdict.verdict == "improved"
    # both breaking at every level is inconclusive, for the SLO's sake
    both = judged(leveled("b", [100.0] * 4, ttft=[1100.0] * 4),
                  leveled("baseline", [100.0] * 4, ttft=[1200.0] * 4), SLO)
    assert both.verdict == "inconclusive" and both.reason == "slo"


def test_the_slo_never_overrides_a_failure_or_a_confound() -> None:
    base = leveled("baseline", [100.0] * 4, ttft=[400.0] * 4)
    # out of memory at 16: that level failed (its cause), 64 was never reached
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
    ours = leveled("a", [130.0, 120.0, None, None], ttft=[2000.0, 300.0, 0.0, 0.0],
                   statuses=["ok", "ok", "failed", "skipped"], status="failed",
                   log_tail=f"loading\n{oom}\n")
    verdict = judged(ours, base, SLO)
    assert level_verdicts(verdict) == ["regressed", "improved", "failed", "skipped"]
    assert verdict.levels[2]["cause"] == "out-of-memory"
    assert verdict.levels[3]["why"] == "not reached: the run ended (failed) at a lower level"
    assert [e["slo"] for e in verdict.levels] == ["violated", "met", None, None]
    assert verdict.verdict == "mixed"
    # a confound is inconclusive whatever the SLO says
    confounded = leveled("c", [100.0] * 4, ttft=[5000.0] * 4,
                         env={"NCCL_ALGO": "Tree"})
    verdict = judged(confounded, base, SLO)
    assert set(level_verdicts(verdict)) == {"inconclusive"}
    assert verdict.verdict == "inconclusive" and verdict.reason == "confound"
    assert verdict.confound is not None and verdict.confound[0] == "NCCL_ALGO"


def test_precedence_when_no_level_improved_or_regressed() -> None:
    flat = leveled("baseline", [100.0] * 4)
    failed = judged(leveled("f", [None] * 4, statuses=["failed", "skipped", "skipped",
                                                       "skipped"], status="failed"), flat)
    assert failed.verdict == "failed" and failed.cause == "crash"
    cancelled = judged(leveled("c", [100.5, None, None, None], statuses=[
        "ok", "cancelled", "skipped", "skipped"], status="cancelled"), flat)
    assert level_verdicts(cancelled) == ["unchanged", "cancelled", "skipped", "skipped"]
    assert cancelled.verdict == "cancelled"
    # a record that never started (no levels): every level skipped, the record's one why
    skipped = judged(make_record("s", status="skipped", samples=[]), flat)
    assert skipped.verdict == "skipped" and len(skipped.levels) == 4
    assert skipped.why == "never started: the batch was cancelled"
    # the baseline failed at 64 only: that level is inconclusive, the rest judged
    base = leveled("baseline", [100.0, 100.0, 100.0, None],
                   statuses=["ok", "ok", "ok", "failed"], status="failed")
    verdict = judged(leveled("a", [100.0, 100.5, 99.9, 80.0]), base)
    assert level_verdicts(verdict) == ["unchanged", "unchanged", "unchanged", "inconclusive"]
    assert verdict.verdict == "inconclusive" and verdict.reason == "baseline"


def test_an_slo_without_loads_judges_the_run_itself() -> None:
    def with_ttft(record: RunRecord, ttft: float) -> RunRecord:
        return dataclasses.replace(record, metrics={**record.metrics,
                                                    "p99_ttft_ms": spread(ttft)})

    base = with_ttft(make_record("baseline", samples=spread(100.0)), 640.0)
    verdict = judged(with_ttft(make_record("a", samples=spread(110.0)), 1420.0), base, SLO)
    assert verdict.verdict == "regressed"
    assert verdict.why == ("p99_ttft_ms 1420 ms > 1000 ms limit (the baseline's 640 ms meets it); "
                           "output_throughput +10.0%")
    assert len(verdict.levels) == 1 and verdict.levels[0]["load"] == {}
    assert verdict.levels[0]["slo"] == "violated"
    assert report_levels(verdict) is None  # no loads: the report shows no by_load


def test_without_loads_or_slo_the_verdict_is_the_rules_own() -> None:
    base = make_record("baseline", samples=[100.0, 101.0, 102.0])
    for record in (make_record("a", samples=[120.0, 121.0]),
                   make_record("b", samples=[100.5, 99.0, 101.5]),
                   make_record("c", status="failed", samples=[]),
                   make_record("d", samples=[90.0], extra={"reopened": "failed before"})):
        ours = judged(record, base)
        assert ours == verdicts.judge(record, base, metric=Metric(), rules=load_rules())
        assert ours.levels == ()
