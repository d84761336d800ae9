"""The regression watch's pure core (jobs.core.watch; docs/contracts.md "Regression watch"): its
schedule's slots, the detection on one series, the stated thresholds, a candidate settled by its
confirmation, the stack diff and each key's precision."""

from __future__ import annotations

import datetime as dt
import math
import random

import pytest

from jobs.core.watch import (
    BLIP,
    CONFIRMED,
    DISMISSED,
    Change,
    SeriesKey,
    SeriesPoint,
    WatchRow,
    cuts_of,
    find_candidate,
    headline,
    is_environment,
    judged_keys,
    outcome_text,
    parse_schedule,
    points_of,
    precision,
    settle,
    stack_diff,
    thresholds,
)
from jobs.errors import UserError
from tests.conftest import make_record

KEY = SeriesKey("baseline", "output_throughput")
T0 = dt.datetime(2027, 1, 1, 2, 0, tzinfo=dt.UTC)
STACK = {"engine": "sglang", "sglang": "0.5.2", "torch": "2.8.0", "gpu": "NVIDIA H200",
         "gpu_count": 8, "host": "gpu-1", "model_revision": "abc"}


def series(values: list[float], *, stacks: list[dict[str, object]] | None = None,
           lower_is_better: bool = False) -> list[SeriesPoint]:
    return [SeriesPoint(key=KEY, batch=f"n{i}", at=T0 + dt.timedelta(days=i), value=v,
                        low=v * 0.995, high=v * 1.005,
                        stack=(stacks[i] if stacks else STACK), lower_is_better=lower_is_better)
            for i, v in enumerate(values)]


def noise(n: int, *, seed: int, level: float = 100.0, sd: float = 0.02) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 + sd * rng.gauss(0, 1)) for _ in range(n)]


def point(value: float, batch: str = "c") -> SeriesPoint:
    return SeriesPoint(key=KEY, batch=batch, at=T0, value=value, low=value, high=value)


# --- the schedule ---


def test_a_daily_watch_is_due_at_its_slot_and_catches_up_once() -> None:
    added = dt.datetime(2027, 1, 1, 1, 30, tzinfo=dt.UTC)
    row = WatchRow(id=1, preset="p", every="daily", at="02:00", queue="q", sets=(),
                   state="active", owner="U", channel=None, thread_ts=None, created_at=added)
    assert row.due_slot(added) is None  # 02:00 has not come yet
    first = dt.datetime(2027, 1, 1, 2, 0, tzinfo=dt.UTC)
    assert row.due_slot(first) == first
    ran = WatchRow(**{**row.__dict__, "last_slot": first})
    assert ran.due_slot(first + dt.timedelta(hours=23)) is None
    three_nights = first + dt.timedelta(days=3, hours=5)
    assert ran.due_slot(three_nights) == first + dt.timedelta(days=3)  # the latest, once
    paused = WatchRow(**{**row.__dict__, "state": "paused"})
    assert paused.due_slot(three_nights) is None


def test_weekly_and_hourly_slots() -> None:
    added = dt.datetime(2027, 1, 6, 12, 0, tzinfo=dt.UTC)  # a Wednesday
    weekly = parse_schedule("weekly", "05:30")
    assert weekly.next_slot(added, added=added) == dt.datetime(2027, 1, 13, 5, 30,
                                                               tzinfo=dt.UTC)
    six = parse_schedule("6h", None)
    assert six.next_slot(added, added=added) == dt.datetime(2027, 1, 6, 14, 0, tzinfo=dt.UTC)
    assert parse_schedule("hourly", "00:15").slot_at(
        added + dt.timedelta(minutes=50), added=added) == added + dt.timedelta(minutes=15)


@pytest.mark.parametrize(("every", "at", "says"), [
    ("30m", None, "a watch runs at most hourly"),
    ("59min", None, "at most hourly"),
    ("9d", None, "at least weekly"),
    ("90m", None, "whole hours"),
    ("monthly", None, "not an interval"),
    (None, "24:00", "not a time of day"),
    (None, "2am", "not a time of day"),
])
def test_bad_schedules_are_refused(every: str | None, at: str | None, says: str) -> None:
    with pytest.raises(UserError, match=says):
        parse_schedule(every, at)


# --- the series ---


