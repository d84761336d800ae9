"""The stacks room (docs/contracts.md "Stacks"), pure: the host's stacks file read and checked
with its lines named, stacks in version order, a bisection's batches and its answer, and an
upgrade check's judgement and one line."""

from __future__ import annotations

import math

import pytest

from jobs.core.rules import load_rules
from jobs.core.stacks import (
    Bisection,
    between,
    by_values,
    diff_text,
    needed,
    order_stacks,
    parse_stacks,
    run_bisection,
    stack_diff,
    summary_line,
    upgrade_section,
    watch_span,
    why_not_bisected,
)
from jobs.core.verdicts import Metric
from jobs.errors import StackError
from tests.conftest import FINGERPRINT, make_record

GOOD = """\
sglang-0.5.21: {engine: sglang, python: /opt/sglang-0.5.21/bin/python}
sglang-0.5.19:
  engine: sglang
  python: /opt/sglang-0.5.19/bin/python
  env: {CUDA_HOME: /usr/local/cuda-12.8, NCCL_DEBUG: WARN, RETRIES: 3}
vllm-0.33: {engine: vllm, python: /opt/vllm/bin/python}
"""


def test_a_stacks_file_reads_as_named_stacks_in_its_order() -> None:
    found = parse_stacks(GOOD, source="stacks.yaml")
    assert found.names() == ["sglang-0.5.21", "sglang-0.5.19", "vllm-0.33"]
    spec = found.get("sglang-0.5.19", engine="sglang")
    assert (spec.python, spec.line, spec.where) == ("/opt/sglang-0.5.19/bin/python", 2,
                                                     "stacks.yaml:2")
    assert spec.env == {"CUDA_HOME": "/usr/local/cuda-12.8", "NCCL_DEBUG": "WARN",
                        "RETRIES": "3"}
    assert [s.name for s in found.of_engine("vllm")] == ["vllm-0.33"]


@pytest.mark.parametrize(("text", "message"), [
    ("", "stacks.yaml: empty"),
    ("- a\n- b\n", "stacks.yaml:1: a stacks file is a mapping"),
    ("a: {engine: sglang\n", "stacks.yaml:2: not valid YAML"),
    ("ok: {engine: sglang, python: /p}\nbad name!: {engine: sglang, python: /p}\n",
     "stacks.yaml:2: stack name 'bad name!' is not a name"),
    ("a: {engine: sglang, python: /p}\na: {engine: sglang, python: /q}\n",
     "stacks.yaml:2: stack 'a' is named twice (first at line 1)"),
    ("a: {engine: sglang}\n", "stacks.yaml:1: stack 'a' has no python"),
    ("a:\n  engine: sglang\n  python: /p\n  pyhton: /q\n",
     "stacks.yaml:4: stack 'a' has an unknown key 'pyhton' (did you mean 'python'?)"),
    ("a: {engine: tensorrt, python: /p}\n", "stacks.yaml:1: stack 'a': unknown engine 'tensorrt'"),
    ("a: {engine: local, python: /p}\n", "stacks.yaml:1: stack 'a': the local engine runs inside"),
    ("a: {engine: sglang, python: 3}\n", "stacks.yaml:1: stack 'a': python must be a non-empty"),
    ("a: {engine: sglang, python: /p, env: [X]}\n", "stacks.yaml:1: stack 'a': env must be a"),
    ("a:\n  engine: sglang\n  python: /p\n  env: {1X: y}\n",
     "stacks.yaml:4: stack 'a': '1X' is no environment variable's name"),
    ("a: {engine: sglang, python: /p, env: {X: {y: 1}}}\n",
     "stacks.yaml:1: stack 'a': env X must be a text"),
])
def test_a_malformed_stacks_file_names_its_line(text: str, message: str) -> None:
    with pytest.raises(StackError) as caught:
        parse_stacks(text, source="stacks.yaml")
    assert str(caught.value).startswith(message), str(caught.value)
    assert "\n" not in str(caught.value)


def test_an_unknown_stack_or_one_of_another_engine_is_refused_by_name() -> None:
    found = parse_stacks(GOOD, source="stacks.yaml")
    with pytest.raises(StackError, match=r"unknown stack 'sglang-0.5.2'.*did you mean"):
        found.get("sglang-0.5.2")
    with pytest.raises(StackError, match="runs vllm, not sglang"):
        found.get("vllm-0.33", engine="sglang")


