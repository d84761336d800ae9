"""Knob value types: config/engines/sglang/flag_types.yaml against the real releases' flag sets, the
local engine's from its child's parser, and the check of a plan's values (issue 14, item 3)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from jobs.batches.planning import plan_batch
from jobs.batches.values import check_values
from jobs.core.plans import parse_sets
from jobs.engines import type_table as table_for
from jobs.engines.flag_types import FlagType, parse_types
from jobs.engines.local import child as local_child
from jobs.engines.local.types import local_table
from jobs.engines.sglang.flag_table import version_tuple
from jobs.engines.sglang.types import sglang_table
from jobs.errors import KnobError, PresetError, UserError

ROOT = Path(__file__).resolve().parents[3]
FLAGS = ROOT / "tests" / "standin" / "sglang" / "flags"
TABLE = ROOT / "config" / "engines" / "sglang" / "flag_types.yaml"
KINDS = {None: "str", "nullable_str": "str", "int": "int", "float": "float",
         "human_readable_int": "human_readable_int", "loads": "json", "json_list_type": "json"}


def launch_rows(version: str, tool: str = "launch_server") -> dict[str, dict[str, Any]]:
    data = json.loads((FLAGS / f"{version}.json").read_text())
    return {o: row for row in data[tool] for o in row["o"]}


def shipped() -> dict[str, Any]:
    import yaml

    data: dict[str, Any] = yaml.safe_load(TABLE.read_text())
    return data


# ------------------------------------------------------------------ values, kind by kind

def fits(kind: str, value: Any, **extra: Any) -> bool:
    return FlagType(flag="x", kind=kind, **extra).problem(value) is None


@pytest.mark.parametrize(("kind", "good", "bad"), [
    ("int", [3, "3", -1, 0], ["abc", 2.5, "2.5", True, "", None, [1]]),
    ("positive_int", [1, "8"], [0, -1, "0", "x", 1.5]),
    ("float", [0.8, 1, "0.85", "1e-3"], ["abc", float("nan"), False, "", None]),
    ("human_readable_int", [4096, "4k", "25.6k", "1Mi"], ["4kb", "1.5Ki", "many", 2.5]),
    ("json", ['{"a": 1}', "[1, 2]", 3], ["{a: 1}", "", True]),
    ("str", ["EAGLE3", "", 8], [True, None]),
    ("switch", [True, False, None], ["maybe", 1, "true "]),
])
def test_each_kind_takes_what_argparse_would_and_refuses_the_rest(
    kind: str, good: list[Any], bad: list[Any]
) -> None:
    assert [v for v in good if not fits(kind, v)] == []
    assert [v for v in bad if fits(kind, v)] == []


def test_choices_lists_and_the_optional_value() -> None:
    assert fits("str", "deepep", choices=("none", "deepep"))
    assert not fits("str", "deep", choices=("none", "deepep"))
    assert fits("int", 4, choices=(1, 2, 4))  # choices compared as argv has them
    assert fits("int", [1, 2], nargs="+") and not fits("int", [1, "x"], nargs="+")
    assert not fits("int", [], nargs="+") and fits("int", [], nargs="*")
    assert not fits("int", [1, 2])  # one value, not a list
    assert fits("float", True, nargs="?") and fits("float", 0.5, nargs="?")


def test_a_refusal_names_the_knob_the_engine_and_what_it_got() -> None:
    flag = FlagType(flag="threads", kind="int")
    assert flag.refusal("threads", "abc", engine="local engine") == (
        "threads takes an integer (local engine), got 'abc'")
    assert flag.refusal("threads", 4, engine="local engine") is None
    choice = FlagType(flag="dtype", kind="str", choices=("auto", "half"))
    assert choice.refusal("dtype", "fp7", engine="SGLang") == (
        "dtype takes one of auto, half (SGLang), got 'fp7'")


# ------------------------------------------------------------------ the shipped SGLang table

@pytest.mark.parametrize(("section", "tool"), [("flags", "launch_server"),
                                              ("bench", "bench_serving")])
def test_the_shipped_table_agrees_with_the_real_releases_flag_sets(
    section: str, tool: str
) -> None:
    """Every typed flag is in the flag sets read from the wheels, with the same type, arity and
    (for the release it was typed from) choices, in the first and last release it names."""
    data = shipped()
    releases = data["releases"]
    assert releases == sorted(releases, key=version_tuple)
    assert all((FLAGS / f"{v}.json").is_file() for v in releases)
    sets = {v: launch_rows(v, tool) for v in releases}
    wrong = []
    assert data[section]
    for name, item in data[section].items():
        options = ["--" + n for n in [name, *item.get("aliases", [])]]
        for version in (*item["in"], item["typed"]):
            if not any(o in sets[version] for o in options):
                wrong.append(f"{name}: not in {version}")
        row = next(sets[item["typed"]][o] for o in options if o in sets[item["typed"]])
        kind = "switch" if "n" not in row else KINDS.get(row.get("t"), "opaque")
        if kind != item["type"]:
            wrong.append(f"{name}: {item['type']} here, {kind} in {item['typed']}")
        if row.get("n", 1) != item.get("nargs", 1) and "n" in row:
            wrong.append(f"{name}: nargs {item.get('nargs')} here, {row.get('n')}")
        if "choices" in item and not set(row.get("c") or ()) <= set(item["choices"]):
            wrong.append(f"{name}: choices of {item['typed']} missing")
        rows = [sets[v][o] for v in releases for o in options[:1] if o in sets[v]]
        if "choices" not in item and rows and all(r.get("c") for r in rows):
            # no choices written only where some release takes any value (or builds them)
            wrong.append(f"{name}: every release has choices, the table none")
        if not re.fullmatch(r"\d+\.\d+\.\d+ \S+\.py:\d+", item["source"]):
            wrong.append(f"{name}: source {item['source']!r}")
        elif not item["source"].startswith(item["typed"] + " "):
            wrong.append(f"{name}: source not from {item['typed']}")
    assert wrong == []


@pytest.mark.parametrize(("section", "tool"), [("flags", "launch_server"),
                                              ("bench", "bench_serving")])
def test_the_shipped_table_covers_every_visible_flag_of_every_release(
    section: str, tool: str
) -> None:
    data = shipped()
    named = {n for name, item in data[section].items() for n in [name, *item.get("aliases", [])]}
    missing = sorted(
        f"{version} {option}" for version in data["releases"]
        for option, row in launch_rows(version, tool).items()
        if option.startswith("--") and not row.get("h") and option[2:] not in named
    )
    assert missing == []


def test_the_knobs_the_presets_name_are_typed_as_the_releases_declare_them() -> None:
    table = sglang_table()
    expect = {"mem-fraction-static": "float", "cuda-graph-max-bs": "int",
              "cuda-graph-max-bs-decode": "int", "tp-size": "int", "ep-size": "int",
              "speculative-num-steps": "int", "disable-custom-all-reduce": "switch",
              "trust-remote-code": "switch", "context-length": "human_readable_int"}
    assert {k: getattr(table.lookup(k), "kind", None) for k in expect} == expect
    backend = table.lookup("moe-a2a-backend")
    assert backend is not None and {"none", "deepep", "flashinfer"} <= set(backend.choices or ())
    assert table.lookup("tensor_parallel_size") is table.lookup("tp-size")
    bench = {"num-prompts": "int", "random-range-ratio": "float", "max-concurrency": "int"}
    assert {k: getattr(table.lookup(k, bench=True), "kind", None) for k in bench} == bench
    dataset = table.lookup("dataset-name", bench=True)
    assert dataset is not None and {"random", "random-ids"} <= set(dataset.choices or ())


def test_a_broken_type_table_is_a_one_line_error() -> None:
    with pytest.raises(PresetError, match="flag 'x': needs a type"):
        parse_types("flags:\n  x: {type: integer}\n")
    with pytest.raises(PresetError, match="nargs must be"):
        parse_types("flags:\n  x: {type: int, nargs: 2}\n")
    with pytest.raises(PresetError, match="expected a mapping"):
        parse_types("- 1\n")


def test_the_generator_merges_aliases_and_types_a_deprecated_alias_by_its_plain_releases() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import sglang_flag_types as script
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    merged = script.merge({
        "0.5.2": [{"o": ["--tensor-parallel-size", "--tp-size"], "n": 1, "t": "int"},
                  {"o": ["--old"], "n": 1, "t": "int"}],
        "0.5.14": [{"o": ["--tp-size", "--tensor-parallel-size"], "n": 1, "t": "int"},
                   {"o": ["--old"], "n": 1, "k": "DeprecatedAliasStoreAction"},
                   {"o": ["--on"], "c": None}],
    })
    assert set(merged) == {"--tensor-parallel-size", "--old", "--on"}
    assert merged["--tensor-parallel-size"]["aliases"] == {"--tp-size"}
    assert (merged["--old"]["kind"], merged["--old"]["typed_in"]) == ("int", "0.5.2")
    assert merged["--on"]["kind"] == "switch" and "choices" not in merged["--on"]


# ------------------------------------------------------------------ the local engine

def test_the_local_types_are_the_childs_own_declaration() -> None:
    table = local_table()
    flags = [f[2:] for f in local_child.knob_flags("server")]
    assert sorted(table.server) == sorted(flags)
    assert table.lookup("threads") is not None and table.lookup("threads").kind == "positive_int"
    assert table.lookup("seed") is not None and table.lookup("seed").kind == "int"
    assert table.lookup("num-prompts", bench=True) is not None
    with pytest.raises(SystemExit):  # the child refuses what the check refuses
        local_child.parse_args(["--threads", "0"])


@pytest.mark.parametrize("preset", ["cpu-demo", "eagle3"])
def test_every_overridable_knob_of_the_shipped_presets_is_typed(preset: str) -> None:
    from jobs.core.plans import load_preset

    loaded = load_preset(preset)
    table = table_for(loaded.engine)
    assert table is not None
    assert [k for k in loaded.overridable if table.lookup(k) is None] == []


# ------------------------------------------------------------------ a plan's values

@pytest.mark.parametrize("preset", ["cpu-demo", "eagle3", "eagle3-tune"])
def test_the_shipped_presets_pass_the_check(preset: str) -> None:
    check_values(plan_batch(preset))


def test_good_overrides_pass_and_bad_ones_name_the_set() -> None:
    sets = ["threads=2", "seed=7"]
    check_values(plan_batch("cpu-demo", overrides=parse_sets(sets)))
    sets = ["mem-fraction-static=0.8", "cuda-graph-max-bs=128"]
    check_values(plan_batch("eagle3", overrides=parse_sets(sets)))
    sets = ["seed=  "]
    with pytest.raises(KnobError, match=r"^--set seed=  : seed takes an integer"):
        check_values(plan_batch("cpu-demo", overrides=parse_sets(sets)))
    # retry's overrides carry no raw text: the message shows the value
    with pytest.raises(KnobError, match=r"^--set threads=abc: threads takes"):
        check_values(plan_batch("cpu-demo", overrides={"threads": "abc"}))


def test_an_unknown_engine_is_named_and_unknown_flags_are_left_to_preflight() -> None:
    planned = plan_batch("cpu-demo")
    with pytest.raises(UserError, match=r"unknown engine 'other'; known engines: local, sglang"):
        check_values(planned.__class__(**{**planned.__dict__, "engine": "other"}))
    odd = plan_batch("cpu-demo")
    odd.baseline.server_args["no-such-flag"] = "abc"
    check_values(odd)
