"""Across batches (docs/contracts.md "Digest", "Noise, measured"): two batches compared
(`_compare`), a sweep and its confirmation as one experiment (`_experiments`), the weekly digest
(`_digest`) with its history (`_digest_memory`), hours (`_digest_hours`), regressions
(`_digest_regressions`), wins (`_digest_wins`), trend (`_trends`) and the regression watches'
section (`_digest_watch`)."""

from jobs.core.digest._compare import (
    Side,
    compare_batches,
)
from jobs.core.digest._digest import (
    STEP_LOOKBACK,
    build_digest,
)
from jobs.core.digest._digest_memory import (
    Judged,
    Memory,
    hardware,
    hardware_of,
    judged_results,
    memory_of,
    reopened_dead_ends,
)
from jobs.core.digest._digest_watch import (
    watch_section,
)
from jobs.core.digest._trends import (
    experiment_best,
)

__all__ = [
    "Judged",
    "Memory",
    "STEP_LOOKBACK",
    "Side",
    "build_digest",
    "compare_batches",
    "experiment_best",
    "hardware",
    "hardware_of",
    "judged_results",
    "memory_of",
    "reopened_dead_ends",
    "watch_section",
]
