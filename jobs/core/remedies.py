"""Remedies: candidate next steps per failure cause and per verdict (`config/remedies.yaml`)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jobs import settings
from jobs.core.errors import PresetError

EFFORTS = ("low", "medium", "high")


class Remedy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    action: str = Field(min_length=1)
    effort: Literal["low", "medium", "high"]
    why: str = Field(min_length=1)
    when: Literal["speculative"] | None = None


class Remedies(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    causes: dict[str, tuple[Remedy, ...]] = Field(default_factory=dict)
    verdicts: dict[str, tuple[Remedy, ...]] = Field(default_factory=dict)

    def for_cause(self, cause: str) -> tuple[Remedy, ...]:
        return self.causes.get(cause, ())

    def for_verdict(self, verdict: str, *, speculative: bool) -> tuple[Remedy, ...]:
        return tuple(
            r for r in self.verdicts.get(verdict, ())
            if r.when is None or (r.when == "speculative" and speculative)
        )


def load_remedies(path: Path | None = None) -> Remedies:
    return _load(path or settings.config_dir() / "remedies.yaml")


@functools.lru_cache(maxsize=8)
def _load(path: Path) -> Remedies:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise PresetError(f"{path}: cannot read remedies ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise PresetError(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from None
    try:
        return Remedies.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(part) for part in error["loc"])
        raise PresetError(f"{path}: key {key!r}: {error['msg']}") from None
