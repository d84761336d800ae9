"""Presets: YAML files in `config/presets/`, loaded into typed, frozen models (docs/contracts.md's
format).

Loading reads a file once and parses it once (its node tree kept for line numbers) and validates
every key; an error names the file, the key and, where YAML tells it, the line. The models are
`_preset_models`' (re-exported here); resolution (extends, declares, `--set`) is `_plans`'.

Chat chooses a preset by name only (`find_named_preset`): a path is the operator's, on the
command line. No preset may let `--set` choose the model, a file or the code the server runs
(`is_protected_knob`).
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from jobs import settings
from jobs.core.capacity import CAPACITY
from jobs.core.engine_info import describe
from jobs.core.limits import MAX_DEPTH, MAX_NAME_CHARS, name_problem
from jobs.core.noise import slo_sample_problem
from jobs.core.plans._bench_checks import bench_problems, metric_problems
from jobs.core.plans._capacity_checks import capacity_problems
from jobs.core.plans._loads import load_problems, slo_problems
from jobs.core.plans._preset_files import describe_error, line_of, read_preset_text, yaml_depth
from jobs.core.plans._preset_models import Approach, Config, Preset, Scalar, ServerValue, Timeouts
from jobs.core.plans._protected_knobs import PROTECTED_WHY, is_protected_knob
from jobs.core.plans._secret_refs import literal_secret_problems
from jobs.core.plans._workload_checks import workload_problems
from jobs.core.sweeps import sweep_problems
from jobs.errors import PresetError

__all__ = [
    "MAX_NAME_CHARS", "NAMES_ONLY", "Approach", "Config", "Preset", "Scalar", "ServerValue",
    "Timeouts", "find_named_preset", "find_preset", "is_preset_name", "load_all", "load_preset",
    "parse_preset", "preset_names", "presets_dir",
]


def presets_dir() -> Path:
    return settings.config_dir() / "presets"


def preset_names() -> list[str]:
    folder = presets_dir()
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def find_preset(name_or_path: str) -> Path:
    """A preset name (from `config/presets`) or a path to a YAML file (the CLI's)."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or "/" in name_or_path:
        if not _is_file(candidate):
            raise PresetError(f"no preset file {name_or_path}")
        return candidate
    return _named(name_or_path)


def _is_file(path: Path) -> bool:
    """Whether `path` is a file; False for a name the file system refuses (too long...)."""
    try:
        return path.is_file()
    except OSError:
        return False


NAMES_ONLY = (
    "a preset is chosen by name from chat (see `presets`); "
    "a preset file runs only from the command line: specbench run FILE"
)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*")


def is_preset_name(word: str) -> bool:
    """A bare name: no folder, no `..`, no .yaml/.yml suffix, nothing a path could be, and at
    most MAX_NAME_CHARS long."""
    return (len(word) <= MAX_NAME_CHARS and bool(_NAME.fullmatch(word))
            and not word.lower().endswith((".yaml", ".yml")))


def find_named_preset(name: str) -> Path:
    """A preset of the config dir's presets folder, by name only (what chat may choose).

    Anything path-like is refused with one message that never says whether a file exists."""
    if len(name) > MAX_NAME_CHARS:
        raise PresetError(_too_long(name))
    if not is_preset_name(name):
        raise PresetError(NAMES_ONLY)
    return _named(name)


def _too_long(name: str) -> str:
    return (f"a preset name is at most {MAX_NAME_CHARS} characters; that one has {len(name):,}"
            " (see `presets`)")


def _named(name: str) -> Path:
    if len(name) > MAX_NAME_CHARS:
        raise PresetError(_too_long(name))
    path = presets_dir() / f"{name}.yaml"
    if _is_file(path):
        return path
    known = preset_names()
    hint = difflib.get_close_matches(name, known, n=1)
    suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
    listing = ", ".join(known) or "none"
    raise PresetError(f"unknown preset {name!r}{suggestion}; known presets: {listing}")


def load_preset(name_or_path: str, *, names_only: bool = False) -> Preset:
    """A preset by name or path; with `names_only` (chat) by name alone."""
    path = find_named_preset(name_or_path) if names_only else find_preset(name_or_path)
    return parse_preset(read_preset_text(path), source=str(path), stem=path.stem)


def load_all() -> list[Preset]:
    return [load_preset(name) for name in preset_names()]


def parse_preset(text: str, *, source: str, stem: str | None = None) -> Preset:
    """Validate a preset's YAML; every error is one line naming `source` and the key."""
    if not text.strip():
        raise PresetError(f"{source}: empty; a preset is a YAML mapping (see `presets`)")
    too_deep = (f"{source}: nested too deeply; a preset's YAML nests at most {MAX_DEPTH} "
                "levels")
    loader = yaml.SafeLoader(text)  # one parse: the node tree (lines, depth), then its data
    try:
        node = loader.get_single_node()
        if yaml_depth(node) > MAX_DEPTH:
            raise PresetError(too_deep)
        data = None if node is None else loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise PresetError(f"{where}: invalid YAML: {problem}") from None
    except RecursionError:  # deeper than Python's stack, before _depth could count it
        raise PresetError(too_deep) from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise PresetError(f"{source}: a preset must be a YAML mapping")
    try:
        preset = Preset.model_validate({**data, "source": source})
    except ValidationError as exc:
        raise PresetError(describe_error(exc, node=node, source=source, data=data)) from None
    if (too_long := name_problem(preset.name)) is not None:
        raise PresetError(f"{source}{line_of(node, ('name',))}: key 'name': {too_long}")
    if not is_preset_name(preset.name):  # chat names it (retry, history): never a path
        raise PresetError(
            f"{source}{line_of(node, ('name',))}: key 'name' must be a plain name (letters, "
            "digits, '.', '_', '-'; no folder, no .yaml)"
        )
    if stem is not None and preset.name != stem:
        line = line_of(node, ("name",))
        raise PresetError(
            f"{source}{line}: key 'name' is {preset.name!r} but must equal the file's stem {stem!r}"
        )
    _check_approaches(preset, node=node, source=source)
    _check_overridable(preset, node=node, source=source)
    _check_sweep(preset, node=node, source=source)
    metric = [] if preset.metric == CAPACITY else metric_problems(preset.metric,
                                                                  engine=preset.engine)
    for loc, message in [*metric, *bench_problems(preset.bench, engine=preset.engine),
                         *capacity_problems(preset.capacity, loads=preset.loads, slo=preset.slo,
                                            bench=preset.bench, metric=preset.metric,
                                            lower_is_better=preset.lower_is_better),
                         *load_problems(preset.loads, bench=preset.bench),
                         *slo_problems(preset.slo, engine=preset.engine),
                         *workload_problems(preset.workload, engine=preset.engine,
                                            bench=preset.bench, others=_judged_by(preset))][:1]:
        raise PresetError(f"{source}{line_of(node, loc)}: {message}")
    for loc, message in literal_secret_problems(preset)[:1]:  # SPEC: secrets stay references
        raise PresetError(f"{source}{line_of(node, loc)}: {message}")
    _check_tail_samples(preset, node=node, source=source)
    return preset


def _judged_by(preset: Preset) -> dict[str, Any]:
    """What a preset is judged by besides its metric: its loads, SLO and capacity search."""
    return {"loads": preset.loads, "slo": preset.slo, "capacity": preset.capacity}


def _check_tail_samples(preset: Preset, *, node: yaml.Node | None, source: str) -> None:
    """A tail-percentile SLO over fewer requests per run than the percentile needs is refused,
    unless the preset sets `allow_few_samples` (docs/contracts.md "Noise, measured")."""
    requests = describe(preset.engine).requests_of(preset.bench)
    if not preset.slo or requests is None or preset.allow_few_samples:
        return
    for key in preset.slo:
        problem = slo_sample_problem([key], requests=requests)
        if problem is not None:
            raise PresetError(f"{source}{line_of(node, ('slo', key))}: key {problem}")


def _check_sweep(preset: Preset, *, node: yaml.Node | None, source: str) -> None:
    if preset.sweep is None:
        if not preset.approaches:
            raise PresetError(f"{source}{line_of(node, ('approaches',))}: key 'approaches': "
                              "a preset needs at least one approach, or a sweep")
        return
    problems = sweep_problems(preset.sweep, [a.name for a in preset.approaches],
                              max_points=settings.max_points())
    if problems:
        loc, message = problems[0]
        raise PresetError(f"{source}{line_of(node, loc)}: {message}")


def _check_overridable(preset: Preset, *, node: yaml.Node | None, source: str) -> None:
    for knob in preset.overridable:
        if is_protected_knob(knob):
            raise PresetError(
                f"{source}{line_of(node, ('overridable',))}: overridable lists {knob!r}, "
                f"which is never overridable: {PROTECTED_WHY}"
            )


def _check_approaches(preset: Preset, *, node: yaml.Node | None, source: str) -> None:
    names = [a.name for a in preset.approaches]
    seen: set[str] = set()
    for index, approach in enumerate(preset.approaches):
        where = f"{source}{line_of(node, ('approaches', index))}"
        if approach.name == "baseline":
            raise PresetError(f"{where}: approaches[{index}].name 'baseline' is reserved")
        if approach.name in seen:
            raise PresetError(f"{where}: approaches[{index}].name {approach.name!r} is repeated")
        seen.add(approach.name)
        if approach.extends is not None and approach.extends not in names:
            hint = difflib.get_close_matches(approach.extends, names, n=1)
            suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
            where = f"{source}{line_of(node, ('approaches', index, 'extends'))}"
            raise PresetError(
                f"{where}: approaches[{index}].extends names no approach "
                f"{approach.extends!r}{suggestion}"
            )
    by_name = {a.name: a for a in preset.approaches}
    for approach in preset.approaches:
        chain = [approach.name]
        current = approach
        while current.extends is not None:
            if current.extends in chain:
                loop = " -> ".join([*chain, current.extends])
                raise PresetError(f"{source}: approaches extend each other in a loop: {loop}")
            chain.append(current.extends)
            current = by_name[current.extends]
