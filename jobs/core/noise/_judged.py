"""What one comparison is judged against besides both runs' repetitions (docs/contracts.md
"Noise, measured"): the baseline's closing bracket, the host's drift, a noise figure.

- The closing bracket's samples widen the baseline's range.
- A drift beyond noise makes every change not larger than |drift| + the minimum effect
  inconclusive.
- A single repetition on a side is no noise estimate: a verdict needs a noise figure from
  elsewhere (the spread of the baseline's two brackets, or the configuration's spread across
  earlier batches), and a change within that figure is inconclusive.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.core.noise._brackets import bracket_of
from jobs.core.noise._spread import Spread
from jobs.core.records import RunRecord


@dataclass(frozen=True)
class Noise:
    """The noise a comparison is judged against besides its repetitions' ranges."""

    base_extra: tuple[float, ...] = ()  # more samples of the baseline: its closing bracket
    drift_pct: float | None = None  # the host's drift during the batch, when beyond noise
    figure_pct: float | None = None  # what a change must exceed when a side has one sample
    figure_from: str = ""  # where the figure comes from, in words


def noise_of(
    baseline: RunRecord, *, metric: str, min_effect_pct: float, history: Spread | None = None
) -> Noise:
    """The noise a comparison against `baseline` (one level of it) is judged against:
    its closing bracket where the batch was bracketed, else `history` (the baseline's spread
    across earlier batches on this host and stack) for its noise figure."""
    bracket = bracket_of(baseline, metric)
    if bracket is not None and bracket.first and bracket.second:
        first, _ = bracket.medians
        assert first is not None
        samples = bracket.samples
        figure = None if first == 0 else (max(samples) - min(samples)) / abs(first) * 100.0
        drift = bracket.drift_pct if bracket.is_beyond(min_effect_pct) else None
        return Noise(base_extra=bracket.second, drift_pct=drift, figure_pct=figure,
                     figure_from="spread of the baseline's first and last runs")
    if history is not None:
        return Noise(figure_pct=history.width_pct,
                     figure_from=f"spread of the baseline over {history.n} earlier batches")
    return Noise()
