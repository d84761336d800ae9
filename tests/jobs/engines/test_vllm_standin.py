"""The vLLM stand-in is as strict as vLLM 0.33.0 (tests/standin/vllm, read from the release).

The expected texts are what the real 0.33.0 CLI printed, run as `python -m
vllm.entrypoints.cli.main` with VLLM_TARGET_DEVICE=cpu (scripts/vllm_flags.py's probe venv).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from jobs.core.rules import cause_of, fallback_line, load_rules
from tests.standin.vllm_harness import (
    MODEL,
    OPENER,
    SPECULATIVE,
    VllmStandin,
    free_port,
    make_vllm_standin,
    stop,
    wait_health,
)

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "config" / "engines" / "vllm" / "failure_rules.yaml"
FLAGS = ROOT / "tests" / "standin" / "vllm" / "flags" / "0.33.0.json"


@pytest.fixture
def vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> VllmStandin:
    return make_vllm_standin(tmp_path, monkeypatch)


def refused(vllm: VllmStandin, *args: str) -> str:
    """The last line of a refusal, which must be argparse's exit 2."""
    done = vllm.cli(*args)
    assert done.returncode == 2, done.stderr
    return done.stderr.strip().splitlines()[-1]


def test_version_and_help_are_the_releases(vllm: VllmStandin) -> None:
    assert vllm.cli("--version").stdout.strip() == "0.33.0"
    assert vllm.cli("--version", env=vllm.env(STANDIN_VERSION="0.33.1")).stdout.strip() == (
        "0.33.1")
    shown = vllm.cli("serve", "--help=all")
    assert shown.returncode == 0
    assert shown.stdout == (FLAGS.parent / "0.33.0.serve-help.txt").read_text()
    assert "--speculative-config SPECULATIVE_CONFIG, -sc SPECULATIVE_CONFIG" in shown.stdout


def test_unknown_flags_abbreviations_and_no_x_as_the_release(vllm: VllmStandin) -> None:
    done = vllm.cli("serve", MODEL, "--bogus-flag", "1")
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == "usage: main.py [-h] [-v]"
    assert done.stderr.strip().splitlines()[-1] == (
        "main.py: error: unrecognized arguments: --bogus-flag 1")
    # an unambiguous prefix is the flag; only the unknown one is refused
    assert refused(vllm, "serve", MODEL, "--tensor-parallel", "2", "--gpu-memory", "0.9",
                   "--no-enforce-eager", "--enable-custom-all-reduce", "--zzz") == (
        "main.py: error: unrecognized arguments: --zzz")
    assert refused(vllm, "serve", MODEL, "--max-num", "2") == (
        "main.py serve: error: ambiguous option: --max-num could match "
        "--max-num-batched-tokens, --max-num-scheduled-tokens, --max-num-seqs, "
        "--max-num-active-seqs, --max-num-queued-reqs, --max-num-queued-tokens")
    assert refused(vllm, "serve", MODEL, "--no-tensor-parallel-size") == (
        "main.py: error: unrecognized arguments: --no-tensor-parallel-size")
    assert refused(vllm, "serve", MODEL, "--tensor_parallel_size", "x") == (
        "main.py serve: error: argument --tensor-parallel-size/-tp: invalid int value: 'x'")
    # bench's own usage line becomes its subcommands' prog, in the release too
    assert refused(vllm, "bench", "serve", "--dataset-name", "nope").startswith(
        "vllm bench <bench_type> [options] serve: error: argument --dataset-name: invalid "
        "choice: 'nope' (choose from ")  # the choices' quoting is the interpreter's argparse


