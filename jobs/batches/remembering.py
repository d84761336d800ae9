"""Known dead ends at run time (docs/contracts.md "Memory across batches", the rules in
jobs.core.memory): before an approach starts, the store is asked for the last run of the same
configuration on the same stack, and for earlier failures of it on other stacks. A failure of
the benchmark counts only under the same bench settings: under others the configuration is
taken as never having failed."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobs.core.memory import (
    DETERMINISTIC,
    PastRun,
    bench_failure,
    bench_key,
    reached_a_level,
    reopened_note,
    stack_key,
)
from jobs.core.plans import RunConfig
from jobs.core.records import RunRecord
from jobs.core.rules import RuleSet
from jobs.core.verdicts import Metric, failure_cause
from jobs.store import Store


@dataclass(frozen=True)
class Recall:
    dead_end: RunRecord | None = None  # the earlier failure this approach would repeat
    cause: str | None = None
    reopened: str | None = None  # a dead end on another stack: why it is tried again


def recall(
    store: Store,
    config: RunConfig,
    *,
    batch_id: str,
    fingerprint: Mapping[str, Any],
    metric: Metric,
    rules: RuleSet,
    bench: Mapping[str, Any],
    engine: str | None = None,
) -> Recall:
    """What the store knows of `config` before it starts; `bench`: the batch's bench settings
    (jobs.core.memory.bench_settings)."""
    stack, benched = stack_key(fingerprint, engine=engine), bench_key(bench)
    last = store.last_run_of(config.server_args, config.env, stack, bench=benched,
                             not_in=batch_id)
    if last is not None and last.record.status in ("failed", "timeout"):
        cause = failure_cause(last.record, metric=metric, rules=rules)
        if cause in DETERMINISTIC and not reached_a_level(last.record):  # a mixed run: none
            return Recall(dead_end=_as_known(last, bench), cause=cause)
    if last is not None:
        return Recall()  # it ran here since: whatever failed elsewhere is no dead end here
    for earlier in store.failures_of(config.server_args, config.env, bench=benched,
                                     not_in=batch_id):
        record = earlier.record
        cause = failure_cause(record, metric=metric, rules=rules)
        if cause in DETERMINISTIC and not reached_a_level(record) \
                and stack_key(record.fingerprint, engine=record.engine) != stack:
            return Recall(reopened=reopened_note(record, cause, fingerprint=fingerprint))
    return Recall()


def _as_known(past: PastRun, bench: Mapping[str, Any]) -> RunRecord:
    """The earlier record, saying where it failed: a run stored before records did is known to
    have failed in its benchmark by its `bench_key` alone (the settings are these, by key)."""
    if not past.in_bench or past.record.extra.get("failed_in"):
        return past.record
    return dataclasses.replace(past.record, extra={**past.record.extra, **bench_failure(bench)})
