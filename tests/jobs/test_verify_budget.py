"""The verify-time budget with evidence: the seed's sentence measured (issue 24, item 3)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from jobs.core.records import RunRecord, parse_lines
from jobs.core.verdicts import budget_sentence, slower_sentence, with_comm

SEED = Path(__file__).resolve().parents[2] / "docs" / "examples" / "seed-session.jsonl"


def seed() -> dict[str, RunRecord]:
    return {r.approach: r for r in parse_lines(SEED.read_text().splitlines())}


def with_evidence(record: RunRecord, latency_us: float) -> RunRecord:
    evidence = {"model": {"layers": 61, "hidden_size": 7168, "dtype_bytes": 2},
                "allreduce": {"backend": "nccl", "world": 8, "bytes": 57344,
                              "latency_us": latency_us, "busbw_gbps": 0.4, "env": {}},
                "allreduces": 122}
    return dataclasses.replace(record, extra={**record.extra, "evidence": evidence})


def test_the_seeds_records_with_evidence_give_the_articles_sentence() -> None:
    eagle3 = with_evidence(seed()["eagle3"], 250.0)
    break_even = with_comm({"now_ms": 48.2, "needed_ms": 31.8}, eagle3)
    assert break_even == {"now_ms": 48.2, "needed_ms": 31.8, "allreduces": 122, "comm_ms": 30.5}
    text = budget_sentence(break_even, eagle3)
    assert text is not None
    assert text.startswith("122 all-reduces × 0.25 ms = 30.5 ms of a 48.2 ms cycle; "
                           "it must take ≤ 31.8 ms")
    assert "most of the cycle" in text


def test_without_evidence_nothing_changes() -> None:
    eagle3 = seed()["eagle3"]
    assert with_comm({"now_ms": 48.2, "needed_ms": 31.8}, eagle3) == {"now_ms": 48.2,
                                                                      "needed_ms": 31.8}
    assert budget_sentence({"now_ms": 48.2, "needed_ms": 31.8}, eagle3) is None


def test_a_slower_all_reduce_than_its_parent_names_pcie_contention() -> None:
    records = seed()
    parent = with_evidence(records["eagle3"], 250.0)
    fewer = with_evidence(records["eagle3-nccl-fewer-channels"], 310.0)
    text = slower_sentence(fewer, {"eagle3": parent})
    assert text == ("its all-reduce takes 0.31 ms, 24% slower than eagle3's 0.25 ms: over PCIe "
                    "the ranks contend for the link")
    assert slower_sentence(parent, {"eagle3": fewer}) is None
    assert json.dumps(fewer.to_dict())  # the evidence round-trips in the record


def test_the_seed_report_with_evidence_explains_the_cycle_and_cuts_communication_first() -> None:
    from jobs.core.advice import analyze, load_remedies
    from jobs.core.rules import load_rules
    from jobs.core.verdicts import Metric

    records = seed()
    latency = {"baseline": 240.0, "eagle3": 250.0, "eagle3-custom-allreduce": 250.0,
               "eagle3-nccl-fewer-channels": 310.0}
    shown = [with_evidence(r, latency[r.approach]) if r.approach in latency else r
             for r in records.values()]
    report = analyze(shown, metric=Metric(), rules=load_rules(), remedies=load_remedies(),
                     engine="sglang")
    results = {r["approach"]: r for r in report["results"]}
    eagle3 = results["eagle3"]
    assert eagle3["break_even"] == {"now_ms": 48.2, "needed_ms": 31.8, "allreduces": 122,
                                    "comm_ms": 30.5}
    assert ("122 all-reduces × 0.25 ms = 30.5 ms of a 48.2 ms cycle; it must take ≤ 31.8 ms"
            in eagle3["why"])
    fewer = results["eagle3-nccl-fewer-channels"]["why"]
    assert "its all-reduce takes 0.31 ms, 24% slower than eagle3's 0.25 ms: over PCIe" in fewer
    steps = [s for s in report["next_steps"] if s["kind"] == "remedy"]
    cut = [s for s in steps if s["action"].startswith("Cut communication first")]
    assert cut and "eagle3" in cut[0]["approach"] and "30.5 ms of the 31.8 ms" in cut[0]["action"]
    verify = next(i for i, s in enumerate(steps) if s["action"].startswith("Cut the verify"))
    assert steps.index(cut[0]) < verify  # communication first
    assert not any(s["action"].startswith("Draft longer") for s in steps)


def test_without_evidence_the_seed_report_is_unchanged() -> None:
    from jobs.core.advice import analyze, load_remedies
    from jobs.core.rules import load_rules
    from jobs.core.verdicts import Metric

    report = analyze(list(seed().values()), metric=Metric(), rules=load_rules(),
                     remedies=load_remedies(), engine="sglang")
    assert not any("all-reduce" in r["why"] for r in report["results"])
    assert not any(s["action"].startswith(("Cut communication", "Draft longer"))
                   for s in report["next_steps"])


def test_an_engine_of_one_process_is_told_what_a_split_would_add() -> None:
    eagle3 = with_evidence(seed()["eagle3"], 250.0)
    eagle3 = dataclasses.replace(eagle3, extra={**eagle3.extra, "evidence": {
        **eagle3.extra["evidence"], "split": True}})
    even = {"now_ms": 48.2, "needed_ms": 31.8}
    assert with_comm(even, eagle3) == even  # no all-reduce in its cycle today
    assert budget_sentence(even, eagle3) == (
        "split over ranks, its cycle would add 122 all-reduces × 0.25 ms = 30.5 ms to its "
        "48.2 ms (it must take ≤ 31.8 ms)")
    assert slower_sentence(eagle3, {"baseline": eagle3}) is None
