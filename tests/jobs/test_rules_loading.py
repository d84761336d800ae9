"""The failure rules are parsed once, with libyaml where PyYAML has it (issue 19: the pure-Python
parser read the file twice at every batch's start, a few hundred milliseconds): the same rule set
as the pure-Python parser gives, the same line numbers, and the same words for a broken file.
The engines' flag-type tables, 100 KB each, go through the same fast path (jobs/core/config_files
`load_yaml`) with the same guarantees."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobs.core import config_files
from jobs.core.rules import RuleSet, parse_rules
from jobs.core.rules import _rules as rules_module
from jobs.errors import PresetError

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "failure_rules.yaml"


def described(rule_set: RuleSet) -> list[Any]:
    """Every rule's fields, patterns as their source text."""
    def plain(value: Any) -> Any:
        if isinstance(value, re.Pattern):
            return (value.pattern, value.flags)
        if isinstance(value, tuple | list):
            return [plain(v) for v in value]
        return value
    return [[(k, plain(v)) for k, v in vars(rule).items()]
            for rule in (*rule_set.rules, *rule_set.fallbacks)] + [plain(rule_set.ignore)]


def test_libyaml_is_what_parses_them() -> None:
    assert yaml.__with_libyaml__  # the venv's PyYAML has it: the fast path is the one tested
    assert rules_module.FAST_LOADER is yaml.CSafeLoader


def test_the_shipped_rules_read_the_same_with_either_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = SHIPPED.read_text(encoding="utf-8")
    fast = parse_rules(text)
    monkeypatch.setattr(rules_module, "FAST_LOADER", yaml.SafeLoader)
    assert described(fast) == described(parse_rules(text))
    assert len(fast.rules) > 20


@pytest.mark.parametrize("text", [
    "rules: [\n",
    "rules:\n  - name: oom\n    tag: x\n   bad: indent\n",
    "rules:\n  - {name: a\n",
    "rules: !!python/object:os.system ls\n",
])
def test_a_broken_file_reads_as_the_pure_python_parser_says(
    text: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(PresetError) as fast:
        parse_rules(text, source="r.yaml")
    monkeypatch.setattr(rules_module, "FAST_LOADER", yaml.SafeLoader)
    with pytest.raises(PresetError) as slow:
        parse_rules(text, source="r.yaml")
    assert str(fast.value) == str(slow.value)
    assert str(fast.value).startswith("r.yaml: invalid YAML")


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_a_flag_type_table_reads_the_same_with_either_parser(engine: str) -> None:
    text = (SHIPPED.parent / "engines" / engine / "flag_types.yaml").read_text(encoding="utf-8")
    assert config_files.FAST_LOADER is yaml.CSafeLoader
    assert config_files.load_yaml(text) == yaml.safe_load(text)


@pytest.mark.parametrize("text", [
    "flags: [\n", "flags:\n  a: 1\n b: 2\n", "x: !!python/name:os.system\n",
])
def test_a_broken_document_raises_what_the_pure_python_parser_raises(text: str) -> None:
    with pytest.raises(yaml.YAMLError) as fast:
        config_files.load_yaml(text)
    with pytest.raises(yaml.YAMLError) as slow:
        yaml.safe_load(text)
    assert str(fast.value) == str(slow.value)
