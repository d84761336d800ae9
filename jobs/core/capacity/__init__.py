"""Capacity under the SLO (docs/contracts.md "Capacity under the SLO"): how many requests one
server carries within the SLO. The search that proposes each next load from the levels measured
so far (`_search`: the engines only measure what it proposes), the record's `capacity` made and
read back (`_record`), a capacity judged against the baseline's, in words (`_judged`), and
what the summaries say of it (`capacity_text`, a module the templates call).
Pure: plain data in, plain data out; no store, no engine."""

from jobs.core.capacity import _capacity_text as capacity_text
from jobs.core.capacity._judged import (
    CapacityVerdict,
    amount,
    binds_text,
    breach_words,
    carries,
    judge_capacity,
    not_judged,
    number,
    pct,
    short,
    step,
)
from jobs.core.capacity._record import (
    Found,
    capacity_of,
    capacity_value,
    closing_capacity,
    read_capacity,
    searched,
    section,
)
from jobs.core.capacity._search import (
    CAPACITY,
    KNOBS,
    MAX_LEVELS,
    PRECISION_PCT,
    UNITS,
    Measured,
    Spec,
    binding_key,
    bounds,
    is_complete,
    level_state,
    measured,
    next_load,
    shown_metric,
)

__all__ = [
    "capacity_text",
    "CAPACITY",
    "KNOBS",
    "MAX_LEVELS",
    "PRECISION_PCT",
    "UNITS",
    "CapacityVerdict",
    "Found",
    "Measured",
    "Spec",
    "amount",
    "binding_key",
    "binds_text",
    "bounds",
    "breach_words",
    "capacity_of",
    "capacity_value",
    "carries",
    "closing_capacity",
    "read_capacity",
    "is_complete",
    "judge_capacity",
    "level_state",
    "measured",
    "next_load",
    "not_judged",
    "number",
    "pct",
    "searched",
    "section",
    "short",
    "shown_metric",
    "step",
]
