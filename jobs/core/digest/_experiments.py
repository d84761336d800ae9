"""A sweep and its confirmation are one experiment (docs/contracts.md "A sweep and its confirmation
are one experiment"), pure: the confirmation batch re-runs the sweep's best point against the
baseline, and whatever a person reads (history, the digest, the trend) counts the two once, as the
batch that person started.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jobs.core.plans import BatchRow


@dataclass(frozen=True)
class Experiment:
    """A batch a person started and, for a sweep, its confirmation batch (when there is one)."""

    row: BatchRow
    confirmation: BatchRow | None = None

    @property
    def rows(self) -> tuple[BatchRow, ...]:
        return (self.row,) if self.confirmation is None else (self.row, self.confirmation)


def is_confirmation(row: BatchRow) -> bool:
    return row.plan.confirms is not None


def experiment_id(row: BatchRow) -> str:
    """The batch a person started: a confirmation's sweep, else the batch itself."""
    return row.plan.confirms or row.id


def experiments(rows: Sequence[BatchRow]) -> list[Experiment]:
    """The rows as experiments, in the rows' order: each confirmation folded into its sweep
    (one whose sweep is not among `rows` is left out: it counts with its sweep)."""
    confirming = {r.plan.confirms: r for r in rows if r.plan.confirms is not None}
    return [Experiment(r, confirming.get(r.id)) for r in rows if not is_confirmation(r)]
