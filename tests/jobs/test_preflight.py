"""Flag checks against `launch_server --help`: parsing, did-you-mean, one --help per version."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from jobs.core.rules import load_rules
from jobs.engines import preflight
from jobs.engines import probe as engine_probe
from jobs.engines.sglang import probe as sglang_probe
from jobs.engines.sglang.engine import SGLangEngine
from jobs.engines.sglang.flag_table import load_table
from jobs.errors import EngineError
from tests.standin.harness import STANDIN, Standin, make_standin

HELP_0_5_23 = Path(__file__).resolve().parent / "fixtures" / "sglang-0.5.23-help.txt"

# Recorded from argparse's format (SGLang 0.5.2 style), cut down.
HELP_TEXT = """\
usage: launch_server.py [-h] --model-path MODEL_PATH [--tokenizer-path TOKENIZER_PATH]
                        [--tp-size TP_SIZE] [--cuda-graph-max-bs CUDA_GRAPH_MAX_BS]
                        [--removed-in-usage-only]

options:
  -h, --help            show this help message and exit
  --model-path MODEL_PATH, --model MODEL_PATH
                        The path of the model weights. This can be a local folder or a Hugging
                        Face repo ID.
  --tokenizer-path TOKENIZER_PATH
                        The path of the tokenizer.
  --chunked-prefill-size CHUNKED_PREFILL_SIZE
                        The maximum number of tokens in a chunk for the chunked prefill.
                        --not-a-flag mentioned in prose. Setting this to -1 means disabling
                        chunked prefill.
  --tensor-parallel-size TENSOR_PARALLEL_SIZE, --tp-size TENSOR_PARALLEL_SIZE
                        The tensor parallelism size.
  --expert-parallel-size EP, --ep-size EP, --ep EP
                        The expert parallelism size.
  --speculative-algorithm {EAGLE,EAGLE3,NEXTN,STANDALONE}
                        Speculative algorithm.
  --cuda-graph-bs CUDA_GRAPH_BS [CUDA_GRAPH_BS ...]
                        Set the list of batch sizes for cuda graph.
  --cuda-graph-max-bs CUDA_GRAPH_MAX_BS
                        Set the maximum batch size for cuda graph.
  --trust-remote-code   Whether or not to allow for custom models defined on the Hub.
  --disable-cuda-graph  Disable cuda graph.
