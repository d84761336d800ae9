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


def test_the_same_table_in_another_folder_is_parsed_once_and_a_broken_one_names_its_file(
    tmp_path: Path,
) -> None:
    """jobs/core/config_files `parsed_once`: a copied config folder's table is the table already
    parsed; a broken copy is parsed, refused in its own file's name, and not kept."""
    text = (SHIPPED.parent / "engines" / "sglang" / "flag_types.yaml").read_text(encoding="utf-8")
    parses: list[str] = []

    def parse(body: str, source: str) -> int:
        parses.append(source)
        if "broken" in body:
            raise PresetError(f"{source}: broken")
        return len(body)

    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "t.yaml").write_text(text, encoding="utf-8")
    kind = f"a test's table {tmp_path}"
    assert config_files.parsed_once(tmp_path / "a" / "t.yaml", kind, parse) == len(text)
    assert config_files.parsed_once(tmp_path / "b" / "t.yaml", kind, parse) == len(text)
    assert parses == [str(tmp_path / "a" / "t.yaml")]
    (tmp_path / "b" / "t.yaml").write_text("broken\n", encoding="utf-8")
    for _ in range(2):
        with pytest.raises(PresetError, match=rf"^{re.escape(str(tmp_path / 'b' / 't.yaml'))}"):
            config_files.parsed_once(tmp_path / "b" / "t.yaml", kind, parse)
    assert len(parses) == 3
