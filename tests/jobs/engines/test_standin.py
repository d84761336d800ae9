"""The stand-in SGLang is as strict as the releases it claims to be (tests/standin/sglang)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from jobs.engines.procs import free_port
from tests.standin.harness import STANDIN

OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
BENCH = ["--backend", "sglang", "--num-prompts", "4", "--random-input-len", "8",
         "--random-output-len", "4", "--max-concurrency", "1"]


def env_for(version: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STANDIN_")}
    env.update(PYTHONPATH=str(STANDIN), STANDIN_VERSION=version, STANDIN_STARTUP_S="0.05",
               STANDIN_HEALTH_S="0.05", **extra)
    return env


def launch(version: str, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sglang.launch_server", *args], env=env_for(version, **extra),
        capture_output=True, text=True, timeout=60,
    )


def get(url: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    try:
        with OPENER.open(urllib.request.Request(url, data=data), timeout=10) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw.startswith(b"{") else raw.decode()
    except urllib.error.HTTPError as exc:
        return exc.code, None


@contextmanager
def server(version: str, *args: str, **extra: str) -> Iterator[tuple[str, Path]]:
    """A running stand-in server: its base URL and its log file; gone afterwards."""
    port = free_port()
    log = Path(os.environ.get("PYTEST_TMP", "/tmp")) / f"standin-{port}.log"
    with open(log, "w") as handle:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sglang.launch_server", "--model-path", "/models/tiny",
             "--host", "127.0.0.1", "--port", str(port), *args],
            env=env_for(version, **extra), stdout=handle, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while "fired up" not in log.read_text():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", log
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        log.unlink(missing_ok=True)


def bench(version: str, base_url: str, tmp_path: Path, *args: str, **extra: str
          ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None]:
    out = tmp_path / f"bench-{time.monotonic_ns()}.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "sglang.bench_serving", "--base-url", base_url,
         "--output-file", str(out), *BENCH, *args],
        env=env_for(version, **extra), capture_output=True, text=True, timeout=60,
    )
    lines = out.read_text().splitlines() if out.exists() else []
    return done, json.loads(lines[-1]) if lines else None


# ---------------------------------------------------------------------------- flags


def test_0_5_2_refuses_what_it_does_not_have_in_argparse_s_words() -> None:
    done = launch("0.5.2", "--model-path", "/m", "--enable-torch-symm-mem")
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "launch_server.py: error: unrecognized arguments: --enable-torch-symm-mem"
    )
    pcie = launch("0.5.2", "--model-path", "/m", "--enable-custom-allreduce-pcie")
    assert "unrecognized arguments: --enable-custom-allreduce-pcie" in pcie.stderr
    a2a = launch("0.5.2", "--model-path", "/m", "--moe-a2a-backend", "flashinfer")
    assert "argument --moe-a2a-backend: invalid choice: 'flashinfer'" in a2a.stderr


def test_0_5_23_has_no_cuda_graph_max_bs_and_argparse_calls_it_ambiguous() -> None:
    done = launch("0.5.23", "--model-path", "/m", "--cuda-graph-max-bs", "8")
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "sglang serve: error: ambiguous option: --cuda-graph-max-bs could match "
        "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
    )


def test_help_is_the_release_s_own_flag_set() -> None:
    old = launch("0.5.2", "--help").stdout
    new = launch("0.5.23", "--help").stdout
    assert old.startswith("usage: launch_server.py") and "--cuda-graph-max-bs " in old
    assert new.startswith("usage: sglang serve") and "--cuda-graph-max-bs-decode" in new
    assert "--enable-torch-symm-mem" not in old and "--enable-torch-symm-mem" in new


def test_0_5_15_takes_the_old_name_as_a_deprecated_alias(tmp_path: Path) -> None:
    with server("0.5.15", "--cuda-graph-max-bs", "8") as (_, log):
        text = log.read_text()
    assert ("'--cuda-graph-max-bs' is deprecated and will be removed in a future release. Use "
            "'--cuda-graph-max-bs-decode' instead.") in text
    assert "cuda_graph_max_bs_decode=8" in text


# ---------------------------------------------------------------------------- routes


def test_health_waits_for_a_generated_token_and_v1_models_names_the_model() -> None:
    with server("0.5.2", "--speculative-algorithm", "EAGLE3") as (url, _):
        code, models = get(url + "/v1/models")
        assert code == 200 and models["data"][0]["id"] == "/models/tiny"
        _, before = get(url + "/get_server_info")
        began = time.monotonic()
        assert get(url + "/health")[0] == 200
        assert time.monotonic() - began >= 0.05
        _, after = get(url + "/get_server_info")
        # the health check generated one token: the cumulative figure moved
        assert (after["internal_states"][0]["avg_spec_accept_length"]
                != before["internal_states"][0]["avg_spec_accept_length"])
        assert get(url + "/server_info")[0] == 404  # 0.5.6 and later only


def test_accept_length_is_per_request_and_cumulative_until_a_flush() -> None:
    with server("0.5.23", "--speculative-algorithm", "EAGLE3",
                STANDIN_ACCEPT_LENGTH="3.0") as (url, _):
        owns = set()
        for prompt in ("a", "b", "c", "d"):
            _, out = get(url + "/generate", {"text": prompt,
                                             "sampling_params": {"max_new_tokens": 64}})
            owns.add(round(out["meta_info"]["spec_accept_length"], 3))
        assert len(owns) > 1  # not a constant
        _, info = get(url + "/server_info")
        warm = info["internal_states"][0]["avg_spec_accept_length"]
        assert get(url + "/flush_cache", {})[0] == 200
        _, flushed = get(url + "/server_info")
        assert "avg_spec_accept_length" not in flushed["internal_states"][0]
        _, out = get(url + "/generate", {"text": "a", "sampling_params": {"max_new_tokens": 64}})
        _, info = get(url + "/server_info")
        own = info["internal_states"][0]["avg_spec_accept_length"]
        assert own == pytest.approx(out["meta_info"]["spec_accept_length"]) and own != warm


def test_a_tp_8_server_prints_eight_tracebacks() -> None:
    done = launch("0.5.2", "--model-path", "/m", "--tp-size", "8", STANDIN_MODE="crash")
    assert done.returncode == 1
    assert done.stdout.count("Scheduler hit an exception: Traceback") == 8
    assert {f"TP{rank}]" for rank in range(8)} <= {
        line.split(" ")[2] for line in done.stdout.splitlines() if "Scheduler hit" in line
    }


# ---------------------------------------------------------------------------- the GPUs


def test_0_5_23_falls_back_from_torch_symm_mem_on_sm120_and_carries_on() -> None:
    with server("0.5.23", "--tp-size", "8", "--enable-torch-symm-mem",
                "--disable-custom-all-reduce") as (_, log):
        text = log.read_text()
    line = ("TorchSymmMemCommunicator: Device capability 12 not supported, communicator is not "
            "available.")
    assert text.count(line) == 8 and "The server is fired up" in text


def test_0_5_9_dies_on_the_capability_table_with_sm120() -> None:
    done = launch("0.5.9", "--model-path", "/m", "--tp-size", "8", "--enable-torch-symm-mem",
                  "--disable-custom-all-reduce")
    assert done.returncode == 1
    assert done.stdout.count("KeyError: 12") == 8
    assert "not in TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES[self.device_capability]" in done.stdout


@pytest.mark.parametrize(("version", "name"), [("0.5.2", "Custom allreduce"),
                                               ("0.5.23", "CustomAllreduce")])
def test_custom_all_reduce_turns_itself_off_on_8_pcie_gpus(version: str, name: str) -> None:
    with server(version, "--tp-size", "8") as (_, log):
        assert f"{name} is disabled because it's not supported on more than two PCIe-only" in (
            log.read_text())
    with server(version, "--tp-size", "8", "--disable-custom-all-reduce") as (_, log):
        assert "is disabled because" not in log.read_text()


# ---------------------------------------------------------------------------- bench_serving


@pytest.mark.parametrize(("version", "message"), [
    ("0.5.2", "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co'"),
    ("0.5.23", "huggingface_hub.errors.LocalEntryNotFoundError: An error happened while trying "
               "to locate the file on the Hub"),
])
def test_bench_random_needs_sharegpt_and_fails_offline(
    version: str, message: str, tmp_path: Path
) -> None:
    with server(version) as (url, _):
        done, result = bench(version, url, tmp_path, "--dataset-name", "random")
        assert done.returncode == 1 and result is None
        assert message in done.stdout
        ok, measured = bench(version, url, tmp_path, "--dataset-name", "random-ids")
        assert ok.returncode == 0, ok.stdout
        assert measured is not None and measured["completed"] == 4
        sharegpt = tmp_path / "sharegpt.json"
        sharegpt.write_text(json.dumps([{"conversations": [{"value": "hi"}, {"value": "yo"}]}]))
        local, measured = bench(version, url, tmp_path, "--dataset-name", "random",
                                "--dataset-path", str(sharegpt))
        assert local.returncode == 0 and measured is not None


def test_bench_honours_the_seed(tmp_path: Path) -> None:
    with server("0.5.2", "--speculative-algorithm", "EAGLE3") as (url, _):
        firsts = []
        for seed in ("1", "1", "2"):
            get(url + "/flush_cache", {})
            _, result = bench("0.5.2", url, tmp_path, "--dataset-name", "random-ids",
                              "--seed", seed, "--flush-cache", "--random-output-len", "64")
            assert result is not None
            firsts.append(result["accept_length"])
    assert firsts[0] == firsts[1] != firsts[2]


def test_failed_requests_only_lower_completed(tmp_path: Path) -> None:
    with server("0.5.2", STANDIN_FAIL_EVERY="3") as (url, log):
        done, result = bench("0.5.2", url, tmp_path, "--dataset-name", "random-ids",
                             "--num-prompts", "8", STANDIN_FAIL_EVERY="3")
    assert done.returncode == 0 and result is not None
    assert result["completed"] < 8 and result["output_throughput"] > 0


def test_0_5_23_bench_waits_for_v1_models(tmp_path: Path) -> None:
    with server("0.5.23") as (url, _):
        done, result = bench("0.5.23", url, tmp_path, "--dataset-name", "random-ids")
    assert f"Waiting up to 60s for {url}/v1/models to become ready..." in done.stdout
    assert result is not None
