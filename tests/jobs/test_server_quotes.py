"""The engine's own figures in a why (jobs/core/server_quotes.py; issue 24, item 4)."""

from __future__ import annotations

import dataclasses
from typing import Any

from jobs.core.advice import analyze, load_remedies
from jobs.core.records import RunRecord
from jobs.core.rules import load_rules
from jobs.core.verdicts import (
    Metric,
    Verdict,
    accept_fell_sentence,
    is_memory_change,
    kv_full_sentence,
    server_sentences,
)
from tests.conftest import make_record

REGRESSED = Verdict("regressed", None, 90.0, -10.0, "output_throughput fell 10%")
IMPROVED = Verdict("improved", None, 110.0, 10.0, "output_throughput rose 10%")
OOM = Verdict("failed", "out-of-memory", None, None, "the server ran out of memory")


def sm(**figures: Any) -> dict[str, Any]:
    """A record's `server_metrics` as jobs.engines.server_metrics.summarize writes it."""
    return {"repetitions": [{"rep": 1, "polls": 9, "errors": 0, **figures}], "polls": 9,
            "errors": 0, **figures}


def rec(approach: str, *, parent: str | None = None, change: dict[str, Any] | None = None,
        samples: tuple[float, ...] = (100.0, 100.0, 100.0), **figures: Any) -> RunRecord:
    extra = {"server_metrics": sm(**figures)} if figures else None
    return make_record(approach, parent=parent, samples=samples,
                       change={"server_args": change or {}}, extra=extra)


def test_a_full_kv_cache_is_quoted_for_a_regressed_run_with_its_queue_and_the_baseline() -> None:
    base = rec("baseline", kv_cache_usage_max=0.62, queued_max=0.0)
    bigger = rec("more-seqs", kv_cache_usage_max=1.0, queued_max=14.0, running_max=64.0)
    assert kv_full_sentence(bigger, REGRESSED, {"baseline": base}) == (
        "the KV cache was full (100%) during its runs, with up to 14 requests queued "
        "(baseline's peaked at 62%)")
    # a cache that was full on the baseline too explains nothing new: no comparison quoted
    full_base = rec("baseline", kv_cache_usage_max=0.995)
    assert kv_full_sentence(bigger, REGRESSED, {"baseline": full_base}) == (
        "the KV cache was full (100%) during its runs, with up to 14 requests queued")


def test_a_full_kv_cache_is_quoted_for_a_memory_knob_even_when_it_improved() -> None:
    knob = rec("mem-0.95", change={"mem_fraction_static": 0.95}, kv_cache_usage_max=0.99)
    other = rec("eagle3", change={"speculative-algorithm": "EAGLE3"}, kv_cache_usage_max=0.99)
    assert is_memory_change(knob, IMPROVED) and not is_memory_change(other, IMPROVED)
    assert kv_full_sentence(knob, IMPROVED, {}) == "the KV cache was full (99%) during its runs"
    assert kv_full_sentence(other, IMPROVED, {}) is None  # full, but not what it changed
    vllm = dataclasses.replace(rec("seqs", change={"max-num-seqs": 512}, kv_cache_usage_max=1.0),
                               engine="vllm")
    assert is_memory_change(vllm, IMPROVED)  # the engine's own memory knobs


def test_a_run_that_failed_for_memory_quotes_its_full_cache_in_the_report() -> None:
    died = make_record("mem-0.97", status="failed", samples=None,
                       change={"server_args": {"mem-fraction-static": 0.97}},
                       extra={"server_metrics": sm(kv_cache_usage_max=1.0, queued_max=8.0)})
    assert server_sentences(died, OOM, {}) == [
        "the KV cache was full (100%) during its runs, with up to 8 requests queued"]
    report = analyze([rec("baseline", kv_cache_usage_max=0.4), died], metric=Metric(),
                     rules=load_rules(), remedies=load_remedies(), engine="sglang")
    (result,) = report["results"]
    assert result["verdict"] == "failed"
    assert result["why"].endswith("; the KV cache was full (100%) during its runs, with up to 8 "
                                  "requests queued (baseline's peaked at 40%)")


def test_a_cache_short_of_full_is_not_quoted() -> None:
    assert kv_full_sentence(rec("a", kv_cache_usage_max=0.97, queued_max=5.0), REGRESSED,
                            {}) is None


def test_a_fallen_acceptance_rate_is_quoted_against_the_parent() -> None:
    parent = rec("eagle3", accept_rate=0.62, accept_length=2.86)
    child = rec("eagle3-steps-5", parent="eagle3", accept_rate=0.41, accept_length=3.05)
    assert accept_fell_sentence(child, {"eagle3": parent}) == (
        "its acceptance rate fell to 0.41 from eagle3's 0.62")
    # under 10% lower is noise, not a fall; the rate is the figure when both have it
    close = rec("eagle3-b", parent="eagle3", accept_rate=0.57, accept_length=2.0)
    assert accept_fell_sentence(close, {"eagle3": parent}) is None


def test_without_a_rate_the_accept_length_is_compared() -> None:
    parent = rec("eagle3", accept_length=2.71)
    child = rec("eagle3-topk", parent="eagle3", accept_length=2.2)
    assert accept_fell_sentence(child, {"eagle3": parent}) == (
        "its accept length fell to 2.20 from eagle3's 2.71")
    assert accept_fell_sentence(child, {}) is None  # no parent record: nothing to compare


def test_nothing_is_quoted_without_server_metrics() -> None:
    parent = rec("eagle3", accept_rate=0.62)
    bare = make_record("eagle3-b", parent="eagle3")
    assert server_sentences(bare, REGRESSED, {"eagle3": parent}) == []
    assert accept_fell_sentence(parent, {"eagle3": bare}) is None


def test_the_report_s_why_quotes_them_after_the_verdict() -> None:
    records = [
        rec("baseline", kv_cache_usage_max=0.5),
        rec("eagle3", change={"speculative-algorithm": "EAGLE3"}, samples=(130.0,) * 3,
            accept_rate=0.6, kv_cache_usage_max=0.6),
        rec("eagle3-long", parent="eagle3", samples=(120.0,) * 3,
            change={"speculative-algorithm": "EAGLE3", "speculative-num-steps": 6},
            accept_rate=0.3, kv_cache_usage_max=0.7),
        rec("mem-0.95", change={"mem-fraction-static": 0.95}, samples=(80.0,) * 3,
            kv_cache_usage_max=1.0, queued_max=30.0),
    ]
    report = analyze(records, metric=Metric(), rules=load_rules(), remedies=load_remedies(),
                     engine="sglang")
    why = {r["approach"]: r["why"] for r in report["results"]}
    assert why["eagle3-long"].endswith("; its acceptance rate fell to 0.30 from eagle3's 0.60")
    assert why["mem-0.95"].endswith("; the KV cache was full (100%) during its runs, with up to "
                                    "30 requests queued (baseline's peaked at 50%)")
    assert "KV cache" not in why["eagle3"] and "fell to" not in why["eagle3"]
    bare = analyze([make_record(r.approach, parent=r.parent, change=r.change,
                                samples=tuple(r.samples("output_throughput")))
                    for r in records], metric=Metric(), rules=load_rules(),
                   remedies=load_remedies(), engine="sglang")
    assert not any("KV cache" in r["why"] or "fell to" in r["why"] for r in bare["results"])
