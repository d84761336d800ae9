"""Noise, measured (docs/contracts.md "Noise, measured"): what a verdict is judged against.

Repetitions on one running server see only part of the noise. This room measures the rest and
says which noise a verdict used:

- `Bracket`: the baseline measured first and again last; the host's drift between the two;
- `Noise`: what one comparison of two runs is judged against besides their repetitions'
  ranges (the closing bracket's samples, a drift beyond noise, a noise figure for a single
  repetition);
- `Spread`: one configuration's medians across earlier batches on one host and stack, and a
  change judged against it (`judge_change`);
- tail percentiles and the requests they need (`needed_requests`, `few_samples_caveat`);
- `starts`: a configuration's repetitions spread over several server starts (`spread_reps`,
  `merge_starts`).

Pure: plain data in, plain data out; no store, no engine.
"""

from jobs.core.noise._brackets import CLOSING, Bracket, bracket_of, closing_run
from jobs.core.noise._judged import Noise, noise_of
from jobs.core.noise._spread import MIN_BATCHES, Point, Spread, judge_change, spread_of
from jobs.core.noise._starts import MAX_STARTS, merge_starts, spread_reps
from jobs.core.noise._tails import (
    few_samples_caveat,
    needed_requests,
    percentile_of,
    slo_sample_problem,
)

__all__ = [
    "CLOSING", "MAX_STARTS", "MIN_BATCHES", "Bracket", "Noise", "Point", "Spread", "bracket_of",
    "closing_run", "few_samples_caveat", "judge_change", "merge_starts", "needed_requests",
    "noise_of", "percentile_of", "slo_sample_problem", "spread_of", "spread_reps",
]