def test_json_arguments_are_checked_as_the_release_checks_them(vllm: VllmStandin) -> None:
    assert refused(vllm, "serve", MODEL, "--speculative-config", "{bad").startswith(
        "main.py serve: error: argument --speculative-config/-sc: Value {bad cannot be "
        "converted to <function loads at 0x")
    done = vllm.cli("serve", MODEL, "--compilation-config", '{"bogus": 1}')
    assert done.returncode == 2
    assert ("main.py serve: error: argument --compilation-config/-cc: 1 validation error for "
            "CompilationConfig\nbogus\n  Unexpected keyword argument "
            "[type=unexpected_keyword_argument, input_value=1, input_type=int]") in done.stderr
    # --speculative-config is plain JSON to the parser; SpeculativeConfig refuses the key at
    # start (arg_utils.py:2139), with pydantic's words naming it
    spec = json.dumps({**SPECULATIVE, "bogus_key": 1})
    done = vllm.cli("serve", MODEL, "--speculative-config", spec, "--port", str(free_port()),
                    env=vllm.env(STANDIN_STARTUP_S="0"))
    assert done.returncode == 1
    assert ("pydantic_core._pydantic_core.ValidationError: 1 validation error for "
            "SpeculativeConfig\nbogus_key\n  Unexpected keyword argument") in done.stdout


