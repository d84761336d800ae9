"""The shared failure rules merged with each engine's own (engines/<name>/failure_rules.yaml): one
RuleSet in docs/contracts.md's tag precedence, shared rules first within a tag, ignore patterns and
fallbacks concatenated, a name used twice an error naming both files, the cache on every file."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from jobs import settings
from jobs.core.rules import RULE_TAGS, cause_of, engine_rule_files, fallback_line, load_rules
from jobs.errors import PresetError

SHARED = """\
ignore: ['^shared-boilerplate']
rules:
  - tag: bad-config
    name: shared-flag
    pattern: 'unrecognized arguments'
    fatal: true
    explanation: a flag was refused
  - tag: out-of-memory
    name: shared-oom
    pattern: 'out of memory'
    fatal: true
    explanation: memory ran out
  - kind: fallback
    name: shared-fallback
    pattern: 'feature X is disabled'
    knobs: [enable-x]
    explanation: X fell back
"""

ALPHA = """\
ignore: ['^alpha-boilerplate']
rules:
  - tag: arch-unsupported
    name: alpha-arch
    pattern: 'no kernel for sm_\\d+'
    fatal: true
    explanation: no kernel
  - tag: out-of-memory
    name: alpha-oom
    pattern: 'No available memory for the cache'
    fatal: true
    explanation: no cache memory
  - tag: crash
    name: alpha-died
    pattern: 'engine died'
    fatal: true
    explanation: the engine died
  - kind: fallback
    name: alpha-fallback
    pattern: 'feature X is disabled'
    knobs: [alpha-x]
    explanation: X fell back, as alpha says it
"""

BETA = """\
rules:
  - tag: bad-config
    name: beta-flag
    pattern: 'invalid choice'
    fatal: true
    explanation: a choice was refused
  - tag: nccl-error
    name: beta-nccl
    pattern: 'NCCL error'
    fatal: true
    explanation: NCCL failed
"""


def folder(tmp_path: Path, *, engines: dict[str, str]) -> Path:
    """A config folder with the shared rules and an `engines/` folder holding `engines`' files
    (an engine without rules: an engine.yaml alone)."""
    config = tmp_path / "config"
    (config / "engines").mkdir(parents=True)
    (config / "failure_rules.yaml").write_text(SHARED)
    for name, text in engines.items():
        (config / "engines" / name).mkdir()
        if text:
            (config / "engines" / name / "failure_rules.yaml").write_text(text)
    return config


@pytest.fixture
def merged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    config = folder(tmp_path, engines={"beta": BETA, "alpha": ALPHA, "gamma": ""})
    monkeypatch.setenv("SPECBENCH_CONFIG_DIR", str(config))
    return config


def test_rules_keep_the_tag_precedence_shared_first_within_a_tag(merged: Path) -> None:
    rules = load_rules()
    assert [rule.name for rule in rules.rules] == [
        "alpha-arch",  # arch-unsupported
        "shared-flag", "beta-flag",  # bad-config: the shared file's first, then by engine folder
        "shared-oom", "alpha-oom",  # out-of-memory
        "beta-nccl",  # nccl-error
        "alpha-died",  # crash, last
    ]
    tags = [RULE_TAGS.index(rule.tag) for rule in rules.rules]
    assert tags == sorted(tags)


FIRST = """\
rules:
  - tag: bad-config
    name: delta-flag
    pattern: 'delta refused: .*unrecognized arguments'
    first: true
    fatal: true
    explanation: delta's own line, quoting what the shared rule matches
