"""A preset's `workload` checked against the rest of it (docs/contracts.md "Workloads that
represent the traffic"), before anything runs: the engine's benchmark must read one, the bench
must leave the prompts to it (no dataset, synthetic or other, no number of prompts), and the
batch is judged per category, so it has no load levels, SLO or capacity search besides.

The file itself is read where the engine runs (jobs.core.workloads): a bot's host may have none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobs.core.engine_info import all_info, describe
from jobs.core.plans._preset_models import Workload

Problem = tuple[tuple[Any, ...], str]  # (where in the YAML, one line)

JUDGED_OTHERWISE = ("loads", "slo", "capacity")
"""The preset keys a workload excludes: a batch with one is judged per category (one operating
point each), not per load level, against limits or by its capacity."""


def workload_problems(workload: Workload | None, *, engine: str, bench: Mapping[str, Any],
                      others: Mapping[str, Any]) -> list[Problem]:
    """What is wrong with a preset's `workload` (empty: nothing); `others`: the preset's
    `loads`, `slo` and `capacity`."""
    if workload is None:
        return []
    info = describe(engine)
    if not info.workload:
        able = ", ".join(i.name for i in all_info() if i.workload)
        return [(("workload",), f"key 'workload': {info.in_text}'s benchmark reads no workload; "
                                f"one whose does: {able}")]
    for key in JUDGED_OTHERWISE:
        if others.get(key):
            return [((key,), f"key '{key}': a preset with a workload is judged per category, "
                             f"not by '{key}': give one or the other")]
    owned = owned_args(engine)
    prefixes = tuple(info.datasets.get("synthetic_prefixes") or ())
    for key, value in bench.items():
        flag = key.lstrip("-").replace("_", "-")
        if flag == "dataset-name" and value in (info.datasets.get("synthetic") or ()):
            return [(("bench", key), f"key 'bench.{key}': {value!r} is a synthetic dataset and "
                                     "the preset names a workload: its prompts come from the "
                                     "workload (leave the dataset out)")]
        if flag in owned or flag.startswith(prefixes):
            return [(("bench", key), f"key 'bench.{key}': the workload sets the prompts "
                                     "(their dataset, file, number and length: workload."
                                     "per_category and workload.output_len); leave it out")]
    names = workload.categories
    if names is not None:
        if not names:
            return [(("workload", "categories"), "key 'workload.categories' is empty; name "
                                                 "the categories to measure, or leave it out "
                                                 "for every category of the file")]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            return [(("workload", "categories"), f"key 'workload.categories' lists "
                                                 f"{', '.join(repeated)} more than once")]
        blank = [name for name in names if not name.strip()]
        if blank:
            return [(("workload", "categories"), "key 'workload.categories' has an empty name")]
    return []


def owned_args(engine: str) -> frozenset[str]:
    """The bench args a workload sets itself (its engine's `workload` facts, and the number of
    prompts): a preset with a workload leaves them out."""
    info = describe(engine)
    facts = info.workload
    found = {*facts.get("bench", {}), *(facts.get(k) for k in ("path_arg", "output_arg",
                                                                "category_arg"))}
    found.add(info.bench_prompts.get("arg"))
    return frozenset(str(x) for x in found if x)
