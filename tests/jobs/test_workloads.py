"""Workloads in the core (issue 35): the file read and checked (each problem naming the file and
the line), each category as the engines' bench clients read it, a preset's workload against the
rest of it, the verdict per category and `mixed` across them, and the prompts a run was measured
on. The whole path through the CLI and the stand-ins is tests/jobs/test_workload_cli.py."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from jobs.batches.execution import execute_batch
from jobs.batches.planning import submit
from jobs.core.events import LocalChannel
from jobs.core.plans import parse_preset
from jobs.core.records import RunRecord
from jobs.core.rules import load_rules
from jobs.core.verdicts import Metric
from jobs.core.workloads import (
    Category,
    category_bench,
    input_text,
    judge,
    mean_metrics,
    parse_workload,
    prompts_of,
    read_workload,
)
from jobs.engines.sglang.engine import SGLangEngine
from jobs.errors import PresetError, WorkloadError
from jobs.store import Store
from tests.conftest import make_record
from tests.standin.harness import make_standin

SPEC_BENCH = (
    '{"question_id": 81, "category": "writing", "turns": ["Write a blog post.", "Shorter."]}\n'
    '{"question_id": 121, "category": "coding", "turns": ["def f(): fix it"]}\n'
    '\n'
    '{"category": "writing", "prompt": "A limerick, please."}\n'
    '{"question_id": 122, "category": "coding", "turns": ["Write def g()."], "x": 1}\n'
)


def test_spec_benchs_format_reads_as_it_is_and_prompt_lines_beside_it() -> None:
    found = parse_workload(SPEC_BENCH.encode(), source="q.jsonl")
    assert found == {"writing": ["Write a blog post.", "A limerick, please."],
                     "coding": ["def f(): fix it", "Write def g()."]}


@pytest.mark.parametrize(("text", "message"), [
    ('{"category": "a", "prompt": "x"}\nnot json\n', "q.jsonl:2: not valid JSON (Expecting value"),
    ('{"prompt": "hello"}\n', 'q.jsonl:1: no category (each line needs "category": a name)'),
    ('{"category": " ", "prompt": "hello"}\n', "q.jsonl:1: no category"),
    ('\n{"category": "a"}\n', 'q.jsonl:2: no prompt (each line needs "prompt": text, or "turns"'),
    ('{"category": "a", "turns": []}\n', "q.jsonl:1: no prompt"),
    ('["a", "b"]\n', "q.jsonl:1: a workload line is a JSON object"),
    ("\n\n", "q.jsonl: no prompts at all"),
])
def test_a_line_that_is_no_prompt_of_a_category_names_the_file_and_line(text: str,
                                                                         message: str) -> None:
    with pytest.raises(WorkloadError) as caught:
        parse_workload(text.encode(), source="q.jsonl")
    assert message in str(caught.value)


def test_bytes_that_are_not_utf8_name_the_line() -> None:
    with pytest.raises(WorkloadError, match=r"q.jsonl:2: not UTF-8 \(byte 0xff at column 14\)"):
        parse_workload(b'{"category": "a", "prompt": "x"}\n{"category": \xff}\n', source="q.jsonl")


def test_the_file_the_categories_and_the_prompts_of_each(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("SPECBENCH_DATA_DIR", str(data))
    (data / "workloads").mkdir(parents=True)
    (data / "workloads" / "q.jsonl").write_text(SPEC_BENCH)
    found = read_workload({"path": "q.jsonl", "per_category": 1, "output_len": 64})
    assert [(c.name, c.prompts, c.available) for c in found.categories] == [
        ("writing", ("Write a blog post.",), 2), ("coding", ("def f(): fix it",), 2)]
    assert found.path == str(data / "workloads" / "q.jsonl") and len(found.sha256) == 64
    picked = read_workload({"path": "q.jsonl", "categories": ["coding"]})
    assert [c.name for c in picked.categories] == ["coding"] and picked.output_len == 256
    with pytest.raises(WorkloadError, match=r"q.jsonl: category 'rag' \(workload.categories\) "
                                            r"has no prompts; the file's categories: writing, "
                                            r"coding"):
        read_workload({"path": "q.jsonl", "categories": ["coding", "rag"]})
    with pytest.raises(WorkloadError, match=r"workloads/none.jsonl: no such file \(a relative "
                                            r"workload.path is under SPECBENCH_DATA_DIR"):
        read_workload({"path": "none.jsonl"})
    # a name the config dir ships is found there when the data dir has none of that name
    shipped = read_workload({"path": "small.jsonl", "per_category": 16})
    assert [(c.name, len(c.prompts)) for c in shipped.categories] == [
        ("conversation", 4), ("summarization", 4), ("code", 4)]
    assert shipped.path.endswith("config/workloads/small.jsonl")


CATEGORY = Category("code", ("def f(): fix it", "Write def g()."), 2)


def test_each_category_as_the_bench_clients_read_it(tmp_path: Path) -> None:
    sharegpt = json.loads(input_text("sharegpt", CATEGORY))
    assert [[turn["value"] for turn in row["conversations"]] for row in sharegpt] == [
        ["def f(): fix it", ""], ["Write def g().", ""]]
    lines = [json.loads(line) for line in input_text("spec-bench", CATEGORY).splitlines()]
    assert lines == [{"question_id": 1, "category": "code", "turns": ["def f(): fix it"]},
                     {"question_id": 2, "category": "code", "turns": ["Write def g()."]}]
    assert category_bench({"max-concurrency": 1}, engine="sglang", path="/x/code.json",
                          category=CATEGORY, output_len=64) == {
        "max-concurrency": 1, "dataset-name": "sharegpt", "apply-chat-template": True,
        "dataset-path": "/x/code.json", "sharegpt-output-len": 64, "num-prompts": 2}
    assert category_bench({}, engine="vllm", path="/x/code.jsonl", category=CATEGORY,
                          output_len=64) == {
        "dataset-name": "spec_bench", "dataset-path": "/x/code.jsonl",
        "spec-bench-output-len": 64, "spec-bench-category": "code", "num-prompts": 2}


PRESET = """name: wl
engine: {engine}
baseline: {{server_args: {args}}}
approaches: [{{name: a, server_args: {{x: 1}}}}]
workload: {{path: q.jsonl, categories: [a, b]}}
"""


@pytest.mark.parametrize(("engine", "extra", "message"), [
    ("sglang", "bench: {dataset-name: random-ids, random-input-len: 8}",
     "wl.yaml:6: key 'bench.dataset-name': 'random-ids' is a synthetic dataset and the preset "
     "names a workload"),
    ("vllm", "bench: {num-prompts: 8}", "wl.yaml:6: key 'bench.num-prompts': the workload sets "
                                        "the prompts"),
    ("sglang", "bench: {random-output-len: 8}", "key 'bench.random-output-len': the workload"),
    ("sglang", "loads: {max-concurrency: [1, 4]}", "wl.yaml:6: key 'loads': a preset with a "
                                                   "workload is judged per category"),
    ("sglang", "slo: {p99_ttft_ms: 100}", "key 'slo': a preset with a workload"),
    ("local", "", "wl.yaml:5: key 'workload': the local engine's benchmark reads no workload; "
                  "one whose does: sglang, vllm"),
])
def test_a_workload_with_what_it_excludes_is_refused(engine: str, extra: str,
                                                     message: str) -> None:
    args = "{hidden-size: 64}" if engine == "local" else "{model: /m, model-path: /m}"
    text = PRESET.format(engine=engine, args=args) + extra + "\n"
    with pytest.raises(PresetError) as caught:
        parse_preset(text, source="wl.yaml", stem="wl")
    assert message in str(caught.value)


def test_categories_empty_or_repeated_are_refused() -> None:
    text = PRESET.format(engine="sglang", args="{model-path: /m}")
    for given, message in (("[]", "key 'workload.categories' is empty"),
                           ("[a, b, a]", "key 'workload.categories' lists a more than once")):
        with pytest.raises(PresetError, match=message):
            parse_preset(text.replace("[a, b]", given), source="wl.yaml", stem="wl")


def _run(approach: str, by_category: list[tuple[str, list[float], str]], *,
         status: str = "ok") -> RunRecord:
    entries: list[dict[str, Any]] = [
        {"category": name, "prompts": 4, "status": state,
         "metrics": {"output_throughput": values, "accept_length": 2.0}}
        for name, values, state in by_category]
    return make_record(approach, samples=mean_metrics(entries).get("output_throughput", []),
                       status=status, extra={"by_category": entries})


BASE = _run("baseline", [("chat", [100.0, 101.0], "ok"), ("code", [100.0, 101.0], "ok"),
                         ("sums", [100.0, 101.0], "ok")])


def test_a_result_that_wins_on_some_categories_and_loses_on_others_is_mixed() -> None:
    ours = _run("eagle3", [("chat", [120.0, 121.0], "ok"), ("code", [130.0, 131.0], "ok"),
                           ("sums", [80.0, 81.0], "ok")])
    verdict = judge(ours, BASE, metric=Metric(), rules=load_rules())
    assert verdict.verdict == "mixed"
    assert verdict.why == ("improved on chat and code, regressed on sums: chat +19.9%, code "
                           "+29.9%, sums -19.9%")
    assert [(e["category"], e["verdict"]) for e in verdict.categories] == [
        ("chat", "improved"), ("code", "improved"), ("sums", "regressed")]
    assert (verdict.value, verdict.delta_pct) == (110.5, 10.0)  # the categories' mean's
    same = _run("same", [("chat", [101.0, 100.0], "ok"), ("code", [100.0, 101.0], "ok"),
                         ("sums", [130.0, 131.0], "ok")])
    found = judge(same, BASE, metric=Metric(), rules=load_rules())
    assert found.verdict == "improved"
    assert found.why.startswith("improved on sums, unchanged on chat and code: ")


def test_a_failure_of_the_run_decides_alone() -> None:
    ours = _run("oom", [("chat", [120.0, 121.0], "ok"), ("code", [], "failed"),
                        ("sums", [], "skipped")], status="failed")
    verdict = judge(ours, BASE, metric=Metric(), rules=load_rules())
    assert verdict.verdict == "failed"
    assert [e["verdict"] for e in verdict.categories] == ["improved", "failed", "skipped"]


def test_the_prompts_a_run_was_measured_on() -> None:
    assert prompts_of({"dataset-name": "random-ids"}, engine="sglang", workload=False) == {
        "dataset": "random-ids", "synthetic": True}
    assert prompts_of({}, engine="sglang", workload=False) == {"dataset": "sharegpt",
                                                              "synthetic": False}
    assert prompts_of({}, engine="vllm", workload=False) == {"dataset": "random",
                                                            "synthetic": True}
    assert prompts_of({}, engine="vllm", workload=True) == {"dataset": "workload",
                                                           "synthetic": False}


def test_a_worker_whose_host_cannot_use_the_workload_refuses_the_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Distributed mode: the bot's host has no workload to read, the worker that takes the batch
    does, and a file it cannot use ends the batch `refused` with the line, no server started."""
    standin = make_standin(tmp_path, monkeypatch)
    plan = dataclasses.replace(
        standin.plan(standin.config("baseline", role="baseline"), standin.config("eagle3")),
        workload={"path": "traffic.jsonl", "categories": None, "per_category": 2,
                  "output_len": 8})
    store = Store(f"sqlite:///{tmp_path}/store.db")
    row, _ = submit(plan, store=store, requested_by="tester")
    execute_batch(row.id, store=store, sink=LocalChannel(), engine=SGLangEngine())
    found = store.get_batch(row.id)
    assert found is not None and found.state == "refused"
    assert "workloads/traffic.jsonl: no such file" in str(found.error)
    assert standin.notes("server") == [] and store.records(row.id) == []
