"""The flag sets read from real SGLang wheels (scripts/sglang_flags.py) hang together."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs.engines.probe import parse_help_flags

ROOT = Path(__file__).resolve().parents[3]
FLAGS = ROOT / "tests" / "standin" / "sglang" / "flags"
HELP_0_5_23 = ROOT / "tests" / "jobs" / "fixtures" / "sglang-0.5.23-help.txt"
VERSIONS = ("0.5.2", "0.5.3", "0.5.8", "0.5.9", "0.5.14", "0.5.15", "0.5.19", "0.5.20", "0.5.23")


def flag_set(version: str) -> dict[str, dict[str, object]]:
    data = json.loads((FLAGS / f"{version}.json").read_text())
    assert data["version"] == version
    return {option: row for row in data["launch_server"] for option in row["o"]}


@pytest.mark.parametrize("version", VERSIONS)
def test_every_kept_release_has_the_basic_server_flags(version: str) -> None:
    flags = flag_set(version)
    for flag in ("--model-path", "--port", "--host", "--tp-size", "--mem-fraction-static",
                 "--speculative-algorithm", "--disable-custom-all-reduce"):
        assert flag in flags, (version, flag)
    assert "--enable-custom-allreduce-pcie" not in flags


def test_the_real_0_5_23_help_lists_exactly_the_visible_flags_of_its_set() -> None:
    visible = {o for o, row in flag_set("0.5.23").items() if not row.get("h")}
    assert parse_help_flags(HELP_0_5_23.read_text()) == visible | {"-h", "--help"}
    assert HELP_0_5_23.read_text().startswith("usage: sglang serve [-h] --model-path MODEL_PATH")


def test_the_history_covers_every_release_between_the_kept_ones() -> None:
    history = json.loads((FLAGS / "history.json").read_text())
    releases = history["releases"]
    assert set(VERSIONS) <= set(releases)
    assert releases == [f"0.5.{n}" for n in range(2, 24)]
    changes = history["changes"]
    assert "--enable-torch-symm-mem" in changes["0.5.3"]["launch_server"]["added"]
    assert changes["0.5.14"]["launch_server"]["deprecated"]["--cuda-graph-max-bs"] == (
        "--cuda-graph-max-bs-decode"
    )
    assert "--cuda-graph-max-bs" in changes["0.5.20"]["launch_server"]["removed"]


def test_cuda_graph_max_bs_runs_0_5_2_to_0_5_19_as_an_alias_from_0_5_14() -> None:
    for version in ("0.5.2", "0.5.3", "0.5.8", "0.5.9"):
        assert "k" not in flag_set(version)["--cuda-graph-max-bs"]
    for version in ("0.5.14", "0.5.15", "0.5.19"):
        row = flag_set(version)["--cuda-graph-max-bs"]
        assert row["k"] == "DeprecatedAliasStoreAction"
        assert row["new"] == "--cuda-graph-max-bs-decode"
    for version in ("0.5.20", "0.5.23"):
        assert "--cuda-graph-max-bs" not in flag_set(version)
        assert "--cuda-graph-max-bs-decode" in flag_set(version)


VLLM_FLAGS = ROOT / "tests" / "standin" / "vllm" / "flags" / "0.33.0.json"


def parsed_as(options: set[str], key: str) -> str:
    """How argparse (allow_abbrev, the default of both engines' parsers) reads a preset key's
    flag: the flag itself, the one flag it abbreviates, or why it refuses it."""
    flag = "--" + key
    if flag in options:
        return flag
    longer = sorted(o for o in options if o.startswith(flag))
    if len(longer) == 1:
        return longer[0]
    return f"ambiguous: {', '.join(longer)}" if longer else "unrecognized"


def engine_knobs(engine: str) -> list[str]:
    from jobs.core.engine_info import describe

    info = describe(engine)
    return sorted({*info.parallel_args, *info.evidence.get("tp_args", ())})


@pytest.mark.parametrize("version", VERSIONS)
def test_every_parallel_knob_of_sglang_is_one_its_parser_takes(version: str) -> None:
    options = set(flag_set(version))
    for key in engine_knobs("sglang"):
        assert parsed_as(options, key).startswith("--"), (version, key, parsed_as(options, key))
    assert parsed_as(options, "tp") == "--tp-size" and parsed_as(options, "dp") == "--dp-size"
    if version == "0.5.19":  # --pp-max-micro-batch-size (0.5.4) and --pp-async-batch-depth
        assert parsed_as(options, "pp") == (
            "ambiguous: --pp-async-batch-depth, --pp-max-micro-batch-size, --pp-size")


def test_every_parallel_knob_of_vllm_is_one_its_parser_takes() -> None:
    data = json.loads(VLLM_FLAGS.read_text())
    options = {o for row in data["serve"] for o in row.get("o", ())}
    for key in engine_knobs("vllm"):
        assert parsed_as(options, key) == "--" + key, key
    assert {"-tp", "-pp", "-dp", "-dcp"} <= options  # one dash: no preset key becomes these
    assert parsed_as(options, "tp") == parsed_as(options, "pp") == "unrecognized"
    assert parsed_as(options, "dp").startswith("ambiguous")
