"""Stacks (issue 37, docs/contracts.md "Stacks") through the real CLI and console, on a host that
keeps several stand-in engine environments side by side (tests/standin/stacks.py): an upgrade
check on eagle3 and on eagle3-vllm, faster for some configurations, slower for one, broken for
the one whose flag (or config key) the new release dropped, its servers alternating between
the stacks; a dead end re-opened and fixed by the new stack; each stack fingerprinted by its own
interpreter; a bisection over four stacks; and the bad input of the contract's section.

The batches run through the real `specbench` command and console, each in a process of its own;
what only reads the store afterwards (`show`, `history`, the records), the console's reply that
runs nothing, and all but one of the bad inputs run `bot.cli.main.main` in this process, with the
environment the command would have had (`here`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from jobs.store import Store
from tests.builders import specbench_here_as
from tests.standin.harness import STANDIN, Standin
from tests.standin.stacks import FakeStack, make_interpreter, write_stacks_file

REPO = Path(__file__).resolve().parents[2]
SMALL = ("{dataset-name: random-ids, random-input-len: 8, random-output-len: 4, "
         "random-range-ratio: 1.0, num-prompts: 2, max-concurrency: 1}")
EAGLE3 = """\
name: eagle3
description: The seed's EAGLE-3 experiment in small, on the SGLang stand-in
engine: sglang
metric: output_throughput
min_effect_pct: 2.0
reps: 2
warmup: false
timeouts: {{startup_s: 30, bench_s: 30}}
bench: {bench}
baseline:
  server_args: {{model-path: /models/tiny, tp-size: 1, cuda-graph-max-bs: 512}}
  env: {{STANDIN_STARTUP_S: "0.05", STANDIN_HEALTH_S: "0.02", STANDIN_TAG: "{tag}",
         STANDIN_INFO_FILE: "{info}"}}
approaches:
  - name: cuda-graph-max-bs-128
    hypothesis: Smaller CUDA-graph capture frees memory for the KV cache
    server_args: {{cuda-graph-max-bs: 128}}
    env: {{STANDIN_THROUGHPUT: "82,0.5.23=50"}}
  - name: eagle3
    hypothesis: EAGLE-3 drafts cut the number of target forward passes
    server_args: {{speculative-algorithm: EAGLE3, speculative-draft-model-path: /models/d}}
  - name: eagle3-skip-dp-sync
    extends: eagle3
    hypothesis: Skipping the DP MLP sync shortens each draft step
    server_args: {{speculative-skip-dp-mlp-sync: true}}
  - name: hicache
    hypothesis: The hierarchical KV cache keeps more prefixes
    server_args: {{enable-hicache: true}}
"""
EAGLE3_VLLM = """\
name: eagle3-vllm
description: The seed's EAGLE-3 experiment in small, on the vLLM stand-in
engine: vllm
metric: output_throughput
min_effect_pct: 2.0
reps: 2
warmup: false
timeouts: {{startup_s: 30, bench_s: 30}}
bench: {{dataset-name: random, random-input-len: 8, random-output-len: 16, num-prompts: 2,
        max-concurrency: 1}}
baseline:
  server_args: {{model: /models/tiny, tensor-parallel-size: 1, disable-custom-all-reduce: true}}
  env: {{STANDIN_STARTUP_S: "0.05", STANDIN_TAG: "{tag}", STANDIN_INFO_FILE: "{info}"}}
approaches:
  - name: cudagraph-capture-128
    hypothesis: Smaller CUDA-graph capture frees memory for the KV cache
    server_args: {{max-cudagraph-capture-size: 128}}
    env: {{STANDIN_THROUGHPUT: "82,0.34.0=30"}}
  - name: eagle3
    hypothesis: EAGLE-3 drafts cut the number of target forward passes
    server_args:
      speculative-config: {{method: eagle3, model: /models/tiny-eagle3, num_speculative_tokens: 3}}
  - name: eagle3-unpadded
    hypothesis: Drafting without a padded batch saves work
    server_args:
      speculative-config: {{method: eagle3, model: /models/tiny-eagle3, num_speculative_tokens: 3,
                           disable_padded_drafter_batch: true}}
