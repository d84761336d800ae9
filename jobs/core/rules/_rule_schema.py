"""One failure rule's keys, validated and compiled into a `Rule` (the keys are drawn at the top of
config/failure_rules.yaml).

Every problem is one PresetError line that starts with `where` (the file, the rule's name and
its line, as `jobs.core.rules` gives them): an unknown or missing key, a value of the wrong
type, a bad regex, a tag that is not docs/contracts.md's, a key that is not for the rule's kind.
"""

from __future__ import annotations

import re
from typing import Any

from jobs.core.rules._rule_set import DEFAULT_CONTEXT_LINES, KINDS, RULE_TAGS, Rule, to_knob
from jobs.errors import PresetError

_REQUIRED_KEYS = ("tag", "name", "pattern", "fatal", "explanation")
_FALLBACK_KEYS = ("name", "pattern", "explanation")
_RULE_KEYS = frozenset({*_REQUIRED_KEYS, "context", "context_lines", "kind", "knobs", "first"})


def to_rule(raw: Any, *, where: str) -> Rule:
    """A rule of either kind from its YAML mapping; `where` starts every error."""
    if not isinstance(raw, dict):
        raise PresetError(f"{where}: a rule must be a mapping")
    unknown = sorted(str(key) for key in raw if key not in _RULE_KEYS)
    if unknown:
        raise PresetError(f"{where}: unknown key {unknown[0]!r}")
    kind = raw.get("kind", "cause")
    if kind not in KINDS:
        raise PresetError(f"{where}: key 'kind': {kind!r} is not one of {', '.join(KINDS)}")
    if kind == "fallback":
        return _to_fallback(raw, where=where)
    if "knobs" in raw:
        raise PresetError(f"{where}: key 'knobs' is for rules of kind 'fallback'")
    for key in _REQUIRED_KEYS:
        if key not in raw:
            raise PresetError(f"{where}: missing key {key!r}")
    for key in ("name", "tag", "pattern", "explanation"):
        if not isinstance(raw[key], str) or not raw[key].strip():
            raise PresetError(f"{where}: key {key!r} must be a non-empty string")
    if raw["tag"] not in RULE_TAGS:
        raise PresetError(
            f"{where}: key 'tag': unknown tag {raw['tag']!r} (one of {', '.join(RULE_TAGS)})"
        )
    for key in ("fatal", "first"):
        if not isinstance(raw.get(key, False), bool):
            raise PresetError(f"{where}: key {key!r} must be true or false")
    context = raw.get("context")
    if context is not None and not isinstance(context, str):
        raise PresetError(f"{where}: key 'context' must be a regex string")
    context_lines = raw.get("context_lines", DEFAULT_CONTEXT_LINES)
    if "context_lines" in raw and context is None:
        raise PresetError(f"{where}: key 'context_lines' needs a 'context'")
    if isinstance(context_lines, bool) or not isinstance(context_lines, int):
        raise PresetError(f"{where}: key 'context_lines' must be a whole number")
    if not 1 <= context_lines <= 50:
        raise PresetError(f"{where}: key 'context_lines' must be between 1 and 50")
    return Rule(
        name=raw["name"],
        tag=raw["tag"],
        pattern=compile_pattern(raw["pattern"], where=f"{where}: key 'pattern'"),
        fatal=raw["fatal"],
        explanation=raw["explanation"].strip(),
        context=(None if context is None
                 else compile_pattern(context, where=f"{where}: key 'context'")),
        context_lines=context_lines,
        first=raw.get("first", False),
    )


def _to_fallback(raw: dict[str, Any], *, where: str) -> Rule:
    for key in _FALLBACK_KEYS:
        if key not in raw:
            raise PresetError(f"{where}: missing key {key!r}")
        if not isinstance(raw[key], str) or not raw[key].strip():
            raise PresetError(f"{where}: key {key!r} must be a non-empty string")
    for key in ("tag", "fatal", "context", "context_lines", "first"):
        if key in raw:
            raise PresetError(f"{where}: key {key!r} is not for rules of kind 'fallback'")
    knobs = raw.get("knobs", [])
    if not isinstance(knobs, list) or not all(isinstance(k, str) and k for k in knobs):
        raise PresetError(f"{where}: key 'knobs' must be a list of knob names")
    return Rule(
        name=raw["name"], tag="fallback", kind="fallback", fatal=False,
        pattern=compile_pattern(raw["pattern"], where=f"{where}: key 'pattern'"),
        explanation=raw["explanation"].strip(), knobs=tuple(to_knob(k) for k in knobs),
    )


def compile_pattern(pattern: Any, *, where: str) -> re.Pattern[str]:
    """A regex string compiled; anything else, or a bad regex, one PresetError line."""
    if not isinstance(pattern, str):
        raise PresetError(f"{where}: must be a regex string")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise PresetError(f"{where}: bad regex: {exc}") from None