def test_health_refuses_while_loading_then_bench_serve_saves_vllms_json(
    vllm: VllmStandin,
) -> None:
    port = free_port()
    env = vllm.env(STANDIN_STARTUP_S="0.6", STANDIN_THROUGHPUT="400", STANDIN_ACCEPT_LENGTH="2.6")
    server = vllm.serve(MODEL, "-sc.method", "eagle3", "--speculative_config.model",
                        SPECULATIVE["model"], "-sc.num_speculative_tokens", "3", port=port,
                        env=env)
    try:
        time.sleep(0.3)
        with pytest.raises(urllib.error.URLError, match="Connection refused"):
            OPENER.open(f"http://127.0.0.1:{port}/health", timeout=1)
        assert wait_health(port)
        models = json.load(OPENER.open(f"http://127.0.0.1:{port}/v1/models"))
        assert models["data"][0]["id"] == MODEL
        done = vllm.cli("bench", "serve", "--backend", "vllm", "--base-url",
                        f"http://127.0.0.1:{port}", "--model", MODEL, "--save-result",
                        "--result-dir", str(vllm.root / "out"), "--result-filename", "r.json",
                        "--dataset-name", "random", "--num-prompts", "6", "--max-concurrency",
                        "2", "--random-input-len", "8", "--random-output-len", "16",
                        "--seed", "3", env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        result = json.loads((vllm.root / "out" / "r.json").read_text())
        page = OPENER.open(f"http://127.0.0.1:{port}/metrics").read().decode()
    finally:
        stop(server)
    for key in ("date", "backend", "model_id", "num_prompts", "max_concurrency", "duration",
                "completed", "failed", "total_input_tokens", "total_output_tokens",
                "request_throughput", "output_throughput", "total_token_throughput",
                "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms",
                "p99_tpot_ms", "median_itl_ms", "p99_itl_ms", "spec_decode_num_drafts"):
        assert key in result, key
    assert "ttfts" not in result and "itls" not in result  # gone without --save-detailed
    assert result["completed"] == 6 and result["total_output_tokens"] == 96
    assert 2.2 < result["spec_decode_acceptance_length"] < 3.0
    assert "== Serving Benchmark Result ==" in done.stdout
    drafts = [line for line in page.splitlines() if line.startswith(
        "vllm:spec_decode_num_drafts_total{")]
    assert drafts == [f'vllm:spec_decode_num_drafts_total{{model_name="{MODEL}",engine="0"}} '
                      f'{float(result["spec_decode_num_drafts"])}']
    assert "vllm:spec_decode_num_accepted_tokens_total{" in page
    assert [e["role"] for e in vllm.notes()] == ["server", "bench", "sampling"]
    # without --temperature 0.33 sends none (serve.py:2247), only its fixed repetition_penalty
    assert vllm.notes("sampling")[0]["sampling"] == {"repetition_penalty": 1.0}
    assert "WARNING: vllm bench serve no longer sets temperature==0 (greedy)" in done.stdout
    vllm.assert_clean()


FATAL = {  # STANDIN_FATAL -> (the release's line, the tag its failure rule gives)
    "oom": ("ValueError: No available memory for the cache blocks.", "out-of-memory"),
    "engine-core": ("RuntimeError: Engine core initialization failed. See root cause above. "
                    "Failed core proc(s): {'EngineCore': -9}", "crash"),
    "eagle3-target": ("RuntimeError: Model does not support EAGLE3 interface but "
                      "aux_hidden_state_outputs was requested", "bad-config"),
    "attention": ("ValueError: Selected backend AttentionBackendEnum.FLASHMLA is not valid for "
                  "this configuration. Reason: ['compute capability not supported']",
                  "arch-unsupported"),
    "capability": ("ValueError: Bfloat16 is only supported on GPUs with compute capability of "
                   "at least 8.0.", "arch-unsupported"),
    "nccl": ("RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for "
             "details)", "nccl-error"),
    "quant-min": ("RuntimeError: Quantization scheme is not supported for the current GPU. Min "
                  "capability: 90. Current capability: 89.", "arch-unsupported"),
    "quant-exact": ("RuntimeError: Quantization scheme is not supported for the current GPU. "
                    "Required capability: 100. Current capability: 90.", "arch-unsupported"),
    "quant-quark": ("RuntimeError: Quantization scheme is not supported for the current GPU. "
                    "Min capability: 94. Current capability: 90.", "arch-unsupported"),
    "startup-memory": ("ValueError: Free memory on device cuda:0 (35.21/79.19 GiB) on startup is "
                       "less than desired GPU memory utilization (0.9, 71.27 GiB).",
                       "out-of-memory"),
    "startup-memory-external": (
        "ValueError: Free memory on device cuda:0 (10.5/79.19 GiB) on startup is less than the "
        "engine's budget after excluding external process's weights (0.9, 41.2 GiB).",
        "out-of-memory"),
    "external-weights": ("ValueError: Externally held weights on device cuda:0 (75.0/79.19 GiB) "
                         "exceed the desired GPU memory utilization (0.9, 71.27 GiB).",
                         "out-of-memory"),
}


def run_crash(vllm: VllmStandin, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    done = vllm.cli("serve", MODEL, "--port", str(free_port()), *args,
                    env=vllm.env(**{"STANDIN_MODE": "crash", "STANDIN_STARTUP_S": "0", **env}))
    assert done.returncode == 1
    return done


@pytest.mark.parametrize("kind", sorted(FATAL))
def test_each_failure_prints_the_releases_line_and_its_rule_names_it(
    vllm: VllmStandin, kind: str,
) -> None:
    line, tag = FATAL[kind]
    done = run_crash(vllm, "-tp", "2", STANDIN_FATAL=kind)
    assert line in done.stdout
    assert cause_of(log_tail=done.stdout, status="failed", rules=load_rules(RULES))[0] == tag


def test_an_old_gpu_refuses_bfloat16_by_itself(vllm: VllmStandin) -> None:
    done = run_crash(vllm, STANDIN_MODE="ok", STANDIN_GPU_CAPABILITY="7.5")
    assert "Your Tesla T4 GPU has compute capability 7.5" in done.stdout
    assert run_crash(vllm, "--dtype", "half", STANDIN_MODE="crash").returncode == 1


def test_fatal_then_hang_ignores_sigterm(vllm: VllmStandin) -> None:
    server = vllm.serve(MODEL, port=free_port(), env=vllm.env(
        STANDIN_MODE="fatal-then-hang", STANDIN_FATAL="oom", STANDIN_STARTUP_S="0"))
    try:
        deadline = time.monotonic() + 60
        while not vllm.notes("fatal") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert vllm.notes("fatal")
        os.killpg(server.pid, signal.SIGTERM)
        time.sleep(0.2)
        assert server.poll() is None
    finally:
        stop(server)
    vllm.assert_clean()


@pytest.mark.parametrize(("tp", "link", "args", "said"), [
    (4, "PCIe", [], "not supported on more than two PCIe-only GPUs"),
    (8, "NVLink", [], None),
    (2, "PCIe", [], None),
    (3, "NVLink", [], "due to an unsupported world size: 3. Supported world sizes: "
                      "[2, 4, 6, 8, 16]"),
    (4, "none", [], "your platform lacks GPU P2P capability"),
    (4, "PCIe", ["--disable-custom-all-reduce"], None),
    (1, "PCIe", [], None),
])
def test_custom_allreduce_falls_back_under_the_releases_conditions(
    vllm: VllmStandin, tp: int, link: str, args: list[str], said: str | None,
) -> None:
    done = run_crash(vllm, "--tensor-parallel-size", str(tp), *args, STANDIN_INTERCONNECT=link)
    lines = [x for x in done.stdout.splitlines() if "Custom allreduce is disabled" in x]
    change = {"server_args": {"disable-custom-all-reduce": False}, "env": {}}
    found = fallback_line(log_tail=done.stdout, lines=None, change=change,
                          rules=load_rules(RULES))
    if said is None:
        assert lines == [] and found is None
        return
    assert len(lines) == tp and all(said in x for x in lines)
    assert lines[0].startswith("(Worker_TP0 pid=") and " WARNING " in lines[0]
    assert found is not None and said in found


def test_the_rules_and_the_type_table_are_well_formed() -> None:
    rules = load_rules(RULES)
    assert {r.tag for r in rules.rules} >= {"arch-unsupported", "bad-config", "out-of-memory",
                                            "nccl-error", "crash"}
    assert [r.knobs for r in rules.fallbacks][0] == (
        "disable-custom-all-reduce", "enable-custom-all-reduce")
    types = yaml.safe_load((ROOT / "config" / "engines" / "vllm" / "flag_types.yaml").read_text())
    flags = json.loads(FLAGS.read_text())
    longs = {next(o for o in row["o"] if o.startswith("--"))[2:]
             for row in flags["serve"] if "o" in row}
    assert longs == set(types["flags"])
    assert types["flags"]["speculative-config"]["mapping"] is True
    assert "enforce-eager" not in types["flags"]["speculative-config"].get("aliases", [])
    assert "num_speculative_tokens" in types["speculative_config_keys"]


def test_fatal_in_bench_dies_serving_and_model_as_a_flag_is_moved(vllm: VllmStandin) -> None:
    port = free_port()
    log = vllm.root / "serve.log"
    server = vllm.serve("--model", MODEL, port=port, log=log, env=vllm.env(
        STANDIN_MODE="fatal-in-bench", STANDIN_FATAL="nccl", STANDIN_STARTUP_S="0"))
    try:
        assert wait_health(port)
        body = json.dumps({"model": MODEL, "prompt": "hi", "max_tokens": 4}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(OSError):  # the engine died: the request never ends
            OPENER.open(request, timeout=0.5)
        assert vllm.notes("fatal")
    finally:
        stop(server)
    text = log.read_text()
    assert "[argparse_utils.py:330] With `vllm serve`, you should provide the model" in text
    assert "[core.py:1586] EngineCore encountered a fatal error." in text
    assert "RuntimeError: NCCL error: unhandled cuda error" in text
    vllm.assert_clean()


def test_a_taken_port_fails_at_once(vllm: VllmStandin) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        done = vllm.cli("serve", MODEL, "--host", "127.0.0.1", "--port",
                        str(holder.getsockname()[1]))
    assert done.returncode == 1
    assert "OSError: [Errno 98] Address already in use" in done.stdout
    assert cause_of(log_tail=done.stdout, status="failed", rules=load_rules(RULES)) == (
        "crash", "OSError: [Errno 98] Address already in use")
