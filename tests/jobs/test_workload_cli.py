"""Workloads through the real `specbench run` on the stand-in engines (issue 35, "Must show"):
a workload of three categories, in Spec-Bench's own record format, gives per-category verdicts
and a `mixed` verdict naming where it wins and loses, with one server start per configuration,
on SGLang and on vLLM; a speculative verdict on random token ids carries the caveat in text,
JSON and Slack, and the next steps offer the workload run.

One module batch: the three runs are made once and every test reads them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jobs.core.messages import render_report
from jobs.core.workloads import CAVEAT
from tests.builders import standin_preset
from tests.standin.harness import Standin, make_standin
from tests.standin.vllm_harness import make_vllm_standin

REPO = Path(__file__).resolve().parents[2]
CATEGORIES = ["conversation", "summarization", "code"]
# Spec-Bench's question.jsonl as it is: question_id, category, turns (two for MT-bench's)
QUESTIONS = [
    {"question_id": 81, "category": "conversation",
     "turns": ["Compose an engaging travel blog post about a recent trip to Hawaii.",
               "Rewrite your previous response. Start every sentence with the letter A."]},
    {"question_id": 82, "category": "conversation",
     "turns": ["Draft a professional email asking your supervisor for feedback on a report."]},
    {"question_id": 281, "category": "summarization",
     "turns": ["Summarize the following story in two sentences: a fox found a vineyard."]},
    {"question_id": 282, "category": "summarization",
     "turns": ["Summarize the main points of this article about tides and the moon."]},
    {"question_id": 121, "category": "code",
     "turns": ["Fix the bug in this function: def add(a, b): return a - b", "Now add tests."]},
    {"question_id": 122, "category": "code", "turns": ["Write def fib(n) iteratively."]},
    {"question_id": 361, "category": "qa", "turns": ["Who wrote Pride and Prejudice?"]},
]
# the stand-ins' acceptance and speculative gain by what a prompt asks (standin_traffic):
# summaries lose, code gains more than conversation (STANDIN_SPEC_GAIN, 0.4)
TRAFFIC = json.dumps({"Summarize": {"accept_length": 1.3, "spec_gain": -0.3},
                      "def ": {"accept_length": 3.5, "spec_gain": 0.5}})
EAGLE = {"STANDIN_SPEC_GAIN": "0.4", "STANDIN_ACCEPT_LENGTH": "2.6", "STANDIN_TRAFFIC": TRAFFIC}
NO_DATASET = {"dataset-name": None, "random-input-len": None, "random-output-len": None,
              "random-range-ratio": None, "num-prompts": None}
WORKLOAD = {"path": "spec-bench/question.jsonl", "categories": CATEGORIES, "per_category": 2,
            "output_len": 16}


@dataclass
class Ran:
    """The module's three batches: each report, the SGLang workload's records, the stand-ins."""

    workload: dict[str, Any]
    records: list[dict[str, Any]]
    synthetic: dict[str, Any]
    vllm: dict[str, Any]
    standin: Standin
    info: dict[str, Path]

    def notes(self, name: str, role: str) -> list[dict[str, Any]]:
        lines = self.info[name].read_text().splitlines() if self.info[name].exists() else []
        return [e for e in map(json.loads, lines) if e["role"] == role]


def _cli(args: list[str], *, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "bot.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=170)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _sglang_presets(tmp: Path, config: Path, info: dict[str, Path]) -> Path:
    workload = standin_preset(
        "wl-sglang", description="EAGLE-3 per task category on the stand-in", reps=2,
        bench=NO_DATASET, server_args={"enable-metrics": True}, workload=WORKLOAD,
        env={"STANDIN_STARTUP_S": "0.2", "STANDIN_INFO_FILE": str(info["sglang"])},
        approaches=[{"name": "eagle3", "hypothesis": "drafts cut the target's passes",
                     "server_args": {"speculative-algorithm": "EAGLE3",
                                     "speculative-draft-model-path": "/models/d"},
                     "env": EAGLE}])
    synthetic = standin_preset(
        "wl-random", description="EAGLE-3 on random token ids", reps=2, warmup=False,
        env={"STANDIN_STARTUP_S": "0.2", "STANDIN_INFO_FILE": str(info["random"])},
        approaches=[{"name": "eagle3", "hypothesis": "drafts cut the target's passes",
                     "server_args": {"speculative-algorithm": "EAGLE3",
                                     "speculative-draft-model-path": "/models/d"},
                     "env": {"STANDIN_SPEC_GAIN": "0.4"}}])
    (config / "presets" / "wl-random.yaml").write_text(synthetic)
    (config / "presets" / "wl-random-workload.yaml").write_text(
        workload.replace("name: wl-sglang\n", "name: wl-random-workload\n"))
    path = tmp / "wl-sglang.yaml"
    path.write_text(workload)
    return path


VLLM_PRESET = """name: wl-vllm
engine: vllm
metric: output_throughput
reps: 2
warmup: false
timeouts: {{startup_s: 60, bench_s: 60}}
bench: {{max-concurrency: 1, temperature: 0.0}}
workload: {workload}
baseline:
  server_args: {{model: /models/tiny}}
  env: {{STANDIN_STARTUP_S: "0.2", STANDIN_THROUGHPUT: "120", STANDIN_INFO_FILE: "{info}"}}
approaches:
  - name: eagle3
    hypothesis: drafts cut the target's passes
    server_args:
      speculative-config: {{method: eagle3, model: /models/d, num_speculative_tokens: 3}}
    env: {eagle}
