"""Known dead ends at run time (SPEC.md "Memory across batches", the rules in jobs.core.memory):
before an approach starts, the store is asked for the last run of the same configuration on the
same stack, and for earlier failures of it on other stacks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobs.core.memory import DETERMINISTIC, reached_a_level, reopened_note, stack_key
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
    engine: str | None = None,
) -> Recall:
    stack = stack_key(fingerprint, engine=engine)
    last = store.last_run_of(config.server_args, config.env, stack, not_in=batch_id)
    if last is not None and last.status in ("failed", "timeout"):
        cause = failure_cause(last, metric=metric, rules=rules)
        if cause in DETERMINISTIC and not reached_a_level(last):  # a mixed run: no dead end
            return Recall(dead_end=last, cause=cause)
    if last is not None:
        return Recall()  # it ran here since: whatever failed elsewhere is no dead end here
    for earlier in store.failures_of(config.server_args, config.env, not_in=batch_id):
        cause = failure_cause(earlier, metric=metric, rules=rules)
        if cause in DETERMINISTIC and not reached_a_level(earlier) \
                and stack_key(earlier.fingerprint, engine=earlier.engine) != stack:
            return Recall(reopened=reopened_note(earlier, cause, fingerprint=fingerprint))
    return Recall()
