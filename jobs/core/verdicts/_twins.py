"""A confounded approach's twin (docs/contracts.md "Verdict rules"): another run of the same batch
whose configuration is the confounded one with every confounding knob at the baseline's value,
which is what a retry would run. When the batch measured it (a sweep's point, or an approach
that happens to equal it), the report says so and uses that measurement instead of asking for
a retry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jobs.core.memory import config_key
from jobs.core.plans import confounds
from jobs.core.records import RunRecord
from jobs.core.verdicts._verdicts import Verdict


def unconfounded(record: RunRecord, baseline: RunRecord) -> tuple[dict[str, Any], dict[str, str]]:
    """The record's configuration with every undeclared difference from the baseline set back
    to the baseline's value (removed where the baseline has none)."""
    args, env = dict(record.server_args), dict(record.env)
    for knob, _, _ in confounds(server_args=record.server_args, env=record.env,
                                change=record.change, base_args=baseline.server_args,
                                base_env=baseline.env):
        for ours, theirs in ((args, baseline.server_args), (env, baseline.env)):
            if knob in ours or knob in theirs:
                if knob in theirs:
                    ours[knob] = theirs[knob]
                else:
                    ours.pop(knob, None)
    return args, env


def twins(
    approaches: Sequence[RunRecord], verdicts: Sequence[Verdict], *, baseline: RunRecord
) -> dict[str, tuple[RunRecord, Verdict]]:
    """Approach -> (its twin's record, its twin's verdict) for each approach inconclusive by a
    confound whose retry's configuration this batch measured."""
    measured = {config_key(r.server_args, r.env): (r, v)
                for r, v in zip(approaches, verdicts, strict=True) if v.value is not None}
    found: dict[str, tuple[RunRecord, Verdict]] = {}
    for record, verdict in zip(approaches, verdicts, strict=True):
        if verdict.reason != "confound":
            continue
        twin = measured.get(config_key(*unconfounded(record, baseline)))
        if twin is not None and twin[0].approach != record.approach:
            found[record.approach] = twin
    return found


def twin_sentence(verdict: Verdict, twin: tuple[RunRecord, Verdict]) -> str:
    """What the report says of a confounded approach whose twin was measured."""
    record, judged = twin
    knob = f"{verdict.confound[0]} at the baseline's {verdict.confound[2]}" \
        if verdict.confound else "its confound removed"
    delta = "" if judged.delta_pct is None else f" {judged.delta_pct:+.1f}%"
    return (f"with {knob} it is {record.approach}, which this batch measured: "
            f"{judged.verdict}{delta} (no re-run needed)")
