"""Presets: YAML files in `config/presets/`, loaded into typed, frozen models (SPEC.md's format).

Loading validates every key; an error names the file, the key and, where YAML tells it, the line.
Resolution (extends, declares, `--set`) lives in `plans.py`.

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
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from jobs import settings
from jobs.core.engine_info import default_engine, engine_names
from jobs.core.errors import PresetError
from jobs.core.limits import MAX_DEPTH, MAX_MIN_EFFECT_PCT, MAX_PRESET_REPS, MAX_TIMEOUT_S
from jobs.core.preset_files import read_preset_text, yaml_depth
from jobs.core.secret_refs import literal_secret_problems
from jobs.core.sweeps import Sweep, sweep_problems

Scalar = str | int | float | bool | None
# A server arg may be a mapping too: engines that take JSON for a flag (a speculative
# config) get it as JSON; the engine's type table says which flags take one.
ServerValue = Scalar | dict[str, Any]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Timeouts(_Frozen):
    startup_s: float = Field(default=900, gt=0, le=MAX_TIMEOUT_S)
    bench_s: float = Field(default=1800, gt=0, le=MAX_TIMEOUT_S)


class Config(_Frozen):
    """The baseline's settings."""

    server_args: dict[str, ServerValue] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)

    @field_validator("env", mode="before")
    @classmethod
    def _env_as_strings(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: _env_string(v) for k, v in value.items()}
        return value


class Approach(Config):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    hypothesis: str = ""
    extends: str | None = None
    declares: tuple[str, ...] | None = None


class Preset(_Frozen):
    name: str = Field(min_length=1)
    description: str = ""
    engine: str = Field(default_factory=default_engine)
    queue: str | None = None
    metric: str = "output_throughput"
    lower_is_better: bool = False
    min_effect_pct: float = Field(default=2.0, ge=0, le=MAX_MIN_EFFECT_PCT)
    reps: int = Field(default=3, ge=1, le=MAX_PRESET_REPS)
    # One unmeasured pass of the bench before the repetitions, on the same server: the first
    # pass runs cold (lazy initialisation, allocator, caches) at about half speed, and as a
    # sample it would widen every range. Run and recorded (the record's `warmup`), never a sample.
    warmup: bool = True
    timeouts: Timeouts = Field(default_factory=Timeouts)
    bench: dict[str, Scalar] = Field(default_factory=dict)
    overridable: tuple[str, ...] = ()
    baseline: Config
    approaches: tuple[Approach, ...] = ()  # none at all only when the preset has a sweep
    sweep: Sweep | None = None
    source: str = Field(default="", exclude=True)

    @field_validator("engine")
    @classmethod
    def _registered(cls, value: str) -> str:
        if value not in engine_names():
            raise ValueError(f"unknown engine {value!r}; known engines: "
                             f"{', '.join(sorted(engine_names()))}")
        return value

    def approach(self, name: str) -> Approach:
        for approach in self.approaches:
            if approach.name == name:
                return approach
        raise PresetError(f"preset {self.name!r} has no approach {name!r}")


def _env_string(value: Any) -> Any:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        return str(value)
    return value


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
MAX_NAME_CHARS = 128  # a preset's name, so its file name fits any file system (255 bytes)


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
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if yaml_depth(node) > MAX_DEPTH:
            raise PresetError(too_deep)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise PresetError(f"{where}: invalid YAML: {problem}") from None
    except RecursionError:  # deeper than Python's stack, before _depth could count it
        raise PresetError(too_deep) from None
    if not isinstance(data, dict):
        raise PresetError(f"{source}: a preset must be a YAML mapping")
    try:
        preset = Preset.model_validate({**data, "source": source})
    except ValidationError as exc:
        raise PresetError(_describe(exc, node=node, source=source, data=data)) from None
    if not is_preset_name(preset.name):  # chat names it (retry, history): never a path
        raise PresetError(
            f"{source}{_line_of(node, ('name',))}: key 'name' must be a plain name (letters, "
            "digits, '.', '_', '-'; no folder, no .yaml)"
        )
    if stem is not None and preset.name != stem:
        line = _line_of(node, ("name",))
        raise PresetError(
            f"{source}{line}: key 'name' is {preset.name!r} but must equal the file's stem {stem!r}"
        )
    _check_approaches(preset, node=node, source=source)
    _check_overridable(preset, node=node, source=source)
    _check_sweep(preset, node=node, source=source)
    for loc, message in literal_secret_problems(preset)[:1]:  # SPEC: secrets stay references
        raise PresetError(f"{source}{_line_of(node, loc)}: {message}")
    return preset


def _check_sweep(preset: Preset, *, node: yaml.Node | None, source: str) -> None:
    if preset.sweep is None:
        if not preset.approaches:
            raise PresetError(f"{source}{_line_of(node, ('approaches',))}: key 'approaches': "
                              "a preset needs at least one approach, or a sweep")
        return
    problems = sweep_problems(preset.sweep, [a.name for a in preset.approaches],
                              max_points=settings.max_points())
    if problems:
        loc, message = problems[0]
        raise PresetError(f"{source}{_line_of(node, loc)}: {message}")


def _check_overridable(preset: Preset, *, node: yaml.Node | None, source: str) -> None:
    for knob in preset.overridable:
        if is_protected_knob(knob):
            raise PresetError(
                f"{source}{_line_of(node, ('overridable',))}: overridable lists {knob!r}, "
                f"which is never overridable: {PROTECTED_WHY}"
            )