"""
REGRESS = """\
name: regress
description: EAGLE-3 slower from one release on (what a watch would see)
engine: sglang
reps: 2
warmup: false
timeouts: {{startup_s: 30, bench_s: 30}}
bench: {bench}
baseline:
  server_args: {{model-path: /models/tiny, tp-size: 1}}
  env: {{STANDIN_STARTUP_S: "0.05", STANDIN_HEALTH_S: "0.02", STANDIN_TAG: "{tag}",
         STANDIN_INFO_FILE: "{info}"}}
approaches:
  - name: eagle3
    hypothesis: EAGLE-3 drafts cut the number of target forward passes
    server_args: {{speculative-algorithm: EAGLE3, speculative-draft-model-path: /models/d}}
    env: {{STANDIN_THROUGHPUT: "82,0.5.21=60,0.5.23=60"}}
"""
OLD, NEW = FakeStack("sglang-0.5.20", "sglang", "0.5.20"), FakeStack(
    "sglang-0.5.23", "sglang", "0.5.23", speed=1.3, torch="2.14.0+cpu")
VOLD, VNEW = FakeStack("vllm-0.33.0", "vllm", "0.33.0"), FakeStack(
    "vllm-0.34.0", "vllm", "0.34.0", speed=1.6)
# four stacks, in no order of version: the change appears on the third (0.5.21)
FOUR = [FakeStack("sglang-0.5.21", "sglang", "0.5.21"), FakeStack("sglang-0.5.23", "sglang",
                                                                    "0.5.23"),
        FakeStack("sglang-0.5.19", "sglang", "0.5.19"), FakeStack("sglang-0.5.20", "sglang",
                                                                    "0.5.20")]


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Standin]:
    """A host with its presets, its two stacks per engine and a stand-in tag: no process of the
    test outlives it."""
    setup = Standin(root=tmp_path)
    config = tmp_path / "config"
    subprocess.run(["cp", "-r", str(REPO / "config"), str(config)], check=True)
    values = {"tag": setup.tag, "info": str(setup.info_file), "bench": SMALL}
    (config / "presets" / "eagle3.yaml").write_text(EAGLE3.format(**values))
    (config / "presets" / "eagle3-vllm.yaml").write_text(EAGLE3_VLLM.format(**values))
    (config / "presets" / "regress.yaml").write_text(REGRESS.format(**values))
    write_stacks_file(tmp_path, [OLD, NEW, VOLD, VNEW])
    yield setup
    assert setup.leftovers() == []


def environment(root: Path, **extra: str) -> dict[str, str]:
    """The worker's environment: its engines' own interpreters are the old stacks'."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STANDIN_", "SPECBENCH_"))}
    env.update({"PYTHONPATH": os.pathsep.join([str(STANDIN), str(REPO)]),
                "SPECBENCH_SGLANG_PYTHON": str(root / "stacks" / OLD.name / "python"),
                "SPECBENCH_VLLM_PYTHON": str(root / "stacks" / VOLD.name / "python"),
                "SPECBENCH_CONFIG_DIR": str(root / "config"),
                "SPECBENCH_DATA_DIR": str(root / "data"),
                "SPECBENCH_STACKS": str(root / "stacks.yaml"), "USER": "tester", **extra})
    return env


def specbench(root: Path, *args: str, timeout: float = 170,
              **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot.cli.main", *args], capture_output=True,
                          text=True, cwd=REPO, env=environment(root, **extra), timeout=timeout)


