"""SGLang's bench client as the installed release has it: the module that runs it, the settings it
takes, and the sampling every request of it carries (docs/contracts.md "SGLang engine contract").

- **The module.** The benchmark moved to `sglang.benchmark.serving` in 0.5.15 (the wheels of
  0.5.15 through 0.5.23 have sglang/benchmark/serving.py; 0.5.14's has not). From then on
  `sglang.bench_serving` is a deprecated shim (sglang/bench_serving.py) that imports the new
  module and warns ("`sglang.bench_serving` is deprecated and will be removed in a future
  release; use `sglang.benchmark.serving` instead"), so the new module is run where it exists.
- **The sampling.** The `sglang` backend (async_request_sglang_generate) sends `temperature` 0.0
  in each request's sampling_params: hard-coded up to 0.5.13 (0.5.9 bench_serving.py:601), the
  value of --temperature (default 0.0) from 0.5.14 (0.5.19 benchmark/serving.py:665-671), with
  `top_p` when --top-p is below 1.0. --extra-request-body's JSON is merged into the request at
  its top level (:680): a `sampling_params` there replaces the client's own.
- **Flags the release lacks.** --temperature and --top-p exist from 0.5.14. On an older release a
  preset's `temperature: 0` (or `top-p: 1.0`) is what its client sends anyway, so it is left off
  the command line, and a preset pins its sampling for every release; any other value is passed
  on, for the release's own parser to refuse.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobs.engines.dialect import bench_value, json_value, sampled
from jobs.engines.flags import to_flag
from jobs.engines.sglang.flag_table import version_tuple

OLD_MODULE = "sglang.bench_serving"
NEW_MODULE = "sglang.benchmark.serving"
NEW_MODULE_SINCE = (0, 5, 15)
SAMPLING_FLAGS_SINCE = (0, 5, 14)  # --temperature, --top-p
IMPLIED = {"--temperature": 0.0, "--top-p": 1.0}  # what a release without the flag sends


def _at(version: str | None) -> tuple[int, int, int] | None:
    try:
        return version_tuple(version) if version else None
    except ValueError:
        return None


def bench_module(version: str | None) -> str:
    """The module `python -m` runs for the benchmark on release `version` (unknown: the old one,
    which every release has)."""
    at = _at(version)
    return NEW_MODULE if at is not None and at >= NEW_MODULE_SINCE else OLD_MODULE


def for_release(bench: Mapping[str, Any], version: str | None) -> dict[str, Any]:
    """The bench settings as release `version` takes them (see the module)."""
    at = _at(version)
    if at is None or at >= SAMPLING_FLAGS_SINCE:
        return dict(bench)
    return {k: v for k, v in bench.items() if not _is_implied(to_flag(k), v)}


def _is_implied(flag: str, value: Any) -> bool:
    if flag not in IMPLIED or isinstance(value, bool):
        return False
    try:
        return float(value) == IMPLIED[flag]
    except (TypeError, ValueError):
        return False


def sampling(bench: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling of every request the benchmark sends with these settings (see the module)."""
    extra = json_value(bench_value(bench, "extra-request-body"))
    given = extra.get("sampling_params")
    if isinstance(given, Mapping):
        return sampled(given)
    temperature = bench_value(bench, "temperature")
    sent: dict[str, Any] = {"temperature": 0.0 if temperature is None else temperature}
    top_p = bench_value(bench, "top-p")
    try:
        if top_p is not None and float(top_p) < 1.0:
            sent["top_p"] = top_p
    except (TypeError, ValueError):
        pass
    return sampled(sent)
