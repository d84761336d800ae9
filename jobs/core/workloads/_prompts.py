"""What prompts a run was measured on, and what a speculative verdict on synthetic ones must say
(docs/contracts.md "Workloads that represent the traffic").

A served run's record keeps its `prompts`: `{"dataset": NAME, "synthetic": true|false}` (the
bench's dataset, or `workload`). How often a draft is accepted depends on what is generated, and
random token ids represent no traffic: a speculative result measured on them carries the caveat
in its why, and the next steps offer the workload run (the preset's `-workload` variant where
the config has one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jobs.core.engine_info import describe, engine_of
from jobs.core.plans import preset_names
from jobs.core.records import RunRecord
from jobs.core.verdicts import Verdict
from jobs.errors import UserError

CAVEAT = "on random token ids: acceptance on real traffic may differ"
WORKLOAD = "workload"  # a record's `prompts.dataset` when a workload gave them


def prompts_of(bench: Mapping[str, Any], *, engine: str, workload: bool) -> dict[str, Any]:
    """A served run's `prompts`: the bench's dataset (the engine's default when it names none)
    and whether it is synthetic, or the workload."""
    if workload:
        return {"dataset": WORKLOAD, "synthetic": False}
    datasets = describe(engine).datasets
    name = next((v for k, v in bench.items()
                 if k.lstrip("-").replace("_", "-") == "dataset-name"), None)
    name = str(name if name is not None else datasets.get("default") or "")
    return {"dataset": name, "synthetic": name in (datasets.get("synthetic") or ())}


def is_synthetic(record: RunRecord) -> bool:
    found = record.extra.get("prompts")
    return isinstance(found, dict) and found.get("synthetic") is True


def speculates(record: RunRecord) -> bool:
    """Whether the run speculated: it has an accept length, or sets a speculative arg."""
    if record.accept_length is not None:
        return True
    info = describe(engine_of(record.fingerprint, named=record.engine))
    return any(record.server_args.get(arg) not in (None, False)
               for arg in info.speculative_args)


def synthetic_caveat(record: RunRecord, verdict: Verdict) -> str | None:
    """The caveat a measured speculative result on synthetic prompts carries, else None."""
    if verdict.value is None or not is_synthetic(record) or not speculates(record):
        return None
    return CAVEAT


def workload_steps(approaches: Sequence[RunRecord], verdicts: Sequence[Verdict], *,
                   variants: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The next step that offers the workload run, for the speculative results measured on
    synthetic prompts (none without one); `variants`: the presets that are this one with a
    workload (its `-workload` variant)."""
    named = [r.approach for r, v in zip(approaches, verdicts, strict=True)
             if synthetic_caveat(r, v)]
    if not named:
        return []
    preset = approaches[0].preset
    shown = ", ".join(named)
    if variants:
        action = (f"Measure {shown} on prompts that represent the traffic: run {variants[0]} "
                  "(the same batch on a workload, judged per task category)")
    else:
        action = (f"Measure {shown} on prompts that represent the traffic: give {preset} a "
                  "`workload` (Spec-Bench's question.jsonl or a sample of your own traffic)")
    return [{"rank": 0, "kind": "workload", "approach": named[0], "action": action,
             "why": f"measured {CAVEAT}; drafts are accepted more on some tasks than others",
             "effort": "low"}]


def workload_variants(preset: str) -> list[str]:
    """The presets of the config dir that are `preset` with a workload (`PRESET-workload`)."""
    try:
        names = preset_names()
    except UserError:
        return []
    return [n for n in names if n == f"{preset}-workload"]