def test_stacks_order_by_engine_version_then_by_the_file() -> None:
    found = parse_stacks(
        "b: {engine: sglang, python: /b}\nd: {engine: sglang, python: /d}\n"
        "a: {engine: sglang, python: /a}\nc: {engine: sglang, python: /c}\n"
        "x: {engine: sglang, python: /x}\n")
    versions = {"a": "0.5.9", "b": "0.5.21", "c": "0.5.21", "d": "0.5.10", "x": None}
    ordered = order_stacks(found.stacks, versions=versions)
    assert [s.name for s in ordered] == ["a", "d", "b", "c", "x"]  # 9 < 10: numbers, not text
    assert [s.name for s in between(ordered, good="a", bad="c", versions=versions)] == [
        "d", "b", "c"]
    with pytest.raises(StackError, match=r"--from c \(version 0.5.21\) comes after --to d"):
        between(ordered, good="c", bad="d", versions=versions)
    with pytest.raises(StackError, match="same stack"):
        between(ordered, good="a", bad="a", versions=versions)


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 8, 9, 16, 33])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_bisection_finds_the_first_stack_in_at_most_ceil_log2_n_batches(count: int,
                                                                           seed: int) -> None:
    candidates = [f"s{i}" for i in range(count)]
    for first in range(count):
        measured: list[str] = []

        def measure(stack: str, first: int = first, seen: list[str] = measured) -> float:
            seen.append(stack)
            return 60.0 if candidates.index(stack) >= first else 82.0

        state = run_bisection(candidates, measure=measure,
                              judge=by_values(before=82.0, after=60.0))
        assert state.first == f"s{first}"
        assert len(measured) <= math.ceil(math.log2(count)) == state.max_batches
        assert len(set(measured)) == len(measured)  # no stack measured twice


def test_four_stacks_with_the_change_on_the_third_take_two_batches() -> None:
    state = Bisection(("s2", "s3", "s4"))  # s1 is good; the candidates after it, s4 bad
    assert state.next_stack() == "s3"
    state = state.measured("s3", has_change=True)
    assert state.next_stack() == "s2"
    state = state.measured("s2", has_change=False)
    assert (state.next_stack(), state.first, state.before("s1")) == (None, "s3", "s2")


def test_the_value_nearer_the_new_one_has_the_change() -> None:
    judge = by_values(before=82.0, after=60.0)
    assert (judge(59.0), judge(70.0), judge(72.0), judge(90.0)) == (True, True, False, False)


def test_a_stack_diff_and_what_a_bisection_would_need() -> None:
    old = {**FINGERPRINT, "sglang": "0.5.20"}
    new = {**FINGERPRINT, "sglang": "0.5.23", "torch": "2.9.0"}
    diff = stack_diff(old, new, engine="sglang")
    assert diff_text(diff) == "torch 2.8.0 → 2.9.0; sglang 0.5.20 → 0.5.23"
    assert needed(diff, version_of="sglang") == (
        "a stack with torch between 2.8.0 and 2.9.0, or one with sglang 0.5.21 or 0.5.22")
    next_one = stack_diff(old, {**old, "sglang": "0.5.21"}, engine="sglang")
    assert needed(next_one, version_of="sglang").startswith("nothing: the two stacks are "
                                                            "consecutive")
    far = stack_diff(old, {**old, "sglang": "0.6.1"}, engine="sglang")
    assert needed(far, version_of="sglang") == "a stack with sglang between 0.5.20 and 0.6.1"


def _watched(good: str, bad: str, **moved: tuple[str, str]) -> dict[str, object]:
    """A watch's change (`Change.bisect()`) from sglang `good` to `bad`, and whatever else moved."""
    old = {**FINGERPRINT, "engine": "sglang", "sglang": good, "host": "gpu-1"}
    new = {**old, "sglang": bad, **{k: v[1] for k, v in moved.items()}}
    old.update({k: v[0] for k, v in moved.items()})
    diff = [{"key": "sglang", "before": good, "after": bad}] + [
        {"key": k, "before": a, "after": b} for k, (a, b) in moved.items()]
    return {"approach": "eagle3", "key": "output_throughput", "load": "", "before": 82.0,
            "after": 60.0, "direction": "regression", "stack_diff": diff, "environment": False,
            "last_good": {"batch": "b-1", "stack": old},
            "first_bad": {"batch": "b-2", "stack": new}}