def test_a_batchs_points_are_its_metric_its_slo_keys_and_its_accept_length() -> None:
    keys = judged_keys(metric="output_throughput", lower_is_better=False,
                       slo=["p99_ttft_ms"])
    assert [(k.name, k.lower_is_better) for k in keys] == [
        ("output_throughput", False), ("p99_ttft_ms", True), ("accept_length", False)]
    runs = [make_record("baseline", samples=(100.0, 104.0, 98.0),
                        extra={"metrics": {"output_throughput": [100.0, 104.0, 98.0],
                                           "p99_ttft_ms": [10.0, 12.0, 11.0],
                                           "accept_length": 2.5}}),
            make_record("broken", status="failed", samples=())]
    found = points_of(runs, keys=keys, at=T0, stack_of=lambda r: {"host": "h"},
                      load_label=lambda load: "")
    assert [(p.key.key, p.value, p.low, p.high) for p in found] == [
        ("output_throughput", 100.0, 98.0, 104.0), ("p99_ttft_ms", 11.0, 10.0, 12.0),
        ("accept_length", 2.5, 2.5, 2.5)]
    assert {p.key.approach for p in found} == {"baseline"}  # a failed run adds nothing


# --- detection ---


def test_the_stated_thresholds_are_the_calibrated_ones() -> None:
    """docs/contracts.md's table: t_crit (α = 0.001 two-sided) and the confirmation's k_conf
    (P(candidate and confirmation | noise) = α/2 · 5% per side), in old-segment sds."""
    for old_n, t_one, k_one in ((10, 5.01, 4.27), (20, 3.98, 2.63), (59, 3.50, 1.93)):
        t_crit, k_conf = thresholds(old_n=old_n, age=1, df=old_n - 1)
        assert round(t_crit * math.sqrt(1 + 1 / old_n), 2) == t_one
        assert round(k_conf, 2) == k_one


def test_noise_alone_raises_no_candidate() -> None:
    values = noise(40, seed=3)
    for n in range(1, 41):
        assert find_candidate(series(values[:n]), cuts=set(), min_effect_pct=2.0) is None


def test_a_step_at_the_newest_night_is_a_candidate_and_needs_five_points() -> None:
    values = noise(20, seed=4) + [90.0]
    candidate = find_candidate(series(values), cuts=set(), min_effect_pct=2.0)
    assert candidate is not None
    assert (candidate.since, candidate.last_good, candidate.age) == ("n20", "n19", 1)
    assert candidate.direction == -1 and candidate.effect_pct < -8.0
    assert find_candidate(series([100.0, 100.5, 99.5, 70.0]), cuts=set(),
                          min_effect_pct=2.0) is None  # four points: too few


def test_a_change_within_min_effect_is_no_candidate() -> None:
    values = [100.0 + 0.01 * (i % 2) for i in range(20)] + [98.5]  # far beyond a tiny noise
    assert find_candidate(series(values), cuts=set(), min_effect_pct=2.0) is None
    assert find_candidate(series(values), cuts=set(), min_effect_pct=1.0) is not None


def test_a_one_night_outlier_followed_by_a_return_is_no_change() -> None:
    values = noise(20, seed=5)
    values[15] = 80.0
    assert find_candidate(series(values[:16]), cuts=set(), min_effect_pct=2.0) is not None
    for n in range(17, 21):  # it came back: the library isolates it, nothing is raised
        assert find_candidate(series(values[:n]), cuts=set(), min_effect_pct=2.0) is None


def test_an_unconfirmed_step_is_raised_again_the_next_night() -> None:
    """A failed confirmation is no dismissal: the night's point stays as measured, and a real
    step comes back as a candidate of two nights."""
    values = noise(20, seed=6) + [90.0]
    first = find_candidate(series(values), cuts=set(), min_effect_pct=2.0)
    assert first is not None
    unlucky = settle(first, series=series(values), confirmation=point(99.5),
                     confirming_batch="c1", min_effect_pct=2.0)
    assert unlucky.state == BLIP
    values.append(90.5)
    again = find_candidate(series(values), cuts=set(), min_effect_pct=2.0)
    assert again is not None and again.age == 2 and again.since == "n20"
    confirmed = settle(again, series=series(values), confirmation=point(90.2),
                       confirming_batch="c2", min_effect_pct=2.0)
    assert confirmed.state == CONFIRMED


def test_a_confirmed_change_starts_a_new_segment_so_it_is_never_raised_again() -> None:
    values = noise(20, seed=7) + [90.0] + noise(10, seed=8, level=90.0)
    cut = {"n20"}
    for n in range(22, len(values) + 1):
        assert find_candidate(series(values[:n]), cuts=cut, min_effect_pct=2.0) is None
    assert find_candidate(series(values), cuts=set(), min_effect_pct=2.0) is None  # too old
    # the new segment borrows the old one's noise: a second step is found after 4 nights
    nxt = find_candidate(series([*values, 81.0]), cuts=cut, min_effect_pct=2.0)
    assert nxt is not None and nxt.since == f"n{len(values)}"


