"""What an approach actually ran, and what the engine rejected: the facts remedies are chosen by.

`facts_of` reads a record (the engine, its fingerprint, its server args); `flag_problem` reads
the line a bad-config failure was classified by: a flag the flag table knows as renamed, one
that exists only in some releases, an unknown flag, a value outside the flag's vocabulary or
type, settings that conflict, or an env `${NAME}` the worker's environment lacks. The flag
table lives with each engine (`jobs.engines.flag_facts`); the core sees it through
`FlagFacts`, a protocol the engines' tables meet. Which knobs make a configuration parallel or
speculative is the engine's own (its `EngineInfo`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from jobs.core.advice._remedies import Facts
from jobs.core.engine_info import all_info, describe
from jobs.core.engine_info import engine_of as engine_that_ran
from jobs.core.records import RunRecord
from jobs.core.rules import RuleSet

CONFLICT_RULES = ("server-args-check", "incompatible-flags")
_UNRECOGNIZED = re.compile(r": error: unrecognized arguments: (?P<rest>.*)$")
_ARGUMENT = re.compile(r": error: argument (?P<flag>[^:]+): (?P<message>.*)$")
_CHOICE = re.compile(
    r"^invalid choice: (?P<value>'[^']*'|\S+) \(choose from (?P<choices>[^)]*)\)"
    r"(?: \((?P<hint>.*)\))?"
)
_BAD_TYPE = re.compile(r"^invalid \w+ value: (?P<value>'[^']*'|\S+)")
_TAIL = re.compile(r"^(?P<head>.*?) \((?P<hint>[^()]*)\)\s*$")
# secret_refs.UNSET_LINE and ARG_UNSET_LINE: the knob of the preset's env or server args, and
# the variable it refers to.
_UNSET = re.compile(
    r"^specbench: (?:env|server arg) (?P<knob>\S+): \$\{(?P<name>\w+)\} is not set in the ")
_BOUNDED = re.compile(r"is in \S+ \S+ and later|no \S+ release has")


class FlagFacts(Protocol):
    """What is known about an engine's flags across releases (its flag table)."""

    def name_for(self, key: str, version: str) -> str: ...

    def hint(self, flag: str, version: str, *, value: Any = None) -> str | None: ...


@dataclass(frozen=True)
class FlagProblem:
    """What the engine rejected; `kind` is one of remedies.FLAG_PROBLEMS."""

    kind: str
    line: str
    flag: str | None = None
    new_flag: str | None = None
    value: str | None = None
    choices: str | None = None
    hint: str | None = None


def engine_of(fingerprint: dict[str, Any], *, named: str | None = None) -> str:
    """The engine that ran a record: its own `engine`, else read from its fingerprint."""
    return engine_that_ran(fingerprint, named=named)


def has_gpu(fingerprint: dict[str, Any]) -> bool:
    count = fingerprint.get("gpu_count")
    gpu = str(fingerprint.get("gpu") or "none")
    return (isinstance(count, int) and count > 0) or (count is None and not gpu.startswith("none"))


def parallelism(server_args: dict[str, Any], *, engine: str | None = None) -> int:
    """The largest tp/ep/dp/pp size among the server args (1 when none is set): the engine's
    own knobs, or any engine's when it is not known."""
    infos = (describe(engine),) if engine else all_info()
    knobs = frozenset().union(*(i.parallel_args for i in infos))
    sizes = [1]
    for key, value in server_args.items():
        if key.lstrip("-").replace("_", "-") in knobs:
            try:
                sizes.append(int(value))
            except (TypeError, ValueError):
                continue
    return max(sizes)


def is_speculative(record: RunRecord) -> bool:
    if record.accept_length is not None:
        return True
    knobs = frozenset().union(*(i.speculative_args for i in all_info()))
    return any(
        value not in (None, False) for key, value in record.server_args.items()
        if key.lstrip("-").replace("_", "-") in knobs
    )


def facts_of(
    record: RunRecord,
    *,
    baseline: RunRecord,
    engine: str | None,
    problem: FlagProblem | None = None,
) -> Facts:
    fingerprint = record.fingerprint or baseline.fingerprint
    ran = engine or engine_of(fingerprint, named=record.engine or baseline.engine)
    on_gpu = describe(ran).gpu
    return Facts(
        engine=ran,
        gpu=on_gpu and has_gpu(fingerprint),
        multi_gpu=on_gpu and parallelism(record.server_args, engine=ran) > 1,
        speculative=is_speculative(record) and not is_speculative(baseline),
        flag=None if problem is None else problem.kind,
    )


def flag_problem(
    record: RunRecord, *, rules: RuleSet, flags: FlagFacts | None, engine: str
) -> FlagProblem:
    """What the engine rejected in a bad-config failure, read from the line that names it."""
    match = rules.classify(record.log_tail or "")
    line = match.line if match is not None else ""
    info = describe(engine)
    version = record.fingerprint.get(info.version_key) if info.version_key else None
    table = flags if isinstance(version, str) and _is_version(version) else None
    if (found := _UNRECOGNIZED.search(line)) is not None:
        return _unknown(found.group("rest"), line=line, table=table, version=version,
                        title=info.title)
    if (found := _ARGUMENT.search(line)) is not None and "not allowed with" not in line:
        flag = found.group("flag").split("/")[0].strip()
        return _bad_value(flag, found.group("message"), line=line, table=table, version=version)
    if (found := _UNSET.search(line)) is not None:  # a `${NAME}` the worker lacks
        return FlagProblem("env", line=line, flag=found.group("knob"), hint=found.group("name"))
    if (match is not None and match.rule.name in CONFLICT_RULES) or "not allowed with" in line:
        return FlagProblem("conflict", line=line)
    return FlagProblem("other", line=line)


def _unknown(
    rest: str, *, line: str, table: FlagFacts | None, version: Any, title: str
) -> FlagProblem:
    tail = _TAIL.match(rest)
    words, said = (tail.group("head"), tail.group("hint")) if tail else (rest, None)
    unknown = [w for w in words.split() if w.startswith("-")]
    flag = unknown[0] if unknown else None
    if table is not None and flag is not None:
        for each in unknown:
            name = each.lstrip("-")
            spelled = table.name_for(name, version)
            if spelled != name:
                return FlagProblem("renamed", line=line, flag=each, new_flag=f"--{spelled}",
                                   hint=f"{title} {version} spells it --{spelled}")
            if (hint := table.hint(each, version)) is not None:
                return FlagProblem("bounded", line=line, flag=each, hint=hint)
    if said and _BOUNDED.search(said):
        return FlagProblem("bounded", line=line, flag=flag, hint=said)
    return FlagProblem("unknown", line=line, flag=flag, hint=said)


def _bad_value(
    flag: str, message: str, *, line: str, table: FlagFacts | None, version: Any
) -> FlagProblem:
    choice = _CHOICE.match(message)
    bad_type = _BAD_TYPE.match(message)
    value = choice.group("value") if choice else bad_type.group("value") if bad_type else None
    said = choice.group("hint") if choice else None
    plain = value.strip("'") if value is not None else None
    if table is not None and plain is not None:
        said = table.hint(flag, version, value=plain) or said
    kind = "bounded" if said and _BOUNDED.search(said) else "value"
    return FlagProblem(
        kind, line=line, flag=flag, value=value,
        choices=choice.group("choices") if choice else None, hint=said,
    )


def _is_version(text: str) -> bool:
    return re.match(r"^\d+\.\d+\.\d+", text.strip()) is not None