"""


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ran]:
    tmp = tmp_path_factory.mktemp("workloads")
    with pytest.MonkeyPatch.context() as monkeypatch:
        make_vllm_standin(tmp, monkeypatch)
        standin = make_standin(tmp, monkeypatch)
        info = {name: tmp / f"{name}-info.jsonl" for name in ("sglang", "random", "vllm")}
        folder = tmp / "data" / "workloads" / "spec-bench"
        folder.mkdir(parents=True)
        (folder / "question.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
        config = tmp / "config"
        shutil.copytree(REPO / "config", config)
        env = {**os.environ, "SPECBENCH_CONFIG_DIR": str(config), "STANDIN_TAG": standin.tag,
               "PYTHONPATH": os.pathsep.join((os.environ["PYTHONPATH"], str(REPO)))}
        env.pop("SPECBENCH_BROKER_URL", None)
        path = _sglang_presets(tmp, config, info)
        vllm = tmp / "wl-vllm.yaml"
        vllm.write_text(VLLM_PRESET.format(workload=json.dumps(WORKLOAD), info=info["vllm"],
                                           eagle=json.dumps(EAGLE)))
        workload = json.loads(_cli(["run", str(path), "--format", "json"], cwd=tmp,
                                   env=env).stdout)
        records = [json.loads(line) for line in _cli(
            ["show", "--format", "jsonl"], cwd=tmp, env=env).stdout.splitlines()]
        synthetic = json.loads(_cli(["run", "wl-random", "--format", "json"], cwd=tmp,
                                    env=env).stdout)
        on_vllm = json.loads(_cli(["run", str(vllm), "--format", "json"], cwd=tmp,
                                  env=env).stdout)
        yield Ran(workload, records, synthetic, on_vllm, standin, info)
        standin.assert_clean()


def _result(report: dict[str, Any], name: str = "eagle3") -> dict[str, Any]:
    return next(r for r in report["results"] if r["approach"] == name)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_three_categories_give_per_category_verdicts_and_a_mixed_one(ran: Ran,
                                                                     engine: str) -> None:
    report = ran.workload if engine == "sglang" else ran.vllm
    eagle = _result(report)
    assert [(e["category"], e["verdict"]) for e in eagle["by_category"]] == [
        ("conversation", "improved"), ("summarization", "regressed"), ("code", "improved")]
    assert eagle["verdict"] == "mixed"
    assert eagle["why"].startswith(
        "improved on conversation and code, regressed on summarization: "), eagle["why"]
    assert eagle["crossover"] == {"improved": ["conversation", "code"],
                                  "regressed": ["summarization"],
                                  "text": eagle["why"].split(": ", 1)[0]}
    accept = {e["category"]: e["accept_length"] for e in eagle["by_category"]}
    assert accept["summarization"] < accept["conversation"] < accept["code"], accept
    assert [e["category"] for e in report["baseline"]["by_category"]] == CATEGORIES
    assert [c["category"] for c in report["workload"]["categories"]] == CATEGORIES
    assert "caveat" not in eagle  # measured on the workload, not on random ids
    adopt = next(s for s in report["next_steps"] if s["kind"] == "adopt")
    assert adopt["action"] == ("Adopt eagle3 for conversation and code traffic; keep the "
                               "baseline for summarization")
    # one server start per configuration; (SGLang's) a warm-up and two repetitions per category
    assert len(ran.notes(engine, "server")) == 2
    assert len(ran.notes(engine, "bench")) == 2 * 3 * ((engine == "sglang") + 2)


@pytest.mark.timeout(300)
def test_the_records_keep_each_category_and_the_bench_read_spec_bench_as_it_is(ran: Ran) -> None:
    by_name = {r["approach"]: r for r in ran.records}
    eagle = by_name["eagle3"]
    assert [e["category"] for e in eagle["by_category"]] == CATEGORIES
    for entry in eagle["by_category"]:
        assert {"category", "metrics", "server_metrics"} <= set(entry)
        assert entry["prompts"] == 2 and len(entry["metrics"]["output_throughput"]) == 2
        assert entry["server_metrics"]["accept_length"] > 1.0
    assert eagle["prompts"] == {"dataset": "workload", "synthetic": False}
    assert eagle["workload"]["path"].endswith("workloads/spec-bench/question.jsonl")
    # the top-level figures are the categories' mean, repetition by repetition
    means = [sum(e["metrics"]["output_throughput"][i] for e in eagle["by_category"]) / 3
             for i in range(2)]
    assert eagle["metrics"]["output_throughput"] == pytest.approx(means)


@pytest.mark.timeout(300)
def test_every_surface_names_where_it_wins_and_loses(ran: Ran) -> None:
    text = render_report(ran.workload, "text")
    assert ("Workload: conversation, summarization and code (2 prompts each) from "
            "question.jsonl") in text
    assert "improved on conversation and code, regressed on summarization" in text
    assert "summarization regressed -" in text and "(accept 1." in text
    slack = render_report(ran.workload, "slack")
    assert "improved on conversation and code, regressed on summarization" in slack
    assert "conversation improved +" in slack


@pytest.mark.timeout(300)
def test_speculation_on_random_ids_carries_the_caveat_everywhere(ran: Ran) -> None:
    eagle = _result(ran.synthetic)
    assert eagle["verdict"] == "improved"
    assert eagle["caveat"] == CAVEAT == "on random token ids: acceptance on real traffic may differ"
    assert CAVEAT in eagle["why"]
    assert CAVEAT in render_report(ran.synthetic, "text")
    assert CAVEAT in render_report(ran.synthetic, "slack")
    (step,) = [s for s in ran.synthetic["next_steps"] if s["kind"] == "workload"]
    assert "run wl-random-workload" in step["action"] and step["approach"] == "eagle3"
    kinds = [s["kind"] for s in ran.synthetic["next_steps"]]
    assert kinds.index("workload") == len(kinds) - 2  # before accept, after the others