def test_the_confirmation_must_lie_on_the_new_side() -> None:
    values = noise(30, seed=9) + [90.0]
    candidate = find_candidate(series(values), cuts=set(), min_effect_pct=2.0)
    assert candidate is not None
    assert settle(candidate, series=series(values), confirmation=point(90.5),
                  confirming_batch="c", min_effect_pct=2.0).state == CONFIRMED
    for back in (101.0, 99.0, 110.0):
        assert settle(candidate, series=series(values), confirmation=point(back),
                      confirming_batch="c", min_effect_pct=2.0).state == BLIP
    assert settle(candidate, series=series(values), confirmation=None,
                  confirming_batch=None, min_effect_pct=2.0).state == BLIP


# --- the change, its stack and its texts ---


def test_a_confirmed_change_names_both_ranges_its_batches_and_the_stack_diff() -> None:
    stacks = [STACK] * 20 + [{**STACK, "sglang": "0.5.3", "torch": "2.9.0"}]
    values = noise(20, seed=10) + [90.0]
    s = series(values, stacks=stacks)
    candidate = find_candidate(s, cuts=set(), min_effect_pct=2.0)
    assert candidate is not None
    change = settle(candidate, series=s, confirmation=point(90.4), confirming_batch="c-1",
                    min_effect_pct=2.0)
    data = change.data
    assert data["before"]["batches"] == 20 and data["after"]["batches"] == 1
    assert data["after"]["low"] == 90.0 and data["after"]["high"] == 90.4
    assert data["direction"] == "regression" and not change.environment
    assert data["stack_diff"] == [{"key": "sglang", "before": "0.5.2", "after": "0.5.3"},
                                  {"key": "torch", "before": "2.8.0", "after": "2.9.0"}]
    text = headline(change)
    assert "sglang 0.5.2 → 0.5.3; torch 2.8.0 → 2.9.0" in text
    assert "first in batch n20, confirmed by c-1" in text
    assert change.bisect() == {"approach": "baseline", "key": "output_throughput", "load": "",
                               "before": data["before"]["value"], "after": 90.2,
                               "direction": "regression", "stack_diff": data["stack_diff"],
                               "environment": False,
                               "last_good": {"batch": "n19", "stack": STACK},
                               "first_bad": {"batch": "n20", "stack": stacks[-1]}}


def test_a_gpu_or_host_change_is_an_environment_change_and_lower_is_better_flips_it() -> None:
    assert is_environment(stack_diff(STACK, {**STACK, "gpu": "NVIDIA H100"}))
    assert is_environment(stack_diff(STACK, {**STACK, "host": "gpu-2"}))
    assert not is_environment(stack_diff(STACK, {**STACK, "driver": "580"}))
    assert stack_diff(STACK, {**STACK, "gpu_count": "8"}) == []  # 8 == "8"
    values = noise(20, seed=11) + [110.0]
    s = series(values, lower_is_better=True)
    candidate = find_candidate(s, cuts=set(), min_effect_pct=2.0)
    assert candidate is not None
    change = settle(candidate, series=s, confirmation=point(110.0), confirming_batch="c",
                    min_effect_pct=2.0)
    assert change.data["direction"] == "regression"  # a latency went up
    assert "same stack: the host or the workload changed" in headline(change)


def test_a_blips_line_and_each_keys_precision() -> None:
    values = noise(20, seed=12) + [88.0]
    candidate = find_candidate(series(values), cuts=set(), min_effect_pct=2.0)
    assert candidate is not None
    blip = settle(candidate, series=series(values), confirmation=point(100.0),
                  confirming_batch="c", min_effect_pct=2.0)
    assert outcome_text(blip).startswith(
        "output_throughput of baseline: not confirmed: a one-night blip (-")
    other = SeriesKey("fast", "output_throughput")
    changes = [Change(key=KEY, batch="a", state=CONFIRMED, data={"first_bad": {"batch": "a"}}),
               Change(key=KEY, batch="b", state=DISMISSED, data={"first_bad": {"batch": "b"}}),
               Change(key=KEY, batch="c", state=BLIP), Change(key=other, batch="d", state=BLIP)]
    assert precision(changes) == [
        {"approach": "baseline", "key": "output_throughput", "load": None, "confirmed": 2,
         "dismissed": 1, "blips": 1, "precision": 0.5},
        {"approach": "fast", "key": "output_throughput", "load": None, "confirmed": 0,
         "dismissed": 0, "blips": 1, "precision": None}]
    assert cuts_of(changes) == {KEY: {"a", "b"}}  # a dismissed change keeps its segment