Here = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def here(capsys: pytest.CaptureFixture[str]) -> Here:
    """`specbench(root, ARGS)` in this process (tests/builders.py `specbench_here`): the
    environment and working folder its subprocess gets, while it runs."""
    return specbench_here_as(capsys, environment, REPO)


def records(root: Path, batch: str, *, stack: str = "") -> list[dict[str, Any]]:
    """The batch's records on its own stack, or on `stack`, as the store keeps them (read in
    this process, from the host's data dir, through JSON as the command line gives them)."""
    with Store(f"sqlite:///{root / 'data' / 'specbench.db'}") as store:
        text = json.dumps([r.to_dict() for r in store.records(batch, stack=stack)])
    found: list[dict[str, Any]] = json.loads(text)
    return found


def servers(setup: Standin) -> list[str]:
    """The release of every server started, in order."""
    return [note["version"] for note in setup.notes("server")]


def batches(here: Here, root: Path) -> list[dict[str, Any]]:
    done = here(root, "history", "--format", "json")
    assert done.returncode == 0, done.stderr
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return found


@pytest.mark.timeout(300)
def test_an_upgrade_check_of_eagle3_through_the_cli(host: Standin, here: Here) -> None:
    root = host.root
    # the current stack, named: hicache's flag is newer than 0.5.20, a dead end there
    first = specbench(root, "run", "eagle3", "--stack", OLD.name, "--format", "json")
    assert first.returncode == 0, first.stderr
    before = json.loads(first.stdout)
    assert {r["approach"]: r["cause"] for r in before["results"]}["hicache"] == "bad-config"
    assert before["ran"]["stack"] == OLD.name
    assert {r["stack"] for r in records(root, before["batch"])} == {OLD.name}
    started = len(host.notes("server"))

    done = specbench(root, "run", "eagle3", "--against", NEW.name, "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    upgrade = report["upgrade"]
    assert {r["approach"]: r["outcome"] for r in upgrade["results"]} == {
        "baseline": "faster", "cuda-graph-max-bs-128": "slower", "eagle3": "faster",
        "eagle3-skip-dp-sync": "breaks", "hicache": "fixes"}
    broken = next(r for r in upgrade["results"] if r["approach"] == "eagle3-skip-dp-sync")
    assert (broken["verdict"], broken["cause"]) == ("failed", "bad-config")
    assert upgrade["summary"] == (
        "sglang-0.5.23 is faster for 2 of 3 configurations (baseline +30.0%), slower for "
        "cuda-graph-max-bs-128 (\u221220.7%), breaks eagle3-skip-dp-sync (bad-config: "
        "--speculative-skip-dp-mlp-sync was removed), and fixes hicache (failed before, runs "
        "now)")
    # memory per stack: a dead end of the current stack, tried on the new one, which fixes it
    assert upgrade["reopened"] == [{"approach": "hicache", "cause": "bad-config",
                                    "known_from": before["batch"], "fixed": True, "now": None}]
    assert "re-opens 1 dead end of the current stack and fixes 1: hicache" in upgrade["memory"]
    # one server at a time, alternating which stack goes first (the skip-dp-sync one refused
    # by 0.5.23's flags and hicache known to fail on 0.5.20 start none), the bracket last
    assert servers(host)[started:] == ["0.5.20", "0.5.23", "0.5.23", "0.5.20", "0.5.20",
                                       "0.5.23", "0.5.20", "0.5.23", "0.5.20"]
    # each stack's fingerprint is its own interpreter's, not the worker's (0.5.2, its torch)
    ours, theirs = records(root, report["batch"]), records(root, report["batch"],
                                                           stack=NEW.name)
    assert [r["approach"] for r in ours] == [r["approach"] for r in theirs]
    assert [r["role"] for r in ours].count("baseline") == 1  # the run-record format holds
    assert {(r["fingerprint"]["sglang"], r["fingerprint"]["torch"]) for r in theirs} == {
        ("0.5.23", "2.14.0+cpu")}
    assert {r["fingerprint"]["sglang"] for r in ours} == {"0.5.20"}
    assert all(r["fingerprint"]["torch"] != "2.14.0+cpu" for r in ours)
    assert {r["stack"] for r in theirs} == {NEW.name}
    # the text report ends with the line
    text = here(root, "show", report["batch"])
    assert text.stdout.rstrip("\n").splitlines()[-1] == upgrade["summary"]
    assert "Memory: sglang-0.5.23 re-opens 1 dead end" in text.stdout


@pytest.mark.timeout(300)
def test_an_upgrade_check_of_eagle3_vllm_through_the_console(host: Standin, here: Here) -> None:
    done = specbench(host.root, "console", "-c", f"run eagle3-vllm --against {VNEW.name}",
                     "--timeout", "240", timeout=280)
    assert done.returncode == 0, done.stderr
    summary = ("vllm-0.34.0 is faster for 2 of 3 configurations (", "), slower for "
               "cudagraph-capture-128 (\u2212", "%), and breaks eagle3-unpadded (bad-config: "
               "SpeculativeConfig's disable_padded_drafter_batch was removed)")
    (line,) = [x for x in done.stdout.splitlines() if "vllm-0.34.0 is faster" in x]
    assert all(part in line for part in summary), line
    assert servers(host) == ["0.33.0", "0.34.0", "0.34.0", "0.33.0", "0.33.0", "0.34.0",
                             "0.34.0", "0.33.0", "0.33.0"]
    report = json.loads(here(host.root, "show", "--format", "json").stdout)
    assert {r["approach"]: r["outcome"] for r in report["upgrade"]["results"]} == {
        "baseline": "faster", "cudagraph-capture-128": "slower", "eagle3": "faster",
        "eagle3-unpadded": "breaks"}
    assert report["upgrade"]["stack_diff"] == [{"key": "vllm", "before": "0.33.0",
                                                "after": "0.34.0"}]


@pytest.mark.timeout(200)
def test_a_batch_on_a_named_stack_from_chat(host: Standin, here: Here) -> None:
    done = specbench(host.root, "console", "-c", f"run regress --stack {NEW.name}")
    assert done.returncode == 0, done.stderr
    assert f"on stack {NEW.name}" in done.stdout
    report = json.loads(here(host.root, "show", "--format", "json").stdout)
    assert report["ran"]["stack"] == NEW.name
    assert report["fingerprint"]["sglang"] == "0.5.23"
    assert servers(host) == ["0.5.23", "0.5.23"]


@pytest.mark.timeout(300)
def test_a_change_on_the_third_of_four_stacks_is_bisected_in_two_batches(
    host: Standin, here: Here,
) -> None:
    root = host.root
    write_stacks_file(root, FOUR)
    done = specbench(root, "bisect", "regress", "eagle3", "--from", "sglang-0.5.19", "--to",
                     "sglang-0.5.23", "--before", "82", "--after", "60", "--format", "json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)["bisect"]
    assert found["first"] == "sglang-0.5.21"
    assert found["text"] == "first slower on sglang-0.5.21: sglang 0.5.20 → 0.5.21"
    assert found["stacks"] == ["sglang-0.5.20", "sglang-0.5.21"]  # by version, not the file
    assert [m["stack"] for m in found["measured"]] == ["sglang-0.5.21", "sglang-0.5.20"]
    assert found["batches"] == 2 == found["max_batches"]
    assert servers(host) == ["0.5.21", "0.5.21", "0.5.20", "0.5.20"]  # baseline, eagle3 each
    assert "sglang-0.5.21: 2/2 eagle3: regressed" in done.stderr  # its parts' progress
    bisection = json.loads(done.stdout)["batch"]
    assert [b["batch"] for b in batches(here, root)] == [bisection]  # its parts folded into it
    assert here(root, "show").stdout.startswith(f"Bisect {bisection} (regress, eagle3, ")
    # with no stacks between, the reply names the stacks it would need, and runs nothing
    line = "bisect regress eagle3 --from sglang-0.5.21 --to sglang-0.5.23 --before 82 --after 60"
    alone = here(root, "console", "-c", line)
    assert alone.returncode == 0, alone.stderr
    assert ("no stacks between sglang-0.5.21 and sglang-0.5.23: the change came between them "
            "(sglang 0.5.21 → 0.5.23); to narrow it down this host would need a stack with "
            "sglang 0.5.22") in alone.stdout
    assert len(servers(host)) == 4


def _bad_stacks(root: Path, name: str, text: str) -> str:
    path = root / name
    path.write_text(text)
    return str(path)


@pytest.mark.timeout(200)
def test_bad_stack_input_is_exit_2_with_one_line_and_nothing_stored(
    host: Standin, here: Here,
) -> None:
    """Each case through the command line and the console: the first as the installed command
    in a process of its own (exit 2, one line on its stderr), the others in this process."""
    root = host.root
    failing = make_interpreter(root, FakeStack("broken", "sglang", "0.5.20"))
    failing.write_text("#!/bin/sh\necho 'error while loading shared libraries: libcudart' >&2\n"
                       "exit 127\n")
    cases: list[tuple[list[str], dict[str, str], str]] = [
        (["run", "eagle3", "--stack", "sglang-nightly"], {}, "unknown stack 'sglang-nightly'"),
        (["run", "eagle3", "--against", OLD.name], {},
         f"--against {OLD.name} is the current stack"),
        (["run", "eagle3", "--stack", NEW.name, "--against", NEW.name], {},
         f"--against {NEW.name} is the current stack"),
        (["run", "eagle3", "--against", VNEW.name], {}, f"stack '{VNEW.name}'"),
        (["run", "eagle3", "--stack", OLD.name],
         {"SPECBENCH_STACKS": _bad_stacks(root, "malformed.yaml",
                                         f"{OLD.name}: {{engine: sglang\n")},
         "malformed.yaml:2: not valid YAML"),
        (["run", "eagle3", "--stack", "gone"],
         {"SPECBENCH_STACKS": _bad_stacks(root, "gone.yaml",
                                         "gone: {engine: sglang, python: /no/python}\n")},
         "gone.yaml:1: stack 'gone': python /no/python: no such interpreter"),
        (["run", "eagle3", "--against", "broken"],
         {"SPECBENCH_STACKS": _bad_stacks(root, "broken.yaml",
                                         f"broken: {{engine: sglang, python: {failing}}}\n")},
         "does not run: error while loading shared libraries: libcudart"),
        (["run", "eagle3", "--stack", OLD.name], {"SPECBENCH_STACKS": ""},
         "this host has no stacks file (SPECBENCH_STACKS is not set)"),
        (["bisect", "regress", "eagle3", "--from", OLD.name, "--to", NEW.name, "--before", "82"],
         {}, "--before and --after go together"),
        (["bisect", "regress", "eagle3", "--from", NEW.name, "--to", OLD.name], {},
         f"--from {NEW.name} (version 0.5.23) comes after --to {OLD.name}"),
        (["bisect", "regress", "eagle4", "--from", OLD.name, "--to", NEW.name], {},
         "preset 'regress' has no approach 'eagle4' (did you mean 'eagle3'?)"),
    ]
    for n, (argv, extra, message) in enumerate(cases):
        command = specbench if n == 0 else here
        done = command(root, *argv, **extra)
        assert done.returncode == 2, (argv, done.stderr)
        assert message in done.stderr, (argv, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        chat = command(root, "console", "-c", " ".join(argv), **extra)
        said = chat.stdout + chat.stderr
        assert chat.returncode == 2, (argv, said)
        assert message in said and len(said.strip().splitlines()) == 1, (argv, said)
    assert batches(here, root) == [] and host.notes("server") == []
