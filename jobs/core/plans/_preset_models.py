"""A preset's typed, frozen models (docs/contracts.md's format): what a preset file reads into.

pydantic validates every key (an unknown one is an error) and the engine against the registered
ones (`jobs.core.engine_info`); `jobs.core.plans` finds and reads the files and turns a
validation error into one line naming the file, the key and its line.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from jobs.core.engine_info import default_engine, engine_names
from jobs.core.limits import (
    MAX_MIN_EFFECT_PCT,
    MAX_PRESET_REPS,
    MAX_PROMPTS,
    MAX_TIMEOUT_S,
    MAX_TOKENS,
    bounded_name,
)
from jobs.core.noise import MAX_STARTS
from jobs.core.sweeps import Sweep
from jobs.errors import PresetError

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
    name: Annotated[str, BeforeValidator(bounded_name)] = Field(
        min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    hypothesis: str = ""
    extends: str | None = None
    declares: tuple[str, ...] | None = None


class Workload(_Frozen):
    """docs/contracts.md "Workloads that represent the traffic": the prompts a batch is measured
    on, by task category, instead of synthetic ones (the file is read where the engine runs:
    jobs.core.workloads)."""

    path: str = Field(min_length=1)  # relative: under SPECBENCH_DATA_DIR/workloads/
    categories: tuple[Annotated[str, BeforeValidator(bounded_name)], ...] | None = None
    per_category: int = Field(default=16, ge=1, le=MAX_PROMPTS)  # the prompts of each, at most
    output_len: int = Field(default=256, ge=1, le=MAX_TOKENS)  # the tokens each request makes


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
    # docs/contracts.md "Noise, measured": the baseline measured first and again last (a batch
    # of three configurations or more), each configuration's server started `starts` times with
    # its repetitions spread over them, and a tail-percentile SLO over fewer requests than it
    # needs judged anyway (marked) only when the preset says so
    bracket: bool = True
    starts: int = Field(default=1, ge=1, le=MAX_STARTS)
    allow_few_samples: bool = False
    timeouts: Timeouts = Field(default_factory=Timeouts)
    bench: dict[str, Scalar] = Field(default_factory=dict)
    overridable: tuple[str, ...] = ()
    baseline: Config
    approaches: tuple[Approach, ...] = ()  # none at all only when the preset has a sweep
    sweep: Sweep | None = None
    # docs/contracts.md "Load levels and service-level objectives": checked by jobs.core.plans,
    # whose messages name the key (typed loosely here so that a bad level is its error, not
    # pydantic's)
    loads: dict[str, Any] | None = None
    slo: dict[str, Any] | None = None
    # docs/contracts.md "Capacity under the SLO": the load one server carries within the SLO,
    # searched (checked by jobs.core.plans, typed loosely for the same reason as loads)
    capacity: dict[str, Any] | None = None
    # docs/contracts.md "Workloads that represent the traffic": prompts by task category, each
    # category benchmarked on every configuration's one server (checked by jobs.core.plans)
    workload: Workload | None = None
    # docs/contracts.md "Evidence for the why": what the worker measures before the servers
    evidence: tuple[Literal["collectives"], ...] = ()
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
