"""The failure rules as data, and how they match a log (docs/contracts.md, "Verdict rules").

A `RuleSet` holds cause rules in the precedence of their tags, the `ignore` patterns of
boilerplate lines, and the fallback rules; `classify` finds the first cause rule matching a
non-ignored line of a log tail (`cause_of` turns it into a run's cause), `fatal_match` judges one
live line, `fallback_line` finds where a server says it carried on without a feature of the
declared change. Finding, reading and merging the files is `jobs.core.rules`'.
"""

from __future__ import annotations

import bisect
import itertools
import re
import signal
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

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
    # tried before the shared file's rules of its tag: an engine's own line that quotes what a
    # shared rule of the tag would match (jobs.core.rules merges the files)
    first: bool = False
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
    """The rules of one or more files: cause rules in their tags' precedence, the patterns of
    boilerplate lines no rule matches, the fallback rules."""

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
        """The first fatal rule matching one new server log line (`previous`: lines before it).

        Called for every line a server logs: the traceback test (a quoted source line is no
        cause) is made only for a line a rule matches, the rare one (half a line's cost)."""
        if not line.strip() or self.is_ignored(line):
            return None
        rule = next((r for r in self.rules if r.fatal and r.is_match(line, previous)), None)
        if rule is None:
            return None
        recent = [*previous[-_CODE_LOOKBACK:], line]
        if len(recent) - 1 in _traceback_code(recent):
            return None
        return Match(tag=rule.tag, line=line.strip(), rule=rule)

    def fallback_match(self, line: str) -> Match | None:
        """The first fallback rule matching one server log line."""
        return next(self.fallback_matches(line), None)

    def fallback_matches(self, line: str) -> Iterator[Match]:
        """Every fallback rule matching one server log line, in order: a shared rule and an
        engine's may both match one line, each about its own knobs."""
        if not line.strip() or self.is_ignored(line):
            return
        for rule in self.fallbacks:
            if rule.is_match(line):
                yield Match(tag="fallback", line=line.strip(), rule=rule)

    def explain(self, tag: str) -> str:
        """One line saying what a cause tag means."""
        try:
            return CAUSE_TEXT[tag]
        except KeyError:
            raise ValueError(f"unknown cause tag {tag!r}") from None


def cause_of(
    *, log_tail: str | None, status: str, rules: RuleSet, exit_code: int | None = None
) -> tuple[str, str]:
    """The cause tag of a failed run and the line that shows it (docs/contracts.md's rule 2). A
    crash whose process was killed by a signal (`exit_code` -11: SIGSEGV) names the signal."""
    text = log_tail or ""
    match = rules.classify(text)
    if match is not None:
        return match.tag, match.line
    last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
    if status == "timeout":
        return "timeout", (f"timed out; last log line: {last}" if last else "timed out with no log")
    killed = killed_by(exit_code) if status == "failed" else None
    if killed is not None:
        return "crash", f"{killed}; its last log line: {last}" if last else killed
    return "crash", last or "the server exited with no log"


def killed_by(exit_code: int | None) -> str | None:
    """'killed by SIGSEGV (signal 11)' for the exit code of a process a signal ended (a
    negative return code, as Python's subprocess gives it), else None."""
    if exit_code is None or exit_code >= 0:
        return None
    try:
        name = signal.Signals(-exit_code).name
    except ValueError:
        name = "a signal"
    return f"killed by {name} (signal {-exit_code})"


def fallback_line(
    *,
    log_tail: str | None,
    lines: Sequence[str] | None,
    change: dict[str, dict[str, Any]],
    rules: RuleSet,
) -> str | None:
    """The first line (seen live, else in the log tail) where the server fell back from a
    feature of the declared `change`; None when it did not."""
    changed = {to_knob(k) for part in change.values() if isinstance(part, dict) for k in part}
    for line in [*(lines or []), *(log_tail or "").splitlines()]:
        for match in rules.fallback_matches(line):
            if not match.rule.knobs or changed & set(match.rule.knobs):
                return match.line
    return None


def to_knob(key: str) -> str:
    """A server arg as its flag name (`tp_size` -> `tp-size`); an env name (NCCL_ALGO) as is."""
    return key if key.isupper() else key.lstrip("-").replace("_", "-")


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
