"""The report and its advice (docs/contracts.md "Report", "Verdict rules"): the report of a
batch's records (`_report`), its ranked next steps (`_next_steps`, `_next_steps_adopt`), the
remedies for each cause (`_remedies`) and what an approach ran, as the remedies ask
(`_diagnosis`)."""

from jobs.core.advice._diagnosis import (
    engine_of,
    parallelism,
)
from jobs.core.advice._remedies import (
    EFFORTS,
    Remedies,
    load_remedies,
)
from jobs.core.advice._report import (
    analyze,
    split_batch,
)

__all__ = [
    "EFFORTS",
    "Remedies",
    "analyze",
    "engine_of",
    "load_remedies",
    "parallelism",
    "split_batch",
]
