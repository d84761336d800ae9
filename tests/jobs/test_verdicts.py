"""Verdicts: docs/contracts.md's rules, scenario by scenario, and as properties (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from jobs.core.records import RunRecord
from jobs.core.rules import RuleSet, load_rules
from jobs.core.verdicts import Metric, Verdict, compare, fingerprint_drift, judge, median
from tests.conftest import FINGERPRINT, make_record

RULES: RuleSet = load_rules()
THROUGHPUT = Metric()
TTFT = Metric(name="median_ttft_ms", min_effect_pct=2.0, lower_is_better=True)
OOM_LINE = (
    "[2026-12-02 10:01:02 TP3] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
    "2.00 GiB. GPU 3 has a total capacity of 94.97 GiB of which 512.00 MiB is free."
)


def _judge(
    record: RunRecord, baseline: RunRecord | None = None, metric: Metric = THROUGHPUT
) -> Verdict:
    base = baseline or make_record("baseline", samples=[100.0, 101.0, 102.0])
    return judge(record, base, metric=metric, rules=RULES)


# --------------------------------------------------------------------------- rule 1 and 2


@pytest.mark.parametrize("status", ["cancelled", "skipped"])
def test_cancelled_and_skipped(status: str) -> None:
    verdict = _judge(make_record(status=status, samples=[]))
    assert verdict.verdict == status and verdict.cause is None and verdict.delta_pct is None


def test_failed_quotes_the_matching_line() -> None:
    verdict = _judge(make_record(status="failed", samples=[], log_tail=f"loading\n{OOM_LINE}\n"))
    assert (verdict.verdict, verdict.cause) == ("failed", "out-of-memory")
    assert "CUDA out of memory" in verdict.why
    assert "[2026-12-02" not in verdict.why  # the timestamp prefix is dropped
    assert verdict.value is None and verdict.delta_pct is None


def test_failed_without_a_matching_rule_is_a_crash() -> None:
    verdict = _judge(make_record(status="failed", samples=[], log_tail="loading weights\nbye\n"))
    assert (verdict.verdict, verdict.cause) == ("failed", "crash")
    assert "bye" in verdict.why


def test_timeout_without_a_matching_rule() -> None:
    verdict = _judge(
        make_record(status="timeout", samples=[], log_tail="Capturing batches (bs=64)\n")
    )
    assert (verdict.verdict, verdict.cause) == ("failed", "timeout")
    assert "Capturing batches" in verdict.why


def test_timeout_with_a_matching_rule_takes_the_rule() -> None:
    verdict = _judge(make_record(status="timeout", samples=[], log_tail=OOM_LINE))
    assert (verdict.verdict, verdict.cause) == ("failed", "out-of-memory")


def test_ok_without_samples_is_failed() -> None:
    verdict = _judge(make_record(status="ok", samples=[]))
    assert verdict.verdict == "failed"
    assert "output_throughput" in verdict.why


def test_failed_status_wins_over_samples() -> None:
    verdict = _judge(make_record(status="failed", samples=[120.0, 121.0], log_tail=OOM_LINE))
    assert verdict.verdict == "failed"


# --------------------------------------------------------------------------- rule 3


@pytest.mark.parametrize(
    "baseline",
    [
        make_record("baseline", status="failed", samples=[], log_tail=OOM_LINE),
        make_record("baseline", status="ok", samples=[]),
        make_record("baseline", status="timeout", samples=[]),
    ],
)
def test_failed_baseline_makes_every_measured_approach_inconclusive(baseline: RunRecord) -> None:
    verdict = _judge(make_record(samples=[150.0, 151.0, 152.0]), baseline)
    assert verdict.verdict == "inconclusive" and verdict.reason == "baseline"
    assert "baseline failed" in verdict.why
    assert verdict.value == 151.0
    # an approach that failed itself is still failed
    failed = _judge(make_record(status="failed", samples=[], log_tail=OOM_LINE), baseline)
    assert failed.verdict == "failed"


def test_confound_names_the_knob_and_both_values() -> None:
    record = make_record(
        change={"server_args": {}, "env": {"NCCL_MIN_NCHANNELS": "4"}},
        server_args={
            "model-path": "/models/m", "tp-size": 8, "mem-fraction-static": 0.8,
            "cuda-graph-max-bs": 512,
        },
        samples=[150.0, 151.0, 152.0],
    )
    verdict = _judge(record)
    assert verdict.verdict == "inconclusive" and verdict.reason == "confound"
    assert "mem-fraction-static" in verdict.why
    assert "0.8" in verdict.why and "0.85" in verdict.why
    assert verdict.delta_pct == pytest.approx(49.5)  # given for inconclusive results too


def test_confound_in_env_and_several_confounds() -> None:
    record = make_record(env={"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"}, samples=[150.0])
    verdict = _judge(record)
    assert verdict.reason == "confound"
    assert "NCCL_ALGO" in verdict.why and "Tree" in verdict.why and "unset" in verdict.why
    assert "1 more" in verdict.why


def test_declared_change_is_no_confound() -> None:
    record = make_record(
        change={"server_args": {"mem-fraction-static": 0.8}, "env": {"NCCL_ALGO": "Tree"}},
        samples=[150.0, 151.0, 152.0],
    )
    assert _judge(record).verdict == "improved"


@pytest.mark.parametrize("key", ["gpu", "gpu_count", "driver", "cuda", "torch", "sglang", "nccl"])
def test_fingerprint_drift_names_the_key_and_both_values(key: str) -> None:
    other = {**FINGERPRINT, key: "something-else"}
    verdict = _judge(make_record(fingerprint=other, samples=[150.0, 151.0, 152.0]))
    assert verdict.verdict == "inconclusive" and verdict.reason == "drift"
    assert key in verdict.why
    assert "something-else" in verdict.why and str(FINGERPRINT[key]) in verdict.why


@pytest.mark.parametrize("key", ["compute_capability", "interconnect", "hostname"])
def test_other_fingerprint_keys_are_no_drift(key: str) -> None:
    other = {**FINGERPRINT, key: "x"}
    assert _judge(make_record(fingerprint=other, samples=[150.0, 151.0, 152.0])).verdict == (
        "improved"
    )


def test_missing_fingerprint_key_is_no_drift() -> None:
    assert fingerprint_drift({"gpu": "A"}, {"driver": "1"}) is None
    assert fingerprint_drift({"gpu_count": 8}, {"gpu_count": "8"}) is None


# --------------------------------------------------------------------------- rule 4


def test_improved_regressed_unchanged() -> None:
    assert _judge(make_record(samples=[110.0, 111.0, 112.0])).verdict == "improved"
    assert _judge(make_record(samples=[90.0, 91.0, 92.0])).verdict == "regressed"
    unchanged = _judge(make_record(samples=[102.0, 102.5, 103.0]))
    assert unchanged.verdict == "unchanged" and unchanged.delta_pct == 1.5
    assert "minimum effect" in unchanged.why


def test_no_change_is_unchanged_even_with_a_zero_minimum_effect() -> None:
    base = make_record("baseline", samples=[100.0, 100.0])
    verdict = _judge(make_record(samples=[100.0, 100.0]), base, Metric(min_effect_pct=0.0))
    assert verdict.verdict == "unchanged" and verdict.delta_pct == 0.0
    tiny = _judge(make_record(samples=[100.01, 100.01]), base, Metric(min_effect_pct=0.0))
    assert tiny.verdict == "improved"


def test_overlapping_ranges_are_inconclusive() -> None:
    verdict = _judge(make_record(samples=[95.0, 110.0, 112.0]))
    assert verdict.verdict == "inconclusive" and verdict.reason == "noise"
    assert "overlap" in verdict.why
    assert verdict.delta_pct == pytest.approx(8.9)


def test_touching_ranges_count_as_overlapping() -> None:
    # baseline [100, 102], approach [102, 120]: they touch at 102
    verdict = _judge(make_record(samples=[102.0, 110.0, 120.0]))
    assert verdict.verdict == "inconclusive"
    assert _judge(make_record(samples=[102.01, 110.0, 120.0])).verdict == "improved"


def test_a_single_repetition_is_no_noise_estimate() -> None:
    """docs/contracts.md "Noise, measured": with one repetition on a side and no bracket or
    history to give a noise figure, the delta alone no longer decides."""
    base = make_record("baseline", samples=[100.0, 101.0, 102.0])
    once = _judge(make_record(samples=[104.0]), base)
    assert (once.verdict, once.reason) == ("inconclusive", "one-rep")
    assert once.why == "+3.0% (104 vs 101) from one repetition: no noise estimate"
    assert once.delta_pct == 3.0 and once.value == 104.0
    one_base = make_record("baseline", samples=[100.0])
    assert _judge(make_record(samples=[90.0, 110.0, 103.0]), one_base).reason == "one-rep"
    assert _judge(make_record(samples=[97.0]), one_base).reason == "one-rep"
    # below the minimum effect it is unchanged whatever the samples: no noise figure needed
    assert _judge(make_record(samples=[101.0]), one_base).verdict == "unchanged"


def test_a_single_repetition_decides_against_the_brackets_spread() -> None:
    """A bracketed baseline (first and last run) is a noise figure: a single repetition
    beyond its spread decides, one within it is inconclusive."""
    base = make_record("baseline", samples=[100.0, 104.0])
    bracketed = RunRecord(**{**base.__dict__, "extra": {
        **base.extra, "bracket": {"metrics": {"output_throughput": [101.0, 103.0]},
                                  "status": "ok"}}})
    beyond = _judge(make_record(samples=[110.0]), bracketed)
    assert beyond.verdict == "improved"
    assert beyond.why == ("+7.8% (110 vs 102) from one repetition, beyond the 3.9% spread of "
                          "the baseline's first and last runs")
    within = _judge(make_record(samples=[105.0]), bracketed)
    assert (within.verdict, within.reason) == ("inconclusive", "noise")
    assert "within the 3.9% spread" in within.why


def test_lower_is_better_flips_the_sign() -> None:
    base = make_record("baseline", samples=[200.0, 201.0, 202.0], metric="median_ttft_ms")
    faster = make_record(samples=[150.0, 151.0, 152.0], metric="median_ttft_ms")
    slower = make_record(samples=[250.0, 251.0, 252.0], metric="median_ttft_ms")
    good = _judge(faster, base, TTFT)
    bad = _judge(slower, base, TTFT)
    assert good.verdict == "improved" and good.delta_pct == pytest.approx(24.9)
    assert bad.verdict == "regressed" and bad.delta_pct == pytest.approx(-24.9)


def test_zero_baseline_is_inconclusive_not_a_crash() -> None:
    base = make_record("baseline", samples=[0.0, 0.0])
    verdict = _judge(make_record(samples=[5.0, 6.0]), base)
    assert verdict.verdict == "inconclusive" and verdict.delta_pct is None


def test_unknown_keys_in_records_are_ignored() -> None:
    record = make_record(
        samples=[110.0, 111.0, 112.0], extra={"gpu_temperature": [71, 72], "notes": "x"}
    )
    assert record.extra == {"gpu_temperature": [71, 72], "notes": "x"}
    assert record.to_dict()["notes"] == "x"
    assert _judge(record).verdict == "improved"


def test_median() -> None:
    assert median([]) is None
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([1.0, 2.0]) == 1.5


# --------------------------------------------------------------------------- properties

SAMPLES = st.lists(
    st.floats(min_value=1.0, max_value=1e4, allow_nan=False, allow_infinity=False),
    min_size=1, max_size=5,
)
METRICS = st.builds(
    Metric,
    name=st.just("output_throughput"),
    min_effect_pct=st.sampled_from([0.0, 0.5, 2.0, 5.0]),
    lower_is_better=st.booleans(),
)
PROPERTY = settings(
    deadline=None, max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _verdict(samples: list[float], base: list[float], metric: Metric) -> str:
    record = make_record(samples=samples)
    baseline = make_record("baseline", samples=base)
    return judge(record, baseline, metric=metric, rules=RULES).verdict


@PROPERTY
@given(samples=SAMPLES, metric=METRICS)
def test_identical_samples_are_unchanged(samples: list[float], metric: Metric) -> None:
    assert _verdict(samples, list(samples), metric) == "unchanged"


@PROPERTY
@given(a=SAMPLES, b=SAMPLES, metric=METRICS)
def test_swapping_never_gives_the_same_direction_both_ways(
    a: list[float], b: list[float], metric: Metric
) -> None:
    there = _verdict(a, b, metric)
    back = _verdict(b, a, metric)
    if there in ("improved", "regressed"):
        assert back != there


@PROPERTY
@given(
    base=SAMPLES,
    fraction=st.floats(min_value=-0.99, max_value=0.99),
    min_effect=st.sampled_from([0.5, 2.0, 5.0, 10.0]),
    lower_is_better=st.booleans(),
)
def test_a_change_below_the_minimum_effect_is_unchanged(
    base: list[float], fraction: float, min_effect: float, lower_is_better: bool
) -> None:
    metric = Metric(min_effect_pct=min_effect, lower_is_better=lower_is_better)
    value = median(base)
    assert value is not None
    # every approach sample moved by the same relative step, strictly below the minimum effect
    factor = 1.0 + fraction * min_effect / 100.0
    assert _verdict([x * factor for x in base], base, metric) == "unchanged"


@PROPERTY
@given(
    a=SAMPLES,
    b=SAMPLES,
    metric=METRICS,
    scale=st.sampled_from([0.001, 0.37, 1.0, 2.0, 3.3, 10.0, 1234.5]),
)
def test_scaling_every_value_changes_no_verdict(
    a: list[float], b: list[float], metric: Metric, scale: float
) -> None:
    # values on a 0.01 grid: a real benchmark prints a few decimals, and adjacent floats
    # could merge under scaling, which says nothing about the rules
    a = [round(x, 2) for x in a]
    b = [round(x, 2) for x in b]
    assume(median(b))
    before = _verdict(a, b, metric)
    after = _verdict([x * scale for x in a], [x * scale for x in b], metric)
    assert before == after


@PROPERTY
@given(a=SAMPLES, b=SAMPLES, metric=METRICS)
def test_compare_agrees_with_judge_for_clean_records(
    a: list[float], b: list[float], metric: Metric
) -> None:
    value = median(a)
    assert value is not None
    direct = compare(a, b, metric=metric, value=value, delta=0.0).verdict
    assert direct == _verdict(a, b, metric)
