"""Failure rules: the cause of a failed run, read from its log (docs/contracts.md, "Verdict rules").

`config/failure_rules.yaml` lists rules in the precedence of their tags; the first rule that
matches any line of a log tail gives the cause and `why` quotes that line. Lines matching the
file's `ignore` patterns (boilerplate such as a server's "Possible solutions:") never match. A rule
may carry a `context` regex that one of the `context_lines` lines just before the match must
also match. Fatal rules let the live log watcher stop a server that can only die. A rule tagged
`crash` (last in the precedence) names no cause of its own but quotes the line and may be fatal.

Rules of `kind: fallback` name no cause: they match lines where the server says a feature is not
supported and carries on with the default path. A run whose declared change touches one of the
rule's `knobs` (any knob when it lists none) and that logged such a line did not test its
hypothesis (docs/contracts.md's engine contracts): `fallback_line` finds the line.

Each engine may ship its own rules beside its facts (`engines/<name>/failure_rules.yaml`, found by
folder: this module names no engine). `load_rules()` merges them with the shared file into one
RuleSet: cause rules keep the tags' precedence (within one tag the rules marked `first`, then
the shared file's, then each engine's in folder order), ignore patterns and fallback rules are
concatenated, and a rule name used in two files is an error naming both. The rules as data and
their matching live in `_rule_set`, one rule's keys in `_rule_schema`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from jobs import settings
from jobs.core.config_files import FAST_LOADER, top_level
from jobs.core.rules._rule_schema import compile_pattern, to_rule
from jobs.core.rules._rule_set import RULE_TAGS, Rule, RuleSet
from jobs.errors import PresetError

RULES_FILE = "failure_rules.yaml"
_TOP_KEYS = ("rules", "ignore")
# (path, mtime in ns, size) of each file read: part of the cache key, so an edit is read again
FileKey = tuple[Path, int, int]


def engine_rule_files() -> list[Path]:
    """Each engine's own failure rules: `engines/*/failure_rules.yaml` of the config folder when
    it has an `engines/` folder, else of the shipped config (where the engines' facts live)."""
    own = settings.config_dir() / "engines"
    folder = own if own.is_dir() else settings.shipped_config() / "engines"
    return sorted(folder.glob(f"*/{RULES_FILE}"))


def load_rules(path: Path | None = None) -> RuleSet:
    """The failure rules of `path` alone; by default the config folder's shared file merged
    with every engine's (`merge_rules`). Cached on each file's path, mtime and size."""
    paths = [path] if path is not None else [settings.config_dir() / RULES_FILE,
                                              *engine_rule_files()]
    return _load_cached(tuple(_file_key(p.resolve()) for p in paths))


def merge_rules(parts: Sequence[tuple[str, RuleSet]]) -> RuleSet:
    """One RuleSet of several files' (source, rules), the shared file first.

    Cause rules are ordered by docs/contracts.md's tag precedence, stably: within a tag, the rules
    marked `first` (an engine's line that quotes what a shared rule of its tag matches), then
    the files' order and each file's own. Ignore patterns and fallback rules are concatenated in
    the files' order. A rule name used in two files is a PresetError naming both."""
    seen: dict[str, str] = {}
    for source, ruleset in parts:
        for rule in (*ruleset.rules, *ruleset.fallbacks):
            if rule.name in seen:
                raise PresetError(
                    f"{source}: rule {rule.name!r} is also in {seen[rule.name]}: a rule's name is "
                    "unique across the shared rules and the engines' (rename one, or drop the "
                    "copy of a shared rule)")
            seen[rule.name] = source
    causes = sorted((rule for _, ruleset in parts for rule in ruleset.rules),
                    key=lambda rule: (RULE_TAGS.index(rule.tag), not rule.first))
    return RuleSet(
        rules=tuple(causes),
        ignore=tuple(pattern for _, ruleset in parts for pattern in ruleset.ignore),
        fallbacks=tuple(rule for _, ruleset in parts for rule in ruleset.fallbacks),
    )


def _file_key(path: Path) -> FileKey:
    try:
        stat = path.stat()
    except OSError as exc:
        raise PresetError(f"{path}: cannot read the failure rules: {exc.strerror}") from None
    return path, stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=8)
def _load_cached(files: tuple[FileKey, ...]) -> RuleSet:
    # mtime and size are part of the key only so that an edited file is read again
    parts = [(str(path), parse_rules(_read(path), source=str(path))) for path, _, _ in files]
    return parts[0][1] if len(parts) == 1 else merge_rules(parts)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PresetError(f"{path}: cannot read the failure rules: {exc.strerror}") from None


def parse_rules(text: str, *, source: str = "failure_rules.yaml") -> RuleSet:
    """Validate and compile a failure-rules document; any problem is a one-line PresetError."""
    try:
        root, data = _parse_yaml(text)
    except yaml.YAMLError as fast_error:
        error = fast_error
        try:  # the pure-Python parser's words, as every other file's error has them
            yaml.safe_load(text)
        except yaml.YAMLError as exc:
            error = exc
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(error, "problem", None) or "not valid YAML"
        raise PresetError(f"{source}: invalid YAML{where}: {problem}") from None
    data = top_level(data, source=source, keys=_TOP_KEYS)
    raw_rules = data.get("rules")
    if not isinstance(raw_rules, list) or not raw_rules:
        raise PresetError(f"{source}: key 'rules' must be a non-empty list")
    raw_ignore = data.get("ignore") or []
    if not isinstance(raw_ignore, list):
        raise PresetError(f"{source}: key 'ignore' must be a list of regexes")
    lines = _rule_lines(root)
    ignore = tuple(compile_pattern(item, where=f"{source}: ignore #{n}")
                   for n, item in enumerate(raw_ignore, 1))
    rules: list[Rule] = []
    fallbacks: list[Rule] = []
    for n, raw in enumerate(raw_rules, 1):
        line = f" (line {lines[n - 1]})" if n - 1 < len(lines) else ""
        label = raw.get("name") if isinstance(raw, dict) else None
        named = repr(label) if isinstance(label, str) and label else f"#{n}"
        rule = to_rule(raw, where=f"{source}: rule {named}{line}")
        if any(earlier.name == rule.name for earlier in (*rules, *fallbacks)):
            raise PresetError(f"{source}: rule {rule.name!r}{line}: key 'name': used twice")
        if rule.kind == "fallback":
            fallbacks.append(rule)
            continue
        if rules and RULE_TAGS.index(rule.tag) < RULE_TAGS.index(rules[-1].tag):
            raise PresetError(
                f"{source}: rule {rule.name!r}{line}: key 'tag': {rule.tag!r} is out of "
                f"precedence order (after {rules[-1].tag!r}; order: {', '.join(RULE_TAGS)})"
            )
        rules.append(rule)
    return RuleSet(rules=tuple(rules), ignore=ignore, fallbacks=tuple(fallbacks))


def _parse_yaml(text: str) -> tuple[Any, Any]:
    """The document's node tree (for line numbers) and its data, from one parse with libyaml
    when PyYAML has it: the rules are read at every batch's start, and the pure-Python parser
    took a few hundred milliseconds of it, twice."""
    loader = FAST_LOADER(text)
    try:
        root = loader.get_single_node()
        return root, None if root is None else loader.construct_document(root)
    finally:
        loader.dispose()


def _rule_lines(root: Any) -> list[int]:
    """The 1-based line of each item of `rules`, for error messages (empty when unknown)."""
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        if getattr(key, "value", None) == "rules" and isinstance(value, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in value.value]
    return []