"""


def test_an_engine_rule_marked_first_is_tried_before_the_shared_rules_of_its_tag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = folder(tmp_path, engines={"beta": BETA, "delta": FIRST})
    monkeypatch.setenv("SPECBENCH_CONFIG_DIR", str(config))
    rules = load_rules()
    assert [rule.name for rule in rules.rules][:3] == ["delta-flag", "shared-flag", "beta-flag"]
    match = rules.classify("delta refused: unrecognized arguments: --x")
    assert match is not None and match.rule.name == "delta-flag"
    (config / "engines" / "delta" / "failure_rules.yaml").write_text(
        FIRST.replace("first: true", "first: 1"))
    with pytest.raises(PresetError, match="rule 'delta-flag'.*key 'first' must be true or false"):
        load_rules()


def test_the_shared_rules_name_no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine's own message is its file's, even one that must be tried first."""
    from jobs.core.engine_info import engine_names

    monkeypatch.delenv("SPECBENCH_CONFIG_DIR", raising=False)
    shared = load_rules(settings.shipped_config() / "failure_rules.yaml")
    named = [rule.name for rule in (*shared.rules, *shared.fallbacks)
             if any(engine in rule.name for engine in engine_names())]
    assert named == []
    capture = ("Exception: Capture cuda graph failed: operation not permitted when stream is "
               "capturing")
    match = load_rules().classify(capture)
    assert match is not None and match.rule.name == "sglang-capture-failed"


def test_ignore_patterns_and_fallbacks_are_concatenated(merged: Path) -> None:
    rules = load_rules()
    assert [p.pattern for p in rules.ignore] == ["^shared-boilerplate", "^alpha-boilerplate"]
    assert [rule.name for rule in rules.fallbacks] == ["shared-fallback", "alpha-fallback"]
    assert rules.classify("alpha-boilerplate: out of memory") is None
    assert rules.classify("shared-boilerplate: engine died") is None


def test_an_engine_s_lines_are_classified_by_the_merged_set(merged: Path) -> None:
    rules = load_rules()
    assert cause_of(log_tail="ERROR No available memory for the cache blocks.", status="failed",
                    rules=rules) == ("out-of-memory",
                                     "ERROR No available memory for the cache blocks.")
    # arch-unsupported, from an engine's file, beats an earlier line of a shared rule's tag
    log = "unrecognized arguments: --x\nno kernel for sm_120\n"
    assert cause_of(log_tail=log, status="failed", rules=rules)[0] == "arch-unsupported"
    match = rules.fatal_match("engine died")
    assert match is not None and match.rule.name == "alpha-died"


def test_a_fallback_line_counts_for_each_rule_s_knobs(merged: Path) -> None:
    """The shared rule matches the line first, but an engine's rule about another knob of the
    same feature still finds it."""
    rules = load_rules()
    line = "feature X is disabled because of reasons"
    for knob in ("enable-x", "alpha-x", "alpha_x"):
        change = {"server_args": {knob: True}, "env": {}}
        assert fallback_line(log_tail=line, lines=None, change=change, rules=rules) == line
    other = {"server_args": {"enable-y": True}, "env": {}}
    assert fallback_line(log_tail=line, lines=None, change=other, rules=rules) is None


def test_a_name_used_in_two_files_is_an_error_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = folder(tmp_path, engines={"alpha": ALPHA.replace("name: alpha-oom",
                                                              "name: shared-oom")})
    monkeypatch.setenv("SPECBENCH_CONFIG_DIR", str(config))
    with pytest.raises(PresetError) as caught:
        load_rules()
    message = str(caught.value)
    engine_file = config / "engines" / "alpha" / "failure_rules.yaml"
    assert message.startswith(f"{engine_file}: rule 'shared-oom' is also in ")
    assert str(config / "failure_rules.yaml") in message
    assert "\n" not in message


def test_a_fallback_name_clashes_across_files_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    beta = BETA + ("  - kind: fallback\n    name: shared-fallback\n    pattern: 'Y is off'\n"
                   "    explanation: Y fell back\n")
    config = folder(tmp_path, engines={"beta": beta})
    monkeypatch.setenv("SPECBENCH_CONFIG_DIR", str(config))
    with pytest.raises(PresetError, match=r"beta/failure_rules\.yaml: rule 'shared-fallback' is "
                                          r"also in .*config/failure_rules\.yaml"):
        load_rules()