HOST = parse_stacks("".join(f"sglang-{v}: {{engine: sglang, python: /opt/{v}/bin/python}}\n"
                            for v in ("0.5.21", "0.5.23", "0.5.19", "0.5.20")))
PRINTS = {s.name: {**FINGERPRINT, "sglang": s.name.split("-")[1]} for s in HOST.stacks}
ORDERED = order_stacks(HOST.stacks, versions={n: f["sglang"] for n, f in PRINTS.items()})


def test_a_watch_change_lies_between_the_stacks_that_match_its_ends() -> None:
    span = watch_span(ORDERED, fingerprints=PRINTS, asked=_watched("0.5.19", "0.5.23"),
                      engine="sglang")
    assert (span.good, span.bad, span.inside) == ("sglang-0.5.19", "sglang-0.5.23",
                                                  ("sglang-0.5.20", "sglang-0.5.21"))
    assert span.candidates == ("sglang-0.5.20", "sglang-0.5.21", "sglang-0.5.23")
    assert span.needs is None and set(span.stacks) == {*span.candidates, span.good}
    # upgraded in place: neither end is in the file; each is named by its release and batch
    span = watch_span(ORDERED, fingerprints=PRINTS, asked=_watched("0.5.18", "0.5.22"),
                      engine="sglang")
    assert (span.good, span.bad) == ("sglang 0.5.18 (batch b-1)", "sglang 0.5.22 (batch b-2)")
    assert span.inside == ("sglang-0.5.19", "sglang-0.5.20", "sglang-0.5.21")
    assert span.stacks[span.bad]["sglang"] == "0.5.22"
    # a rollback: the stacks between in the order the change went
    back = watch_span(ORDERED, fingerprints=PRINTS, asked=_watched("0.5.23", "0.5.19"),
                      engine="sglang")
    assert back.inside == ("sglang-0.5.21", "sglang-0.5.20")


def test_with_none_between_a_watch_change_says_what_it_would_need() -> None:
    span = watch_span(ORDERED, fingerprints=PRINTS, asked=_watched("0.5.21", "0.5.23"),
                      engine="sglang")
    assert (span.inside, span.candidates) == ((), ("sglang-0.5.23",))
    assert span.needs == "a stack with sglang 0.5.22"
    torch = _watched("0.5.20", "0.5.20", torch=("2.8.0", "2.9.0"))
    torch["stack_diff"] = torch["stack_diff"][1:]  # type: ignore[index]
    span = watch_span(ORDERED, fingerprints=PRINTS, asked=torch, engine="sglang")
    assert span.inside == () and span.needs == "a stack with torch between 2.8.0 and 2.9.0"
    assert span.to_dict() == {"from": "sglang-0.5.20", "to": "sglang 0.5.20 (batch b-2)",
                              "stacks": [], "needs": span.needs}


def test_what_no_stack_can_explain_is_not_bisected() -> None:
    change = _watched("0.5.19", "0.5.23")
    assert why_not_bisected(change, engine="sglang") is None
    assert "has no stack diff" in str(why_not_bisected({**change, "stack_diff": []},
                                                       engine="sglang"))
    gpu = [{"key": "gpu", "before": "NVIDIA H100", "after": "NVIDIA H200"}]
    assert why_not_bisected({**change, "stack_diff": gpu, "environment": True},
                            engine="sglang") == (
        "it is an environment change (gpu NVIDIA H100 → NVIDIA H200), not a change of the stack")
    model = [{"key": "model_revision", "before": "4f1c", "after": "9a0b"}]
    assert "moved nothing a stack holds" in str(why_not_bisected(
        {**change, "stack_diff": model}, engine="sglang"))


def _pair(approach: str, old: list[float] | None, new: list[float] | None, *,
          new_tail: str = "", old_tail: str = "", extra: dict[str, str] | None = None,
          args: dict[str, object] | None = None) -> tuple[object, object]:
    before = make_record(approach, samples=old, status="ok" if old else "failed",
                         log_tail=old_tail, server_args=args, extra=extra,
                         fingerprint={**FINGERPRINT, "sglang": "0.5.20"})
    after = make_record(approach, samples=new, status="ok" if new else "failed",
                        log_tail=new_tail, server_args=args,
                        fingerprint={**FINGERPRINT, "sglang": "0.5.23", "torch": "2.9.0"})
    return before, after


