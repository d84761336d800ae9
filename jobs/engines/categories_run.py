"""A served configuration's workload (docs/contracts.md "Workloads that represent the traffic"):
one server, every category of the workload in turn, like load levels.

The workload's file is read where the engine runs (jobs.core.workloads); each category is
written beside the configuration's log as the file the engine's own bench client reads offline
(`<approach>.workload/<category>.json`, in the engine's format), and the benchmark runs on it at
that category: a "category" phase, the warm-up (with the plan's `warmup`), then the
repetitions, each phase tagged with the category, the engine's caches reset between them. The
record keeps `by_category`, every category in order (those the run never reached `skipped`
after a failure, or `cancelled`), its `workload` (the file, its hash, the prompts of each
category) and top-level metrics that are the categories' mean. A resumed batch runs every
category of a configuration it has no record of again: no checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jobs.core.file_names import file_stem
from jobs.core.memory import bench_failure, bench_settings
from jobs.core.plans import RunConfig
from jobs.core.workloads import (
    Workload,
    category_bench,
    input_format,
    input_suffix,
    input_text,
    mean_metrics,
    read_workload,
)
from jobs.engines.base import RunContext
from jobs.engines.levels_run import Ending, Level, Levels, Measures
from jobs.errors import WorkloadError


@dataclass
class CategoryLevel(Level):
    """One category of a run: what its benchmark runs measured."""

    category: str = ""
    prompts: int = 0
    input_path: str = ""  # the file its bench client reads

    def tag(self, details: dict[str, Any]) -> dict[str, Any]:
        return {**details, "category": self.category}

    def label(self) -> str:
        return file_stem(self.category)

    def entry(self) -> dict[str, Any]:
        """This category as `by_category` keeps it."""
        found = {k: v for k, v in super().entry().items() if k != "load"}
        return {"category": self.category, "prompts": self.prompts, **found}


class Categories:
    """Every category of one configuration's run (`Levels`' interface, for `jobs.engines.
    served`); `problem`: why the workload cannot be read here (the run fails, says why)."""

    def __init__(self, config: RunConfig, ctx: RunContext) -> None:
        self.ctx = ctx
        self.notes: list[str] = []
        self.levels: list[CategoryLevel] = []
        self.problem: str | None = None
        self.workload: Workload | None = None
        self._folder, self._engine = ctx.log_path.parent, ctx.plan.engine
        assert ctx.plan.workload is not None
        try:
            self.workload = read_workload(ctx.plan.workload)
        except WorkloadError as exc:
            self.problem = f"specbench: {exc}"
            return
        stem = ctx.log_path.name.removesuffix(".log")
        folder = ctx.log_path.with_name(f"{stem}.workload")
        engine = ctx.plan.engine
        asked = int(ctx.plan.workload.get("per_category") or 0)
        for index, category in enumerate(self.workload.categories):
            path = str(folder / f"{file_stem(category.name)}{input_suffix(engine)}")
            self.levels.append(CategoryLevel(
                load={}, index=index, category=category.name, prompts=len(category.prompts),
                input_path=path,
                bench=category_bench(ctx.plan.bench, engine=engine, path=path,
                                     category=category, output_len=self.workload.output_len)))
            if category.available < asked:
                self.notes.append(f"specbench: {category.name} has {category.available} "
                                  f"prompts in the workload, fewer than the {asked} asked: each "
                                  "run sends those")
        self._folder, self._engine = folder, engine

    def write_inputs(self) -> None:
        """Each category's file for the bench client, beside the configuration's log."""
        assert self.workload is not None
        self._folder.mkdir(parents=True, exist_ok=True)
        fmt = input_format(self._engine)
        for level, category in zip(self.levels, self.workload.categories, strict=True):
            Path(level.input_path).write_text(input_text(fmt, category), encoding="utf-8")

    @property
    def pending(self) -> list[CategoryLevel]:
        return list(self.levels)

    def refusal(self) -> Ending | None:
        """The run's end before it starts: the workload cannot be read here."""
        return None if self.problem is None else Ending("failed", extra_lines=[self.problem])

    def run(self, runner: Measures) -> Ending | None:
        """Each category in order, until one ends the run."""
        self.write_inputs()
        total = len(self.levels)
        for level in self.levels:
            self.ctx.on_phase("category", {"category": level.category,
                                           "position": level.index + 1, "categories": total})
            ending = runner.measure(level)
            if ending is not None:
                level.status = ending.status
                return ending
        return None

    def record_parts(self, status: str, *, in_bench: bool = False,
                     ) -> tuple[dict[str, Any], dict[str, Any]]:
        """(metrics, extra) of the record (see the module)."""
        after = "cancelled" if status == "cancelled" else "skipped"
        entries: list[dict[str, Any]] = []
        ended = False
        for level in self.levels:
            if ended:
                entries.append({"category": level.category, "prompts": level.prompts,
                                "metrics": {}, "status": after, "warmup": None,
                                "repetitions": []})
                continue
            entries.append(level.entry())
            ended = level.status != "ok"
        extra: dict[str, Any] = {"by_category": entries}
        if self.workload is not None:
            extra["workload"] = self.workload.summary()
        if in_bench:
            extra.update(bench_failure(bench_settings(self.ctx.plan)))
        return mean_metrics(entries), extra

    def ended_before(self, status: str) -> None:
        """The server never came up: the run ended at the first category."""
        if self.levels:
            self.levels[0].status = status

    def finish(self) -> None:
        """Nothing to clean: the categories' files stay beside the log, as the bench's do."""


def runs_of(config: RunConfig, ctx: RunContext) -> Levels | Categories:
    """What a served configuration's one server measures: the workload's categories, else the
    plan's load levels (one level without loads)."""
    return Categories(config, ctx) if ctx.plan.workload is not None else Levels(config, ctx)
