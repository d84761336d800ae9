"""Failure rules: the cause of a failed run, read from its log (SPEC.md, "Verdict rules").

`config/failure_rules.yaml` lists rules in the precedence of their tags; the first rule that
matches any line of a log tail gives the cause and `why` quotes that line. Lines matching the
file's `ignore` patterns (boilerplate such as a server's "Possible solutions:") never match. A rule
may carry a `context` regex that one of the `context_lines` lines just before the match must
also match. Fatal rules let the live log watcher stop a server that can only die. A rule tagged
`crash` (last in the precedence) names no cause of its own but quotes the line and may be fatal.

Rules of `kind: fallback` name no cause: they match lines where the server says a feature is not
supported and carries on with the default path. A run whose declared change touches one of the
rule's `knobs` (any knob when it lists none) and that logged such a line did not test its
hypothesis (SPEC.md's engine contracts): `fallback_line` finds the line.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from jobs import settings
from jobs.core.errors import PresetError

PRECEDENCE: tuple[str, ...] = (
    "arch-unsupported",
    "bad-config",
    "out-of-memory",
    "cuda-graph-incompatible",
    "nccl-error",
    "assertion",
)
CAUSES: tuple[str, ...] = (*PRECEDENCE, "timeout", "crash")
# The tags a cause rule may carry, in file order: a `crash` rule only quotes its line.
RULE_TAGS: tuple[str, ...] = (*PRECEDENCE, "crash")
KINDS = ("cause", "fallback")

CAUSE_TEXT: dict[str, str] = {
    "arch-unsupported": "the GPU's architecture is not supported by a kernel or library",
    "bad-config": "a flag, a combination of flags or an env reference was refused",
    "out-of-memory": "the GPU (or host) ran out of memory",
    "cuda-graph-incompatible": "an operation cannot run inside a captured CUDA graph",
    "nccl-error": "a collective communication (NCCL) call failed or hung",
    "assertion": "an assertion in the server or a kernel failed",
    "timeout": "the run did not finish within its time limit",
    "crash": "the server exited without a recognised cause",
}

DEFAULT_CONTEXT_LINES = 5
_TOP_KEYS = frozenset({"ignore", "rules"})
_REQUIRED_KEYS = ("tag", "name", "pattern", "fatal", "explanation")
_FALLBACK_KEYS = ("name", "pattern", "explanation")
_RULE_KEYS = frozenset({*_REQUIRED_KEYS, "context", "context_lines", "kind", "knobs"})
# A Python traceback frame ("  File \"x.py\", line 3, in f"), after any log prefix.
_FRAME = re.compile(r'^(?P<lead>.*?)(?P<indent> *)File "[^"]*", line \d+')
_CODE_LOOKBACK = 20


@dataclass(frozen=True)
class Rule:
    """One pattern that names a cause; `context` must match a line just before, when set."""

    name: str
    tag: str
    pattern: re.Pattern[str]
    fatal: bool
    explanation: str
    context: re.Pattern[str] | None = None
    context_lines: int = DEFAULT_CONTEXT_LINES
    kind: str = "cause"
    knobs: tuple[str, ...] = ()  # fallback rules: the knobs whose feature the line is about
    # The pattern over a whole log at once (line anchors kept): a cheap test that skips the
    # rule when no line of the log can match it.
    whole_log: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        whole = re.compile(self.pattern.pattern, self.pattern.flags | re.MULTILINE)
        object.__setattr__(self, "whole_log", whole)

    def is_match(self, line: str, previous: Sequence[str] = ()) -> bool:
        if not self.pattern.search(line):
            return False
        if self.context is None:
            return True
        window = previous[-self.context_lines :] if self.context_lines else ()
        return any(self.context.search(before) for before in window)


@dataclass(frozen=True)
class Match:
    """The rule that named a cause and the (stripped) log line it matched."""

    tag: str
    line: str
    rule: Rule


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...]
    ignore: tuple[re.Pattern[str], ...] = ()
    fallbacks: tuple[Rule, ...] = ()
    # The ignore patterns as one alternation: one search per line instead of one per pattern.
    ignore_any: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        combined = None
        if self.ignore and all(p.flags == self.ignore[0].flags for p in self.ignore):
            try:
                combined = re.compile(
                    "|".join(f"(?:{p.pattern})" for p in self.ignore), self.ignore[0].flags
                )
            except re.error:  # e.g. inline global flags inside one pattern
                combined = None
        object.__setattr__(self, "ignore_any", combined)

    def is_ignored(self, line: str) -> bool:
        if self.ignore_any is not None:
            return self.ignore_any.search(line) is not None
        return any(pattern.search(line) for pattern in self.ignore)

    def classify(self, log_text: str) -> Match | None:
        """The first rule, in precedence order, that matches a non-ignored line of the log."""
        lines = log_text.splitlines()
        code = _traceback_code(lines)
        candidates = [
            (i, line)
            for i, line in enumerate(lines)
            if line.strip() and i not in code and not self.is_ignored(line)
        ]
        text = "\n".join(line for _, line in candidates)
        offsets = list(itertools.accumulate((len(line) + 1 for _, line in candidates), initial=0))
        for rule in self.rules:
            # Jump from one whole-log hit to the next; the per-line test stays authoritative.
            position = 0
            while (hit := rule.whole_log.search(text, position)) is not None:
                k = bisect.bisect_right(offsets, hit.start()) - 1
                i, line = candidates[k]
                if rule.is_match(line, lines[max(0, i - rule.context_lines) : i]):
                    return Match(tag=rule.tag, line=line.strip(), rule=rule)
                position = offsets[k + 1]
                if position >= len(text):
                    break
        return None

    def fatal_match(self, line: str, previous: Sequence[str] = ()) -> Match | None:
        """The first fatal rule matching one new server log line (`previous`: lines before it)."""
        recent = [*previous[-_CODE_LOOKBACK:], line]
        if not line.strip() or self.is_ignored(line) or len(recent) - 1 in _traceback_code(recent):
            return None
        for rule in self.rules:
            if rule.fatal and rule.is_match(line, previous):
                return Match(tag=rule.tag, line=line.strip(), rule=rule)
        return None

    def fallback_match(self, line: str) -> Match | None:
        """The first fallback rule matching one server log line."""
        if not line.strip() or self.is_ignored(line):
            return None
        for rule in self.fallbacks:
            if rule.is_match(line):
                return Match(tag="fallback", line=line.strip(), rule=rule)
        return None

    def explain(self, tag: str) -> str:
        """One line saying what a cause tag means."""
        try:
            return CAUSE_TEXT[tag]
        except KeyError:
            raise ValueError(f"unknown cause tag {tag!r}") from None


def cause_of(*, log_tail: str | None, status: str, rules: RuleSet) -> tuple[str, str]:
    """The cause tag of a failed run and the line that shows it (SPEC.md's rule 2)."""
    text = log_tail or ""
    match = rules.classify(text)
    if match is not None:
        return match.tag, match.line
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
    if status == "timeout":
        return "timeout", (f"timed out; last log line: {last}" if last else "timed out with no log")
    return "crash", last or "the server exited with no log"


def fallback_line(
    *,
    log_tail: str | None,
    lines: Sequence[str] | None,
    change: dict[str, dict[str, Any]],
    rules: RuleSet,
) -> str | None:
    """The first line (seen live, else in the log tail) where the server fell back from a
    feature of the declared `change`; None when it did not."""
    changed = {_knob(k) for part in change.values() if isinstance(part, dict) for k in part}
    for line in [*(lines or []), *(log_tail or "").splitlines()]:
        match = rules.fallback_match(line)
        if match is not None and (not match.rule.knobs or changed & set(match.rule.knobs)):
            return match.line
    return None


def _knob(key: str) -> str:
    """A server arg as its flag name (`tp_size` -> `tp-size`); an env name (NCCL_ALGO) as is."""
    return key if key.isupper() else key.lstrip("-").replace("_", "-")


def load_rules(path: Path | None = None) -> RuleSet:
    """The failure rules of `path` (default: failure_rules.yaml in the config folder), cached."""
    target = (path or settings.config_dir() / "failure_rules.yaml").resolve()
    try:
        stat = target.stat()
    except OSError as exc:
        raise PresetError(f"{target}: cannot read the failure rules: {exc.strerror}") from None
    return _load_cached(target, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _load_cached(path: Path, mtime_ns: int, size: int) -> RuleSet:
    # mtime and size are part of the key only so that an edited file is read again
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PresetError(f"{path}: cannot read the failure rules: {exc.strerror}") from None
    return parse_rules(text, source=str(path))


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
    if not isinstance(data, dict):
        raise PresetError(f"{source}: expected a mapping with 'rules' and 'ignore'")
    unknown = sorted(str(key) for key in data if key not in _TOP_KEYS)
    if unknown:
        raise PresetError(f"{source}: unknown key {unknown[0]!r} (expected 'rules', 'ignore')")
    raw_rules = data.get("rules")
    if not isinstance(raw_rules, list) or not raw_rules:
        raise PresetError(f"{source}: key 'rules' must be a non-empty list")
    raw_ignore = data.get("ignore") or []
    if not isinstance(raw_ignore, list):
        raise PresetError(f"{source}: key 'ignore' must be a list of regexes")
    lines = _rule_lines(root)
    ignore = tuple(
        _compile(item, where=f"{source}: ignore #{n}") for n, item in enumerate(raw_ignore, 1)
    )
    rules: list[Rule] = []
    fallbacks: list[Rule] = []
    for n, raw in enumerate(raw_rules, 1):
        line = f" (line {lines[n - 1]})" if n - 1 < len(lines) else ""
        label = raw.get("name") if isinstance(raw, dict) else None
        named = repr(label) if isinstance(label, str) and label else f"#{n}"
        rule = _to_rule(raw, where=f"{source}: rule {named}{line}")
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


def _to_rule(raw: Any, *, where: str) -> Rule:
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
    if not isinstance(raw["fatal"], bool):
        raise PresetError(f"{where}: key 'fatal' must be true or false")
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
        pattern=_compile(raw["pattern"], where=f"{where}: key 'pattern'"),
        fatal=raw["fatal"],
        explanation=raw["explanation"].strip(),
        context=None if context is None else _compile(context, where=f"{where}: key 'context'"),
        context_lines=context_lines,
    )


def _to_fallback(raw: dict[str, Any], *, where: str) -> Rule:
    for key in _FALLBACK_KEYS:
        if key not in raw:
            raise PresetError(f"{where}: missing key {key!r}")
        if not isinstance(raw[key], str) or not raw[key].strip():
            raise PresetError(f"{where}: key {key!r} must be a non-empty string")
    for key in ("tag", "fatal", "context", "context_lines"):
        if key in raw:
            raise PresetError(f"{where}: key {key!r} is not for rules of kind 'fallback'")
    knobs = raw.get("knobs", [])
    if not isinstance(knobs, list) or not all(isinstance(k, str) and k for k in knobs):
        raise PresetError(f"{where}: key 'knobs' must be a list of knob names")
    return Rule(
        name=raw["name"], tag="fallback", kind="fallback", fatal=False,
        pattern=_compile(raw["pattern"], where=f"{where}: key 'pattern'"),
        explanation=raw["explanation"].strip(), knobs=tuple(_knob(k) for k in knobs),
    )


def _traceback_code(lines: Sequence[str]) -> set[int]:
    """Indexes of traceback frame lines and the source lines under them.

    They quote code (`raise RuntimeError("Not enough memory...")`), never what happened, so no
    rule matches them; they still count as context for the line after them.
    """
    code: set[int] = set()
    frame: tuple[str, int] | None = None
    for i, line in enumerate(lines):
        found = _FRAME.match(line)
        if found:
            frame = (found["lead"], len(found["indent"]))
            code.add(i)
            continue
        if frame is not None and line.startswith(frame[0]):
            rest = line[len(frame[0]) :]
            if rest.strip() and len(rest) - len(rest.lstrip(" ")) > frame[1]:
                code.add(i)
                continue
        frame = None
    return code


def _compile(pattern: Any, *, where: str) -> re.Pattern[str]:
    if not isinstance(pattern, str):
        raise PresetError(f"{where}: must be a regex string")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise PresetError(f"{where}: bad regex: {exc}") from None


def _parse_yaml(text: str) -> tuple[Any, Any]:
    """The document's node tree (for line numbers) and its data, from one parse with libyaml
    when PyYAML has it: the rules are read at every batch's start, and the pure-Python parser
    took a few hundred milliseconds of it, twice."""
    loader = _FAST_LOADER(text)
    try:
        root = loader.get_single_node()
        return root, None if root is None else loader.construct_document(root)
    finally:
        loader.dispose()


_FAST_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _rule_lines(root: Any) -> list[int]:
    """The 1-based line of each item of `rules`, for error messages (empty when unknown)."""
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        if getattr(key, "value", None) == "rules" and isinstance(value, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in value.value]
    return []
