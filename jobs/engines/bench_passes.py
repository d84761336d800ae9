"""What one benchmark pass's result becomes in its level (`jobs.engines.served`): a repetition
is a sample only when its bench client completed every prompt sent (else the record's
`repetitions` says why and the notes say so), its figures and accept length kept; the warm-up
is recorded as the record's `warmup`, never a sample. Each ends with its `result` phase."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jobs.core.capacity import shown_metric
from jobs.core.plans import BatchPlan
from jobs.engines.dialect import Dialect, is_count
from jobs.engines.dialect import figures as figures_of
from jobs.engines.levels_run import Level

OnPhase = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class Pass:
    """One benchmark run's result file, read: repetition `rep` (0: the warm-up), its seed, the
    prompts sent and the accept length measured (None where the run did not speculate)."""

    result: dict[str, Any]
    rep: int
    seed: int
    sent: int
    length: float | None

    def accepted(self) -> float | None:
        return float(self.length) if self.length is not None and self.length > 0 else None


def take_repetition(done: Pass, level: Level, *, plan: BatchPlan, dialect: Dialect,
                    notes: list[str], on_phase: OnPhase) -> None:
    """Repetition `done.rep` into the level: a sample, or an entry saying why it is none."""
    completed, rep, sent = done.result.get("completed"), done.rep, done.sent
    entry: dict[str, Any] = {"rep": rep, "seed": done.seed, "sent": sent,
                             "completed": completed, "sample": True}
    level.repetitions.append(entry)
    shown = shown_metric(plan.metric)
    if not is_count(completed) or completed != sent:
        entry.update(sample=False, why=f"completed {completed} of {sent}")
        notes.append(f"specbench: repetition {rep} is no sample: {dialect.bench_name} "
                     f"completed {completed} of {sent} prompts")
        on_phase("result", level.tag({"rep": rep, "of": plan.reps, "metric": shown,
                                      "value": None, "why": entry["why"]}))
        return
    figures = figures_of(done.result, plan.metric, (*dialect.metrics, *plan.slo))
    for key, figure in figures.items():
        level.samples.setdefault(key, []).append(figure)
    if (length := done.accepted()) is not None:
        level.accept.append(length)
        entry["accept_length"] = length
    on_phase("result", level.tag({"rep": rep, "of": plan.reps, "metric": shown,
                                  "value": figures.get(shown)}))


def take_warmup(done: Pass, level: Level, *, plan: BatchPlan, dialect: Dialect,
                notes: list[str], on_phase: OnPhase) -> None:
    """The warm-up's figures as the record keeps them, and its phase; never a sample."""
    completed, sent = done.result.get("completed"), done.sent
    length = done.accepted()
    level.warmup = warmup = {
        **figures_of(done.result, plan.metric, (*dialect.metrics, *plan.slo)), "seed": done.seed,
        "sent": sent, "completed": completed,
        **({"accept_length": length} if length is not None else {})}
    if not is_count(completed) or completed != sent:
        notes.append(f"specbench: the warm-up completed {completed} of {sent} prompts "
                     "(not a sample either way)")
    shown = shown_metric(plan.metric)
    on_phase("result", level.tag({"rep": 0, "of": plan.reps, "metric": shown,
                                  "warmup": True, "value": warmup.get(shown)}))
