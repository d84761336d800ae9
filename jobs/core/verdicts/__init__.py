"""Verdicts (docs/contracts.md "Verdict rules", "Evidence for the why"): one approach against the
baseline (`_verdicts`), with the evidence its why quotes: the verify-time budget
(`_verify_budget`), the engine's own metrics (`_server_quotes`), a win its hypothesis does not
explain (`_hypotheses`) and a confounded approach's measured twin (`_twins`)."""

from jobs.core.verdicts._hypotheses import (
    unexplained_wins,
)
from jobs.core.verdicts._server_quotes import (
    accept_fell_sentence,
    is_memory_change,
    kv_full_sentence,
    server_sentences,
)
from jobs.core.verdicts._twins import (
    twin_sentence,
    twins,
)
from jobs.core.verdicts._verdicts import (
    Metric,
    Verdict,
    change_pct,
    compare,
    failure_cause,
    fingerprint_drift,
    has_failed,
    is_better,
    judge,
    judge_point,
    median,
    remembered,
)
from jobs.core.verdicts._verify_budget import (
    budget_sentence,
    comm_of,
    cycle_ms,
    slower_sentence,
    with_comm,
)

__all__ = [
    "Metric",
    "Verdict",
    "accept_fell_sentence",
    "budget_sentence",
    "change_pct",
    "comm_of",
    "compare",
    "cycle_ms",
    "failure_cause",
    "fingerprint_drift",
    "has_failed",
    "is_better",
    "is_memory_change",
    "judge",
    "judge_point",
    "kv_full_sentence",
    "median",
    "remembered",
    "server_sentences",
    "slower_sentence",
    "twin_sentence",
    "twins",
    "unexplained_wins",
    "with_comm",
]
