"""Remedies: candidate next steps per failure cause and per verdict (`config/remedies.yaml`).

A remedy may carry `when`, conditions on what the batch actually ran (`Facts`: the engine, a
GPU, more than one GPU process, speculation, what the engine rejected); it is offered only for
the approaches whose facts meet every condition given. Its text may use the placeholders in
PLACEHOLDERS; any other is an error at load, naming the remedy.
"""

from __future__ import annotations

import functools
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from jobs import settings
from jobs.core.config_files import load_yaml
from jobs.core.engine_info import engine_names
from jobs.errors import PresetError

EFFORTS = ("low", "medium", "high")
# What the engine rejected, for a bad-config failure (jobs.core.advice).
FlagKind = Literal["renamed", "bounded", "unknown", "value", "conflict", "env", "other"]
FLAG_PROBLEMS: tuple[str, ...] = get_args(FlagKind)
PLACEHOLDERS = frozenset({
    "approaches", "compute_capability", "gpu", "interconnect", "metric", "unit", "engine",
    "flag", "new_flag", "value", "choices", "hint", "release", "evidence", "comm_ms", "needed_ms",
    "batch",
})


@dataclass(frozen=True)
class Facts:
    """What one approach ran: the conditions of `when` are checked against these."""

    engine: str  # a registered engine's name (jobs.engines)
    gpu: bool
    multi_gpu: bool  # more than one GPU process (tp, ep, dp or pp size above 1)
    speculative: bool  # it speculates and the baseline does not
    flag: str | None = None  # for bad-config: one of FLAG_PROBLEMS
    # with collectives evidence: the all-reduces take `most` (half or more) or `little` of the
    # time a draft+verify cycle may take (jobs.core.verdicts); None without evidence
    comm: str | None = None


class When(BaseModel):
    """Conditions of a remedy; each one given must hold, the ones left out always do."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: str | None = None  # a registered engine's name
    gpu: bool | None = None
    multi_gpu: bool | None = None
    speculative: bool | None = None
    flag: FlagKind | None = None
    comm: Literal["most", "little"] | None = None

    @field_validator("engine")
    @classmethod
    def _registered(cls, value: str | None) -> str | None:
        if value is not None and value not in engine_names():
            raise ValueError(f"unknown engine {value!r}; known engines: "
                             f"{', '.join(sorted(engine_names()))}")
        return value

    def holds(self, facts: Facts) -> bool:
        wanted = self.model_dump(exclude_none=True)
        return all(getattr(facts, key) == value for key, value in wanted.items())


class Remedy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    action: str = Field(min_length=1)
    effort: Literal["low", "medium", "high"]
    why: str = Field(min_length=1)
    when: When = Field(default_factory=When)

    @field_validator("when", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        # `when: speculative` (the first format) is `when: {speculative: true}`.
        if value is None:
            return {}
        if value == "speculative":
            return {"speculative": True}
        return value

    @model_validator(mode="after")
    def _known_placeholders(self) -> Remedy:
        for key in ("action", "why"):
            for _, name, _, _ in string.Formatter().parse(getattr(self, key)):
                if name is not None and name not in PLACEHOLDERS:
                    known = ", ".join(f"{{{p}}}" for p in sorted(PLACEHOLDERS))
                    raise ValueError(f"{key}: unknown placeholder {{{name}}} (known: {known})")
        return self


class Remedies(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    causes: dict[str, tuple[Remedy, ...]] = Field(default_factory=dict)
    verdicts: dict[str, tuple[Remedy, ...]] = Field(default_factory=dict)

    def for_cause(self, cause: str) -> tuple[Remedy, ...]:
        return self.causes.get(cause, ())

    def for_verdict(self, verdict: str) -> tuple[Remedy, ...]:
        return self.verdicts.get(verdict, ())


def load_remedies(path: Path | None = None) -> Remedies:
    return _load(path or settings.config_dir() / "remedies.yaml")


@functools.lru_cache(maxsize=8)
def _load(path: Path) -> Remedies:
    try:
        data = load_yaml(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise PresetError(f"{path}: cannot read remedies ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise PresetError(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from None
    try:
        return Remedies.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(part) for part in error["loc"])
        msg = str(error["msg"]).removeprefix("Value error, ")
        raise PresetError(f"{path}: key {key!r}: {msg}") from None
