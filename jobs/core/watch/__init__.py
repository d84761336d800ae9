"""The regression watch (docs/contracts.md "Regression watch"): a preset re-run on a schedule,
its series, the changes found in them and confirmed before anyone is paged.

- `Schedule`: `--every` and `--at` checked, and the slot a tick is due to start (`slot_at`);
- the series: `judged_keys` (the metric, the SLO keys, the accept length), `points_of` (one
  batch's points), `SeriesKey`, `SeriesPoint`;
- detection: `find_candidate` (ruptures places the change, a calibrated t test decides it),
  `confirms`, `thresholds` (the stated threshold);
- changes: `settle` (a candidate and its confirmation), `Change` (plain data, with `bisect`),
  the thread's lines (`outcome_text`, `headline`), each key's `precision`, the segments' `cuts`;
- `WatchRow`: a stored watch as plain data, and the slot a tick is due to start (`due_slot`);
- the stack under a change: `point_stack`, `stack_diff`, `is_environment`, `diff_text`.

Pure: plain data in, plain data out. numpy, scipy and ruptures (the `watch` extra) are imported
when a series is first judged.
"""

from jobs.core.watch._changes import (
    ACKNOWLEDGED,
    ACTIONS,
    ALERTED,
    BLIP,
    CANDIDATE,
    CONFIRMED,
    DISMISSED,
    STATES,
    Change,
    candidate_change,
    cuts_of,
    headline,
    outcome_text,
    precision,
    settle,
)
from jobs.core.watch._detect import (
    MAX_AGE,
    MIN_OLD,
    MIN_POINTS,
    PENALTY,
    Candidate,
    confirms,
    find_candidate,
    robust_sd,
    segments_of,
)
from jobs.core.watch._schedule import (
    DEFAULT_AT,
    DEFAULT_EVERY,
    Schedule,
    describe_schedule,
    parse_schedule,
)
from jobs.core.watch._series import (
    ACCEPT_LENGTH,
    JudgedKey,
    SeriesKey,
    SeriesPoint,
    judged_keys,
    points_of,
)
from jobs.core.watch._stack_diff import (
    ENVIRONMENT_KEYS,
    MODEL_REVISION,
    diff_text,
    is_environment,
    point_stack,
    stack_diff,
)
from jobs.core.watch._thresholds import ALPHA, BETA, thresholds
from jobs.core.watch._watches import (
    ACTIVE,
    PAUSED,
    STOPPED,
    WATCH_STATES,
    WatchRow,
    describe_sets,
)

__all__ = [
    "ACCEPT_LENGTH", "ACKNOWLEDGED", "ACTIONS", "ACTIVE", "ALERTED", "PAUSED", "STOPPED",
    "WATCH_STATES", "WatchRow", "describe_sets", "ALPHA", "BETA", "BLIP", "CANDIDATE",
    "CONFIRMED", "DEFAULT_AT", "DEFAULT_EVERY", "DISMISSED", "ENVIRONMENT_KEYS", "MAX_AGE",
    "MIN_OLD", "MIN_POINTS", "MODEL_REVISION", "PENALTY", "STATES", "Candidate", "Change",
    "JudgedKey", "Schedule", "SeriesKey", "SeriesPoint", "candidate_change", "confirms",
    "cuts_of", "describe_schedule", "diff_text", "find_candidate", "headline", "is_environment",
    "judged_keys", "outcome_text", "parse_schedule", "point_stack", "points_of", "precision",
    "robust_sd", "segments_of", "settle", "stack_diff", "thresholds",
]
