"""config/engines/sglang/flags.yaml: every entry holds in the flag sets of the real wheels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs.core.plans import RunConfig
from jobs.engines.sglang.flag_table import (
    FlagTable,
    load_table,
    parse_table,
    to_release,
    version_tuple,
)
from jobs.errors import PresetError

ROOT = Path(__file__).resolve().parents[3]
FLAGS = ROOT / "tests" / "standin" / "sglang" / "flags"
HISTORY = json.loads((FLAGS / "history.json").read_text())
RELEASES: list[str] = HISTORY["releases"]
KEPT = sorted((p.stem for p in FLAGS.glob("0.*.json")), key=version_tuple)


def flags_of(version: str) -> dict[str, dict[str, object]]:
    data = json.loads((FLAGS / f"{version}.json").read_text())
    return {option: row for row in data["launch_server"] for option in row["o"]}


def present_in(flag: str) -> list[str]:
    """Every release 0.5.2-0.5.23 that has `--flag`, from the history of additions/removals."""
    have = "--" + flag in flags_of(RELEASES[0])
    out = []
    for release in RELEASES:
        change = HISTORY["changes"][release].get("launch_server", {})
        if "--" + flag in change.get("added", []):
            have = True
        if "--" + flag in change.get("removed", []):
            have = False
        if have:
            out.append(release)
    return out


@pytest.fixture(scope="module")
def table() -> FlagTable:
    return load_table(ROOT / "config" / "engines" / "sglang" / "flags.yaml")


def test_every_rename_matches_the_real_releases(table: FlagTable) -> None:
    assert table.renames
    for rename in table.renames:
        new_releases = present_in(rename.new)
        assert new_releases and version_tuple(new_releases[0]) <= rename.new_since, rename
        old_releases = present_in(rename.old)
        assert rename.old_until is not None
        assert version_tuple(old_releases[-1]) == rename.old_until, rename
        for version in KEPT:
            at = version_tuple(version)
            row = flags_of(version).get("--" + rename.old)
            if rename.new_since <= at <= rename.old_until:
                assert row is not None and row.get("k", "").startswith("Deprecated"), version
                assert row.get("new") == "--" + rename.new, version
            elif at > rename.old_until:
                assert row is None, (rename.old, version)


def test_every_bound_matches_the_real_releases(table: FlagTable) -> None:
    for bound in table.bounds:
        for version in KEPT:
            row = flags_of(version).get("--" + bound.flag)
            if bound.never:
                assert row is None, (bound.flag, version)
                continue
            assert bound.since is not None
            has = row is not None and (bound.value is None or bound.value in (row.get("c") or []))
            assert has == (version_tuple(version) >= bound.since), (bound.flag, version)


def test_the_issue_s_four_facts(table: FlagTable) -> None:
    assert present_in("cuda-graph-max-bs") == [f"0.5.{n}" for n in range(2, 20)]
    assert present_in("enable-torch-symm-mem")[0] == "0.5.3"
    assert present_in("enable-custom-allreduce-pcie") == []
    assert "flashinfer" not in (flags_of("0.5.8")["--moe-a2a-backend"]["c"] or [])
    assert "flashinfer" in (flags_of("0.5.9")["--moe-a2a-backend"]["c"] or [])
    assert table.name_for("cuda-graph-max-bs", "0.5.13") == "cuda-graph-max-bs"
    assert table.name_for("cuda-graph-max-bs", "0.5.14") == "cuda-graph-max-bs-decode"
    assert table.name_for("cuda_graph_max_bs", "0.5.23") == "cuda-graph-max-bs-decode"
    assert table.name_for("cuda-graph-max-bs-decode", "0.5.2") == "cuda-graph-max-bs"


def test_to_release_renames_the_args_and_the_declared_change(table: FlagTable) -> None:
    config = RunConfig(
        approach="small-graphs", role="approach", parent=None, hypothesis="",
        change={"server_args": {"cuda-graph-max-bs": 128}, "env": {}},
        server_args={"tp-size": 8, "cuda-graph-max-bs": 128}, env={},
    )
    on_new = to_release(config, "0.5.23", table)
    assert on_new.server_args == {"tp-size": 8, "cuda-graph-max-bs-decode": 128}
    assert on_new.change == {"server_args": {"cuda-graph-max-bs-decode": 128}, "env": {}}
    assert to_release(config, "0.5.2", table) is config


def test_hints_name_the_release_or_the_real_knob(table: FlagTable) -> None:
    assert table.hint("enable-torch-symm-mem", "0.5.2") == (
        "--enable-torch-symm-mem is in SGLang 0.5.3 and later; this is 0.5.2"
    )
    assert table.hint("enable-torch-symm-mem", "0.5.3") is None
    assert table.hint("moe-a2a-backend", "0.5.8", value="flashinfer") == (
        "--moe-a2a-backend flashinfer is in SGLang 0.5.9 and later; this is 0.5.8"
    )
    assert table.hint("moe-a2a-backend", "0.5.8", value="deepep") is None
    pcie = table.hint("enable-custom-allreduce-pcie", "0.5.23")
    assert pcie is not None and "--disable-custom-all-reduce" in pcie


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("renamed: [{old: a, new: b}]", "renamed #1: missing key 'new_since'"),
        ("renamed: [{old: a, new: b, new_since: '0.5', x: 1}]", "renamed #1: unknown key 'x'"),
        ("bounded: [{flag: a, since: 'soon'}]", "bounded #1: 'soon' is not a version"),
        ("bounded: [{flag: a}]", "bounded #1: give exactly one of 'since' and 'never: true'"),
        ("bounded: [{flag: --a, never: true}]", "bounded #1: '--a' is not a flag name"),
        ("renamed: {}", "key 'renamed' must be a list"),
        ("aliases: []", "unknown key 'aliases'"),
    ],
)
def test_a_bad_table_is_refused_with_the_entry(text: str, message: str) -> None:
    with pytest.raises(PresetError, match=f"^t.yaml: {message}"):
        parse_table(text, source="t.yaml")


def test_an_overridden_config_without_a_table_uses_the_shipped_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECBENCH_CONFIG_DIR", str(tmp_path))
    assert load_table().name_for("cuda-graph-max-bs", "0.5.20") == "cuda-graph-max-bs-decode"