def test_an_upgrade_check_judges_each_configuration_against_itself_and_says_so_in_a_line() -> None:
    removed = {"model-path": "/m", "enable-nccl-nvls": True}
    pairs = [
        _pair("baseline", [100.0, 101.0], [106.0, 106.5]),
        _pair("eagle3", [80.0, 80.1], [85.0, 85.1]),
        _pair("cuda-graph-max-bs-128", [90.0, 90.4], [86.4, 86.5]),
        _pair("eagle3-nccl-tree", [70.0, 70.2], None, args=removed,
              new_tail="launch_server.py: error: unrecognized arguments: --enable-nccl-nvls"),
        _pair("eagle3-torch-symm-mem", None, [95.0, 95.1],
              old_tail="launch_server.py: error: unrecognized arguments: --enable-torch-symm-mem",
              extra={"known_from": "b-old"}),
    ]
    old, new = [p[0] for p in pairs], [p[1] for p in pairs]
    found = upgrade_section(old, new, metric=Metric(), rules=load_rules(), engine="sglang",
                            current="sglang-0.5.20", against="sglang-0.5.23")
    outcomes = {r["approach"]: r["outcome"] for r in found["results"]}
    assert outcomes == {"baseline": "faster", "eagle3": "faster",
                        "cuda-graph-max-bs-128": "slower", "eagle3-nccl-tree": "breaks",
                        "eagle3-torch-symm-mem": "fixes"}
    assert found["summary"] == (
        "sglang-0.5.23 is faster for 2 of 3 configurations (eagle3 +6.2%), slower for "
        "cuda-graph-max-bs-128 (\u22124.2%), breaks eagle3-nccl-tree (bad-config: "
        "--enable-nccl-nvls was removed), and fixes eagle3-torch-symm-mem (failed before, "
        "runs now)")
    assert found["reopened"] == [{"approach": "eagle3-torch-symm-mem", "cause": "bad-config",
                                  "known_from": "b-old", "fixed": True, "now": None}]
    assert found["memory"] == (
        "sglang-0.5.23 re-opens 1 dead end of sglang-0.5.20 and fixes 1: eagle3-torch-symm-mem "
        "(bad-config, known from b-old): fixed")
    assert [d["key"] for d in found["stack_diff"]] == ["torch", "sglang"]


def test_the_line_of_an_upgrade_that_changes_nothing_or_only_breaks() -> None:
    calm = [{"approach": "a", "outcome": "unchanged", "delta_pct": 0.4, "why": ""}]
    assert summary_line(calm, against="new") == "new is unchanged for 1 of 1 configuration"
    broken = [{"approach": "a", "outcome": "breaks", "delta_pct": None,
               "why": "out-of-memory: it ran out"}]
    assert summary_line(broken, against="new") == "new breaks a (out-of-memory: it ran out)"


def test_an_upgrade_is_judged_level_by_level_where_there_are_loads() -> None:
    def levels(low: list[float], high: list[float]) -> dict[str, object]:
        return {"by_load": [
            {"load": {"max-concurrency": 1}, "metrics": {"output_throughput": low}},
            {"load": {"max-concurrency": 16}, "metrics": {"output_throughput": high}}]}

    old = make_record("eagle3", samples=[100.0, 101.0], extra=levels([100.0, 101.0],
                                                                     [200.0, 201.0]),
                      fingerprint={**FINGERPRINT, "sglang": "0.5.20"})
    new = make_record("eagle3", samples=[110.0, 111.0], extra=levels([110.0, 111.0],
                                                                     [180.0, 181.0]),
                      fingerprint={**FINGERPRINT, "sglang": "0.5.23"})
    found = upgrade_section([old], [new], metric=Metric(), rules=load_rules(), engine="sglang",
                            current="the current stack", against="sglang-0.5.23")
    (result,) = found["results"]
    assert result["outcome"] == "mixed"
    assert [(e["load"], e["verdict"]) for e in result["by_load"]] == [
        ({"max-concurrency": 1}, "improved"), ({"max-concurrency": 16}, "regressed")]
    assert found["summary"] == ("sglang-0.5.23 is mixed for eagle3 (improved up to "
                                "max-concurrency 1, regressed from 16)")