def _check_approaches(preset: Preset, *, node: yaml.Node | None, source: str) -> None:
    names = [a.name for a in preset.approaches]
    seen: set[str] = set()
    for index, approach in enumerate(preset.approaches):
        where = f"{source}{_line_of(node, ('approaches', index))}"
        if approach.name == "baseline":
            raise PresetError(f"{where}: approaches[{index}].name 'baseline' is reserved")
        if approach.name in seen:
            raise PresetError(f"{where}: approaches[{index}].name {approach.name!r} is repeated")
        seen.add(approach.name)
        if approach.extends is not None and approach.extends not in names:
            hint = difflib.get_close_matches(approach.extends, names, n=1)
            suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
            where = f"{source}{_line_of(node, ('approaches', index, 'extends'))}"
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


def _describe(exc: ValidationError, *, node: yaml.Node | None, source: str, data: Any) -> str:
    error = exc.errors()[0]
    loc = tuple(error["loc"])
    key = _dotted(loc, data)
    line = _line_of(node, loc)
    if error["type"] == "extra_forbidden":
        return f"{source}{line}: unknown key {key!r}"
    if error["type"] == "missing":
        return f"{source}{line}: missing key {key!r}"
    return f"{source}{line}: key {key!r}: {error['msg']}"


def _dotted(loc: tuple[Any, ...], data: Any) -> str:
    parts: list[str] = []
    current = data
    for item in loc:
        if isinstance(item, int):
            name = None
            if isinstance(current, list) and item < len(current):
                current = current[item]
                name = current.get("name") if isinstance(current, dict) else None
            parts[-1:] = [f"{parts[-1] if parts else ''}[{name or item}]"]
        else:
            parts.append(str(item))
            current = current.get(item) if isinstance(current, dict) else None
    return ".".join(parts)


def _line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> str:
    """':LINE' of the deepest YAML node on the path `loc`, or '' when unknown."""
    found = node
    for item in loc:
        child = None
        if isinstance(found, yaml.MappingNode):
            for key_node, value_node in found.value:
                if key_node.value == item:
                    child = value_node if item != loc[-1] else key_node
                    break
        elif isinstance(found, yaml.SequenceNode) and isinstance(item, int):
            if item < len(found.value):
                child = found.value[item]
        if child is None:
            break
        found = child
    if found is None:
        return ""
    return f":{found.start_mark.line + 1}"


# --------------------------------------------------------------------------- protected knobs

PROTECTED_WHY = "it chooses the model, a file or the code the server runs"

PROTECTED_ARGS = frozenset({
    "model-path", "model", "tokenizer-path", "tokenizer", "revision", "config",
    "trust-remote-code", "load-format", "model-impl", "model-loader-extra-config",
    "custom-weight-loader", "json-model-override-args", "model-config-parser",
    "speculative-draft-model-path", "speculative-draft-model", "speculative-draft-model-revision",
    "speculative-draft-load-format", "enable-lora", "lora-paths",
    "enable-custom-logit-processor", "chat-template", "completion-template",
    "hf-chat-template-name",
})
"""Server args `--set` never changes, even when a preset lists them in `overridable`.

A chat user may tune how a server runs (memory, CUDA graphs, kernels, dtype: the numbers
under test), never what it runs: which weights, tokenizer or draft model are loaded, from
where, with whose Python (`trust-remote-code` executes the model repo's code; custom loaders,
logit processors and templates are code or files too). Besides these names, any arg ending in
one of `_PROTECTED_ARG_SUFFIXES` names a file, a folder, a URL or a loader; any starting with
`_PROTECTED_ARG_PREFIXES` fetches weights or trusts remote input; and a shortening of a
protected name (argparse accepts `--trust-remote`) is protected too.
"""

_PROTECTED_ARG_SUFFIXES = (
    "-path", "-paths", "-dir", "file", "-config", "-loader", "-url", "-urls", "-template",
    "-revision",
)
_PROTECTED_ARG_PREFIXES = ("remote-", "trust-")

PROTECTED_ENV = frozenset({"PATH", "ENV", "BASH_ENV", "HF_ENDPOINT", "CUDA_HOME"})
"""Environment variables `--set` never changes: they pick the interpreter, the libraries and
modules loaded into the server (PYTHONPATH with a sitecustomize.py runs code at start-up), or
where models and compiled kernels come from. With these names, any name starting with one of
`_PROTECTED_ENV_PREFIXES` or ending with one of `_PROTECTED_ENV_SUFFIXES` (NCCL_NET_PLUGIN,
HF_HOME, TRITON_CACHE_DIR, TORCH_EXTENSIONS_DIR...)."""

_PROTECTED_ENV_PREFIXES = ("PYTHON", "LD_", "DYLD_")
_PROTECTED_ENV_SUFFIXES = ("PATH", "_HOME", "_DIR", "_CACHE", "_PLUGIN", "_FILE", "_MODULES")


def is_protected_knob(knob: str) -> bool:
    """True for a knob that may choose the model, a file or the code run (never overridable).

    Checked both as a server arg and as an environment variable, since `--set` applies an
    upper-case knob to the environment."""
    arg = knob.strip().lstrip("-").replace("_", "-").lower()
    env = knob.strip().upper()
    return (
        arg in PROTECTED_ARGS
        or arg.endswith(_PROTECTED_ARG_SUFFIXES)
        or arg.startswith(_PROTECTED_ARG_PREFIXES)
        or (len(arg) >= 3 and any(name.startswith(arg) for name in PROTECTED_ARGS))
        or env in PROTECTED_ENV
        or env.startswith(_PROTECTED_ENV_PREFIXES)
        or env.endswith(_PROTECTED_ENV_SUFFIXES)
    )