"""


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Standin:
    return make_standin(tmp_path, monkeypatch)


def test_parse_help_flags_reads_every_option_and_alias() -> None:
    flags = sglang_probe.parse_help_flags(HELP_TEXT)
    assert flags == {
        "-h", "--help", "--model-path", "--model", "--tokenizer-path", "--chunked-prefill-size",
        "--tensor-parallel-size", "--tp-size", "--expert-parallel-size", "--ep-size", "--ep",
        "--speculative-algorithm", "--cuda-graph-bs", "--cuda-graph-max-bs",
        "--trust-remote-code", "--disable-cuda-graph",
    }


def test_parse_help_flags_matches_argparse_itself() -> None:
    parser = argparse.ArgumentParser(prog="launch_server.py")
    parser.add_argument("--data-parallel-size", "--dp-size", type=int)
    parser.add_argument("--moe-a2a-backend", choices=["none", "deepep"])
    parser.add_argument("--enable-torch-symm-mem", action="store_true")
    group = parser.add_argument_group("speculative decoding")
    group.add_argument("--speculative-num-steps", type=int, help="x " * 80)
    expected = {s for action in parser._actions for s in action.option_strings}
    assert sglang_probe.parse_help_flags(parser.format_help()) == expected


def test_to_flag_accepts_dashes_and_underscores() -> None:
    assert preflight.to_flag("tp-size") == "--tp-size"
    assert preflight.to_flag("cuda_graph_max_bs") == "--cuda-graph-max-bs"
    assert preflight.to_flag("--tp-size") == "--tp-size"


def test_unknown_flag_reason_reads_like_argparse_with_a_hint() -> None:
    known = sglang_probe.parse_help_flags(HELP_TEXT)
    prog = sglang_probe.SGLANG.prog  # the engine's: the shared check has none of its own
    assert preflight.unknown_flags_reason({"tp_size": 8, "model": "/m"}, known, prog=prog) is None
    reason = preflight.unknown_flags_reason({"tp-size": 8, "cuda-graph-max-bz": 64}, known,
                                            prog=prog)
    assert reason == (
        "launch_server.py: error: unrecognized arguments: --cuda-graph-max-bz "
        "(did you mean --cuda-graph-max-bs?)"
    )
    match = load_rules().classify(reason)
    assert match is not None and match.tag == "bad-config"
    several = preflight.unknown_flags_reason({"tp-sise": 8, "zzz": 1}, known, prog=prog)
    assert several is not None
    assert several.startswith("launch_server.py: error: unrecognized arguments: --tp-sise --zzz")
    assert "--tp-size for --tp-sise" in several


def test_preflight_runs_help_once_per_version(standin: Standin) -> None:
    plan = standin.plan(
        standin.config("baseline", role="baseline"),
        standin.config("eagle3", server_args={"speculative-algorithm": "EAGLE3"}),
    )
    engine = SGLangEngine()
    assert engine.preflight(plan) == {}
    assert engine.preflight(plan) == {}
    sglang_probe.clear_memory()  # a new worker process: the disk cache still answers
    assert engine.preflight(plan) == {}
    assert standin.help_log.read_text().splitlines() == ["0.5.2"]
    assert list((standin.root / "data" / "cache").glob("sglang-flags-*.json"))


def test_a_new_version_reruns_help_and_spells_renamed_knobs_its_way(
    standin: Standin, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = standin.plan(
        standin.config("baseline", role="baseline"),
        standin.config("small-graphs", server_args={"cuda-graph-max-bs": 128}),
        standin.config("pcie", server_args={"enable-custom-allreduce-pcie": True}),
    )
    engine = SGLangEngine()
    assert list(engine.preflight(plan)) == ["pcie"]
    monkeypatch.setenv("STANDIN_VERSION", "0.5.23")  # an upgrade: --cuda-graph-max-bs is gone
    reasons = engine.preflight(plan)
    assert list(reasons) == ["pcie"]  # cuda-graph-max-bs runs as --cuda-graph-max-bs-decode
    assert reasons["pcie"] == (
        "sglang serve: error: unrecognized arguments: --enable-custom-allreduce-pcie (no SGLang "
        "release has --enable-custom-allreduce-pcie: custom all-reduce is on unless "
        "--disable-custom-all-reduce is given (and SGLang turns it off by itself on more than "
        "two PCIe-only GPUs))"
    )
    engine.preflight(plan)
    assert standin.help_log.read_text().splitlines() == ["0.5.2", "0.5.23"]


def test_a_flag_or_value_newer_than_the_release_is_refused_with_the_release_it_needs(
    standin: Standin, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = standin.plan(
        standin.config("baseline", role="baseline"),
        standin.config("symm-mem", server_args={"enable-torch-symm-mem": True}),
        standin.config("a2a", server_args={"ep-size": 8, "moe-a2a-backend": "flashinfer"}),
    )
    reasons = SGLangEngine().preflight(plan)
    assert reasons["symm-mem"] == (
        "launch_server.py: error: unrecognized arguments: --enable-torch-symm-mem "
        "(--enable-torch-symm-mem is in SGLang 0.5.3 and later; this is 0.5.2)"
    )
    assert reasons["a2a"] == (
        "launch_server.py: error: argument --moe-a2a-backend: invalid choice: 'flashinfer' "
        "(choose from 'none', 'deepep') (--moe-a2a-backend flashinfer is in SGLang 0.5.9 and "
        "later; this is 0.5.2)"
    )
    for reason in reasons.values():
        match = load_rules().classify(reason)
        assert match is not None and match.tag == "bad-config"
    monkeypatch.setenv("STANDIN_VERSION", "0.5.9")
    assert SGLangEngine().preflight(plan) == {}


def test_the_real_0_5_23_help_gives_flags_choices_and_prog() -> None:
    text = HELP_0_5_23.read_text()
    choices = sglang_probe.parse_help_choices(text)
    assert "flashinfer" in choices["--moe-a2a-backend"]
    assert choices["--speculative-attention-mode"] == ("prefill", "decode")
    known = sglang_probe.LaunchHelp(version="0.5.23", flags=sglang_probe.parse_help_flags(text),
                                 choices=choices, prog="sglang serve")
    plan = Standin(root=Path("/nonexistent")).plan(
        Standin(root=Path("/x")).config("baseline", role="baseline",
                                        server_args={"cuda-graph-max-bs": 512}),
    )
    assert preflight.check_plan(plan, known, table=load_table()) == {}
    assert "ambiguous" not in str(preflight.check_plan(plan, known))  # unknown without the table


def _installed_standin(root: Path, version: str) -> Path:
    """A site folder where the stand-in is an installed `sglang` distribution."""
    site = root / "site"
    site.mkdir(exist_ok=True)
    if not (site / "sglang").exists():
        (site / "sglang").symlink_to(STANDIN / "sglang")
        # what it imports beside itself: its load model, its host's drift, traffic per
        # category, its HTTP client and server
        for name in ("load", "host", "traffic", "http", "httpd"):
            (site / f"standin_{name}.py").symlink_to(STANDIN / f"standin_{name}.py")
    for old in site.glob("sglang-*.dist-info"):
        for item in old.iterdir():
            item.unlink()
        old.rmdir()
    info = site / f"sglang-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    (info / "RECORD").write_text("sglang/__init__.py,,\n")
    return site


def test_the_version_probe_is_cached_with_the_help_until_an_upgrade(
    standin: Standin, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = _installed_standin(standin.root, "0.5.15")
    monkeypatch.setenv("PYTHONPATH", str(site))
    calls: list[list[str]] = []
    real_run = subprocess.run

    def counting(argv: list[str], **kwargs: Any) -> Any:
        calls.append(argv)
        return real_run(argv, **kwargs)

    monkeypatch.setattr(engine_probe.subprocess, "run", counting)
    first = sglang_probe.known_help(sys.executable)
    assert first.version == "0.5.15" and "--cuda-graph-max-bs-decode" in first.flags
    assert len(calls) == 2  # the probe (metadata, no `import sglang`) and --help
    for _ in range(3):
        assert sglang_probe.known_help(sys.executable) == first
    sglang_probe.clear_memory()  # a new worker process: the disk cache answers, no process runs
    assert sglang_probe.known_help(sys.executable) == first
    assert len(calls) == 2
    time.sleep(0.01)
    _installed_standin(standin.root, "0.5.23")  # pip install --upgrade
    assert sglang_probe.known_help(sys.executable).version == "0.5.23"
    assert len(calls) == 4
    assert standin.help_log.read_text().splitlines() == ["0.5.15", "0.5.23"]


def test_missing_interpreter_is_an_infrastructure_failure(
    standin: Standin, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECBENCH_SGLANG_PYTHON", "/nonexistent/python3")
    plan = standin.plan(standin.config("baseline", role="baseline"))
    no_such = r"^SPECBENCH_SGLANG_PYTHON=/nonexistent/python3: no such"
    with pytest.raises(EngineError, match=no_such):
        SGLangEngine().preflight(plan)
    monkeypatch.setenv("SPECBENCH_SGLANG_PYTHON", "no-such-python-anywhere")
    with pytest.raises(EngineError, match="no such interpreter"):
        SGLangEngine().preflight(plan)


def test_interpreter_without_sglang_is_an_infrastructure_failure(
    standin: Standin, monkeypatch: pytest.MonkeyPatch
) -> None:
    bare = standin.root / "bare-python"  # no site-packages, no PYTHONPATH: no sglang at all
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I -S "$@"\n')
    bare.chmod(0o755)
    monkeypatch.setenv("SPECBENCH_SGLANG_PYTHON", str(bare))
    plan = standin.plan(standin.config("baseline", role="baseline"))
    cannot = f"^SPECBENCH_SGLANG_PYTHON={bare}: cannot import sglang$"
    with pytest.raises(EngineError, match=cannot):
        SGLangEngine().preflight(plan)