def test_an_engine_file_s_own_error_names_that_file(merged: Path) -> None:
    bad = merged / "engines" / "beta" / "failure_rules.yaml"
    bad.write_text(BETA.replace("tag: nccl-error", "tag: gremlins"))
    with pytest.raises(PresetError, match=f"^{re.escape(str(bad))}: rule 'beta-nccl'"):
        load_rules()


def test_the_cache_follows_every_file(merged: Path) -> None:
    first = load_rules()
    assert load_rules() is first
    engine_file = merged / "engines" / "alpha" / "failure_rules.yaml"
    engine_file.write_text(ALPHA.replace("name: alpha-died", "name: alpha-gone"))
    os.utime(engine_file, ns=(1, 1))  # a new mtime even where the clock is coarse
    assert "alpha-gone" in [rule.name for rule in load_rules().rules]
    added = merged / "engines" / "gamma" / "failure_rules.yaml"
    added.write_text(BETA.replace("beta-", "gamma-"))
    assert "gamma-flag" in [rule.name for rule in load_rules().rules]
    added.unlink()
    assert "gamma-flag" not in [rule.name for rule in load_rules().rules]


def test_an_explicit_path_reads_that_file_alone(merged: Path) -> None:
    alone = load_rules(merged / "engines" / "beta" / "failure_rules.yaml")
    assert [rule.name for rule in alone.rules] == ["beta-flag", "beta-nccl"]


def test_without_its_own_engines_folder_the_shipped_engines_rules_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "failure_rules.yaml").write_text(SHARED)
    monkeypatch.setenv("SPECBENCH_CONFIG_DIR", str(tmp_path))
    shipped = settings.shipped_config() / "engines"
    assert engine_rule_files() == sorted(shipped.glob("*/failure_rules.yaml"))
    (tmp_path / "engines").mkdir()
    assert engine_rule_files() == []
    assert [rule.name for rule in load_rules().rules] == ["shared-flag", "shared-oom"]


# ------------------------------------------------------------------ the shipped engines' rules

# vLLM 0.33.0's lines as its logger prints them (vllm/logger.py _FORMAT), from the wheel's
# raise sites that config/engines/vllm/failure_rules.yaml quotes
VLLM_NO_CACHE = ("(EngineCore pid=812) ERROR 12-04 09:36:19 [core.py:1584] ValueError: No "
                 "available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                 "when initializing the engine.")
VLLM_CUSTOM_ALL_REDUCE = ("(Worker_TP1 pid=913) WARNING 12-04 09:36:02 [custom_all_reduce.py:268] "
                          "Custom allreduce is disabled because it's not supported on more than "
                          "two PCIe-only GPUs. To silence this warning, specify "
                          "disable_custom_all_reduce=True explicitly.")


def test_the_shipped_rules_merge_and_classify_a_vllm_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPECBENCH_CONFIG_DIR", raising=False)
    vllm_rules = settings.shipped_config() / "engines" / "vllm" / "failure_rules.yaml"
    assert vllm_rules in engine_rule_files()
    rules = load_rules()
    assert cause_of(log_tail=f"loading weights\n{VLLM_NO_CACHE}\n", status="failed",
                    rules=rules) == ("out-of-memory", VLLM_NO_CACHE)
    match = rules.classify(VLLM_NO_CACHE)
    assert match is not None and match.rule.name in {r.name for r in load_rules(vllm_rules).rules}
    # a vLLM preset asks for custom all-reduce with vLLM's own switch; the fallback still counts
    change = {"server_args": {"enable-custom-all-reduce": True}, "env": {}}
    assert fallback_line(log_tail=VLLM_CUSTOM_ALL_REDUCE, lines=None, change=change,
                         rules=rules) == VLLM_CUSTOM_ALL_REDUCE
